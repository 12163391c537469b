package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestGroupKilledMember (issue 4 acceptance): three franz-go members share
// a 6-partition topic while a producer keeps writing; one member is cut off
// the network without leaving. Run for cooperative-sticky and range at once
// (two brokers, interleaved steps, so the session timeouts overlap).
// Checked exactly: no partition ever has two live owners; the coordinator
// notices only by session timeout; the dead member's partitions move and
// each new owner starts at the last acknowledged commit; every acknowledged
// record, including those written during the rebalance, is processed
// exactly once (members commit after processing and block rebalances until
// they have committed).
func TestGroupKilledMember(t *testing.T) {
	t.Parallel()
	scs := []*killScenario{
		startKillScenario(t, "cooperative-sticky", kgo.CooperativeStickyBalancer(), nil),
		startKillScenario(t, "range", kgo.RangeBalancer(), nil),
	}
	runKillScenarios(t, scs)
}

// runKillScenarios waits for each scenario's group to balance, kills a member of each, waits
// for its partitions to move and more records to arrive, and checks each ledger.
func runKillScenarios(t *testing.T, scs []*killScenario) {
	for _, s := range scs {
		wait.Until(t, 20*time.Second, s.name+": three members owning all partitions and consuming", func() bool {
			return s.led.balanced(3) && s.led.processedCount() > 100
		})
	}
	for _, s := range scs {
		s.kill()
	}
	for _, s := range scs {
		wait.Until(t, 30*time.Second, s.name+": the victim's partitions to resume elsewhere", func() bool {
			return s.led.resumedAll(s.moved, s.killedAt)
		})
		s.noticed = s.led.reassignedAfter(s.moved, s.killedAt)
	}
	// Keep producing a little after the rebalance: some records acknowledged
	// after each group noticed the kill, which the members must process too.
	for _, s := range scs {
		wait.Until(t, 20*time.Second, s.name+": records acknowledged after the rebalance", func() bool {
			return s.prod.AckedBetween(s.noticed, time.Now().Add(time.Hour)) >= 20
		})
	}
	for _, s := range scs {
		s.finish(t)
	}
}

const killTopicPartitions = 6

// killScenario is one broker, group, producer and three members.
type killScenario struct {
	name     string
	led      *groupLedger
	prod     *kawatest.Producer
	members  []*loopMember
	moved    []int32 // the victim's partitions when it was killed
	killedAt time.Time
	noticed  time.Time // first reassignment of a moved partition
}

func startKillScenario(t *testing.T, name string, balancer kgo.GroupBalancer, member []kgo.Opt, broker ...kawatest.Option) *killScenario {
	k := kawatest.NewBroker(t, broker...)
	const topic, group = "orders", "g"
	k.CreateTopic(topic, killTopicPartitions, nil)
	s := &killScenario{name: name, led: newGroupLedger(), prod: startBgProducer(t, k, topic, killTopicPartitions)}
	for i := 0; i < 3; i++ {
		s.members = append(s.members, startMember(t, k, i, group, topic, balancer, s.led, member...))
	}
	return s
}

// kill cuts member 0 off between two of its polls.
func (s *killScenario) kill() {
	s.moved = s.led.owned(0)
	s.killedAt = time.Now()
	s.members[0].kill()
}

