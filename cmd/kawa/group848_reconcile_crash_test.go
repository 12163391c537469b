package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// reconcileParts is the partition count of TestConsumerGroupSIGKILLMidReconciliation's topic.
const reconcileParts = 12

// gate holds members between a poll and its commit while the test has it shut; waiting counts the
// members held.
type gate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	shut    bool
	waiting int
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) pass() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting++
	for g.shut {
		g.cond.Wait()
	}
	g.waiting--
}

func (g *gate) set(shut bool) {
	g.mu.Lock()
	g.shut = shut
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *gate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// reconcileLedger is the test's view of the group, fed by the members' callbacks and polls: a
// partition is held from the assignment callback until the revoke (or lost) callback.
type reconcileLedger struct {
	mu         sync.Mutex
	holder     map[int32]int
	consumed   map[int32]map[int64]bool
	acked      map[int32]int64 // highest acknowledged commit per partition
	violations []string
	commitErrs []string
}

func newReconcileLedger() *reconcileLedger {
	return &reconcileLedger{holder: map[int32]int{}, consumed: map[int32]map[int64]bool{}, acked: map[int32]int64{}}
}

func (l *reconcileLedger) assigned(m int, ps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps["t"] {
		if o, ok := l.holder[p]; ok && o != m {
			l.violations = append(l.violations, fmt.Sprintf("partition %d assigned to member %d while member %d holds it", p, m, o))
		}
		l.holder[p] = m
	}
}

func (l *reconcileLedger) revoked(m int, ps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps["t"] {
		if l.holder[p] == m {
			delete(l.holder, p)
		}
	}
}

func (l *reconcileLedger) process(m int, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.holder[r.Partition]; !ok || o != m {
		l.violations = append(l.violations, fmt.Sprintf("member %d consumed %d@%d without holding it (holder %d, held %v)", m, r.Partition, r.Offset, o, ok))
	}
	if l.consumed[r.Partition] == nil {
		l.consumed[r.Partition] = map[int64]bool{}
	}
	l.consumed[r.Partition][r.Offset] = true
}

func (l *reconcileLedger) committed(m int, recs []*kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.commitErrs = append(l.commitErrs, fmt.Sprintf("member %d: %v", m, err))
		return
	}
	for _, r := range recs {
		l.acked[r.Partition] = max(l.acked[r.Partition], r.Offset+1)
	}
}

// holders is the number of members holding partitions, and whether all partitions are held.
func (l *reconcileLedger) holders() (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hs := map[int]bool{}
	for _, m := range l.holder {
		hs[m] = true
	}
	return len(hs), len(l.holder) == reconcileParts
}

func (l *reconcileLedger) ackedCommits() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range l.acked {
		out[p] = o
	}
	return out
}

func (l *reconcileLedger) covers(acks map[int32][]int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, offs := range acks {
		for _, o := range offs {
			if !l.consumed[p][o] {
				return false
			}
		}
	}
	return true
}

// reconcileMember is a franz-go KIP-848 member (kgo.ServerSideBalancer, "uniform") that blocks
// rebalances while it processes a poll (kgo.BlockRebalanceOnPoll): it polls, records what it got,
// passes the gate, commits and only then lets a revocation through.
type reconcileMember struct {
	cl     *kgo.Client
	gate   *gate
	cancel context.CancelFunc
	done   chan struct{}
}

func startReconcileMember(t *testing.T, addr string, id int, led *reconcileLedger, g *gate) *reconcileMember {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl := newClient(t, addr, kgo.ClientID(fmt.Sprintf("member-%d", id)), kgo.ConsumerGroup("g848-reconcile"), kgo.ConsumeTopics("t"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.RetryTimeout(time.Minute),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { led.assigned(id, ps) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { led.revoked(id, ps) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { led.revoked(id, ps) }))
	m := &reconcileMember{cl: cl, gate: g, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			recs := cl.PollRecords(pctx, 100).Records()
			pcancel()
			for _, r := range recs {
				led.process(id, r)
			}
			g.pass()
			if len(recs) > 0 {
				cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
				led.committed(id, recs, cl.CommitRecords(cctx, recs...))
				ccancel()
			}
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *reconcileMember) stop() {
	m.cancel()
	m.gate.set(false) // a test that failed with the gate shut must not leave its members (and cleanup) held
	<-m.done
	m.cl.Close() // leaves the group
}

// describe848 is ConsumerGroupDescribe's state, group epoch and number of members of group.
func describe848(t *testing.T, ctx context.Context, cl *kgo.Client, group string) (string, int32, int) {
	t.Helper()
	g := consumerGroupOf(t, ctx, cl, group)
	return g.State, g.Epoch, len(g.Members)
}

// TestConsumerGroupSIGKILLMidReconciliation (issue 15 acceptance): a real kawa process, three
// franz-go KIP-848 members on 12 partitions with a producer writing throughout. The members are
// held between a poll and its commit, a fourth member joins, and the broker is SIGKILLed while
// the group is Reconciling (the old members owe revocations, the new one waits for them). After
// the restart on the same data dir the group has the same epoch and members, the members resume
// with their epochs, commit and release, and the fourth member gets its partitions. From the
// members' callbacks no partition ever has two holders; the committed offsets after the restart
// are at least the last acknowledged commit before the kill and never go back; every
// acknowledged record is consumed.
func TestConsumerGroupSIGKILLMidReconciliation(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	flags := []string{"--listen", addr, "--group-consumer-session-timeout", "10s", "--group-consumer-heartbeat-interval", "250ms"}
	p := startKawa(t, dir, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newClient(t, addr, kgo.RetryTimeout(time.Minute))
	created, err := kadm.NewClient(admin).CreateTopic(ctx, reconcileParts, 1, nil, "t")
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	prod := kawatest.StartProducer(t, newClient(t, addr, kgo.RetryTimeout(time.Minute)), "t", reconcileParts)
	led, g := newReconcileLedger(), newGate()
	var ms []*reconcileMember
	for i := range 3 {
		ms = append(ms, startReconcileMember(t, addr, i, led, g))
	}
	wait.Until(t, 30*time.Second, "three members holding all partitions, with commits", func() bool {
		n, all := led.holders()
		return n == 3 && all && len(led.ackedCommits()) == reconcileParts
	})

	g.set(true)
	wait.Until(t, 20*time.Second, "the three members held at the gate", func() bool { return g.held() == 3 })
	ms = append(ms, startReconcileMember(t, addr, 3, led, g))
	var epoch int32
	wait.Until(t, 20*time.Second, "the group Reconciling with four members", func() bool {
		state, e, n := describe848(t, ctx, admin, "g848-reconcile")
		epoch = e
		return state == "Reconciling" && n == 4
	})
	before := led.ackedCommits()
	fetched := committedOffsets(t, ctx, admin, "g848-reconcile", "t", reconcileParts)

	p.Kill()
	startKawa(t, dir, flags...)
	restarted := time.Now()

	state, e, n := describe848(t, ctx, admin, "g848-reconcile")
	if state != "Reconciling" || e != epoch || n != 4 {
		t.Fatalf("after the restart: %s at epoch %d with %d members; want Reconciling at epoch %d with 4", state, e, n, epoch)
	}
	after := committedOffsets(t, ctx, admin, "g848-reconcile", "t", reconcileParts)
	for part := int32(0); part < reconcileParts; part++ {
		if after[part] < before[part] || after[part] < fetched[part] {
			t.Errorf("partition %d: committed %d after the restart, below the acknowledged %d (fetched %d before the kill)", part, after[part], before[part], fetched[part])
		}
	}
	g.set(false)
	wait.Until(t, 30*time.Second, "four members holding all partitions", func() bool {
		n, all := led.holders()
		return n == 4 && all
	})
	settledIn := time.Since(restarted)
	_, settled, _ := describe848(t, ctx, admin, "g848-reconcile")
	acks := map[int32][]int64{}
	for _, a := range prod.Stop(t) {
		acks[a.Partition] = append(acks[a.Partition], a.Offset)
	}
	wait.Until(t, 30*time.Second, "every acknowledged record consumed", func() bool { return led.covers(acks) })
	last := committedOffsets(t, ctx, admin, "g848-reconcile", "t", reconcileParts)
	for _, m := range ms {
		m.stop()
	}
	final := committedOffsets(t, ctx, admin, "g848-reconcile", "t", reconcileParts)
	led.mu.Lock()
	defer led.mu.Unlock()
	for part := int32(0); part < reconcileParts; part++ {
		if last[part] < after[part] || final[part] < last[part] {
			t.Errorf("partition %d: committed offsets went back: %d after the restart, %d later, %d at the end", part, after[part], last[part], final[part])
		}
	}
	for _, v := range led.violations {
		t.Error(v)
	}
	for _, e := range led.commitErrs {
		t.Errorf("commit failed: %s", e)
	}
	total := 0
	for _, offs := range acks {
		total += len(offs)
	}
	t.Logf("killed at group epoch %d (Reconciling, 4 members); four holders %v after the restart (gate opened at once), group epoch %d; %d records acknowledged and consumed",
		epoch, settledIn.Round(time.Millisecond), settled, total)
}