// finish stops the producer, waits until every acknowledged record was
// processed, stops the members and checks the ledger.
func (s *killScenario) finish(t *testing.T) {
	noticed := s.noticed
	acked := s.prod.Stop(t)
	led := s.led
	wait.Until(t, 20*time.Second, s.name+": every acknowledged record processed", func() bool { return led.covers(acked) })
	for _, m := range s.members[1:] {
		m.stop()
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for _, o := range led.overlaps {
		t.Errorf("%s: %s", s.name, o)
	}
	for _, r := range led.resumes {
		if r.got != r.want {
			t.Errorf("%s: member %d resumed partition %d at %d, last acknowledged commit was %d", s.name, r.member, r.partition, r.got, r.want)
		}
	}
	if d := noticed.Sub(s.killedAt); d < groupSession-2*time.Second {
		t.Errorf("%s: partitions moved %v after the kill: sooner than the %v session timeout allows", s.name, d, groupSession)
	}
	if led.commitErrs > 0 {
		t.Errorf("%s: %d commits failed", s.name, led.commitErrs)
	}
	during := s.prod.AckedBetween(s.killedAt, noticed)
	if during == 0 {
		t.Errorf("%s: no record was produced during the rebalance", s.name)
	}
	if dups := led.duplicates(); len(dups) > 0 {
		t.Errorf("%s: records processed twice: %v", s.name, dups)
	}
	t.Logf("%s: moved %v after %v; %d records acked, %d during the rebalance; %d resume checks", s.name,
		s.moved, noticed.Sub(s.killedAt).Round(time.Millisecond), len(acked), during, len(led.resumes))
}

// groupLedger is the test's view of the group, fed by the members' callbacks.
type groupLedger struct {
	mu         sync.Mutex
	owner      map[int32]int           // partition → live member owning it
	dead       map[int]bool            // members that crashed
	overlaps   []string                // assignments to a partition a live member still owned
	committed  map[int32]int64         // last acknowledged commit per partition
	expect     map[int]map[int32]int64 // member → newly assigned partition → first offset expected
	resumes    []resumeCheck           // first records after an assignment
	assignedAt map[int32]time.Time     // when each partition was last assigned
	processed  map[int32]map[int64]int // partition → offset → times processed
	commitErrs int
}

type resumeCheck struct {
	member    int
	partition int32
	want, got int64
	at        time.Time
}

func newGroupLedger() *groupLedger {
	return &groupLedger{
		owner: map[int32]int{}, dead: map[int]bool{}, committed: map[int32]int64{},
		expect: map[int]map[int32]int64{}, assignedAt: map[int32]time.Time{}, processed: map[int32]map[int64]int{},
	}
}

func (l *groupLedger) assigned(m int, ps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead[m] {
		return
	}
	if l.expect[m] == nil {
		l.expect[m] = map[int32]int64{}
	}
	for _, parts := range ps {
		for _, p := range parts {
			if o, ok := l.owner[p]; ok && o != m {
				l.overlaps = append(l.overlaps, fmt.Sprintf("partition %d assigned to member %d while member %d owns it", p, m, o))
			}
			l.owner[p] = m
			l.expect[m][p] = l.committed[p] // 0 when nothing is committed: members reset to the start
			l.assignedAt[p] = time.Now()
		}
	}
}

func (l *groupLedger) revoked(m int, ps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead[m] {
		return
	}
	for _, parts := range ps {
		for _, p := range parts {
			if l.owner[p] == m {
				delete(l.owner, p)
			}
			delete(l.expect[m], p)
		}
	}
}

// died marks m crashed: its partitions have no live owner any more.
func (l *groupLedger) died(m int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead[m] = true
	for p, o := range l.owner {
		if o == m {
			delete(l.owner, p)
		}
	}
}

func (l *groupLedger) process(m int, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if want, ok := l.expect[m][r.Partition]; ok {
		l.resumes = append(l.resumes, resumeCheck{member: m, partition: r.Partition, want: want, got: r.Offset, at: time.Now()})
		delete(l.expect[m], r.Partition)
	}
	if l.processed[r.Partition] == nil {
		l.processed[r.Partition] = map[int64]int{}
	}
	l.processed[r.Partition][r.Offset]++
}

func (l *groupLedger) commit(rs []*kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.commitErrs++
		return
	}
	for _, r := range rs {
		l.committed[r.Partition] = max(l.committed[r.Partition], r.Offset+1)
	}
}

// balanced: every partition has a live owner and n members own some.
func (l *groupLedger) balanced(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	owners := map[int]bool{}
	for _, o := range l.owner {
		owners[o] = true
	}
	return len(l.owner) == killTopicPartitions && len(owners) == n
}

func (l *groupLedger) owned(m int) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ps []int32
	for p, o := range l.owner {
		if o == m {
			ps = append(ps, p)
		}
	}
	return ps
}

// resumedAll: each of ps was assigned after t and its new owner processed
// a record from it.
func (l *groupLedger) resumedAll(ps []int32, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		ok := false
		for _, r := range l.resumes {
			ok = ok || (r.partition == p && r.at.After(t))
		}
		if !ok {
			return false
		}
	}
	return true
}

// reassignedAfter is the earliest assignment of any of ps after t.
func (l *groupLedger) reassignedAfter(ps []int32, t time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, p := range ps {
		if at := l.assignedAt[p]; at.After(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

func (l *groupLedger) processedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ps := range l.processed {
		n += len(ps)
	}
	return n
}

func (l *groupLedger) covers(acked []kawatest.Ack) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range acked {
		if l.processed[a.Partition][a.Offset] == 0 {
			return false
		}
	}
	return true
}

// duplicates lists "p/offset" of records processed more than once (caller
// holds mu).
func (l *groupLedger) duplicates() []string {
	var out []string
	for p, offs := range l.processed {
		for o, n := range offs {
			if n > 1 {
				out = append(out, fmt.Sprintf("%d/%d×%d", p, o, n))
			}
		}
	}
	return out
}

// memberLedger is what a loopMember reports to: its callbacks, each record
// it processed, each commit's answer, and its crash.
type memberLedger interface {
	assigned(m int, ps map[string][]int32)
	revoked(m int, ps map[string][]int32)
	died(m int)
	process(m int, r *kgo.Record)
	commit(rs []*kgo.Record, err error)
}

// loopMember is one group consumer: poll, process, commit, allow rebalance.
type loopMember struct {
	id       int
	cl       *crashableClient
	ctx      context.Context
	cancel   context.CancelFunc
	crash    chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func startMember(t *testing.T, k *kawatest.Broker, id int, group, topic string, bal kgo.GroupBalancer, led memberLedger, extra ...kgo.Opt) *loopMember {
	ctx, cancel := context.WithCancel(context.Background())
	m := &loopMember{id: id, ctx: ctx, cancel: cancel, crash: make(chan struct{}), done: make(chan struct{})}
	opts := append(memberOpts(group, topic), kgo.Balancers(bal), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ClientID(fmt.Sprintf("member-%d", id)),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { led.assigned(id, ps) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { led.revoked(id, ps) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { led.revoked(id, ps) }))
	opts = append(opts, extra...)
	m.cl = newCrashable(t, k.Addr, opts...)
	go m.run(led)
	t.Cleanup(m.stop)
	return m
}

func (m *loopMember) run(led memberLedger) {
	defer close(m.done)
	for {
		fs := m.cl.PollRecords(m.ctx, 50)
		if m.ctx.Err() != nil {
			select {
			case <-m.crash:
				led.died(m.id)
				m.cl.Crash()
			default:
			}
			return
		}
		recs := fs.Records()
		for _, r := range recs {
			led.process(m.id, r)
		}
		if len(recs) > 0 {
			// Not m.ctx: a kill waits for this commit's answer, so the
			// ledger knows exactly what the dead member committed.
			led.commit(recs, m.cl.CommitRecords(context.Background(), recs...))
		}
		m.cl.AllowRebalance()
	}
}

// kill makes the member crash between two polls: everything it processed
// is committed, nothing is in flight, and it never leaves the group.
func (m *loopMember) kill() {
	close(m.crash)
	m.stop()
}

// stop ends the member's loop (a live member's client is closed, leaving
// the group, at cleanup).
func (m *loopMember) stop() {
	m.stopOnce.Do(func() {
		m.cancel()
		<-m.done
	})
}

// startBgProducer writes one record every 2 ms round-robin over topic's
// partitions (kawatest.Producer) and records every acknowledgement.
func startBgProducer(t *testing.T, k *kawatest.Broker, topic string, partitions int32) *kawatest.Producer {
	return kawatest.StartProducer(t, k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, partitions)
}
