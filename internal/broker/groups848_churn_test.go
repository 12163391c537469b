package broker_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// Topics of the churn test: members 0, 1 and 3 subscribe to churnNamed by name, member 2 to
// churnRegex (resolved by the broker), which churnNamed and the later churnLate match.
const (
	churnNamed, churnLate, churnRegex = "churn-a", "churn-b", "^churn-"
	churnNamedParts, churnLateParts   = 12, 4
	churnRegexMember                  = 2
)

// TestConsumerGroupChurn848 (issue 15 acceptance, first item): franz-go members of a KIP-848
// group (kgo.ServerSideBalancer, "uniform" and "range" on two brokers at once), 12 partitions,
// three members; a fourth joins, a topic matching the regex member's subscription is created,
// one member is cut off without leaving. Ownership comes from the members' own callbacks and is
// checked on every poll: no partition ever has two live holders (KAFKA-16147), no member consumes
// a partition it does not hold, name subscribers never get the late topic; every acknowledged
// record is consumed at least once; the group's committed offsets, read after every commit,
// never go backwards.
func TestConsumerGroupChurn848(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		bal  kgo.GroupBalancer
	}{{"uniform", kgo.StickyBalancer()}, {"range", kgo.RangeBalancer()}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runChurn848(t, c.bal)
		})
	}
}

func runChurn848(t *testing.T, bal kgo.GroupBalancer) {
	k := kawatest.NewBroker(t, consumerProtocol)
	const group = "churn"
	k.CreateTopic(churnNamed, churnNamedParts, nil)
	led := newChurnLedger(k, group)
	prodA := startBgProducer(t, k, churnNamed, churnNamedParts)
	ssb := kgo.ServerSideBalancer()
	member := func(i int) *loopMember {
		if i == churnRegexMember {
			return startMember(t, k, i, group, churnRegex, bal, led, ssb, kgo.ConsumeRegex(), kgo.MetadataMinAge(100*time.Millisecond))
		}
		return startMember(t, k, i, group, churnNamed, bal, led, ssb)
	}
	ms := []*loopMember{member(0), member(1), member(2)}
	named := led.partitions(churnNamed, churnNamedParts)
	wait.Until(t, 20*time.Second, "three members holding all of "+churnNamed, func() bool {
		return led.heldByLive(named, 3) && led.consumedCount() > 100
	})

	ms = append(ms, member(3))
	wait.Until(t, 20*time.Second, "four members holding all of "+churnNamed, func() bool { return led.heldByLive(named, 4) })

	k.CreateTopic(churnLate, churnLateParts, nil)
	created := time.Now()
	prodB := startBgProducer(t, k, churnLate, churnLateParts)
	late := led.partitions(churnLate, churnLateParts)
	wait.Until(t, 20*time.Second, "the regex member consuming "+churnLate, func() bool {
		return len(led.heldBy(churnRegexMember, churnLate)) == churnLateParts && led.consumedAfter(late, created)
	})

	moved := led.heldBy(0, churnNamed)
	if len(moved) == 0 {
		t.Fatalf("member 0 holds nothing of %s before the kill", churnNamed)
	}
	killedAt := time.Now()
	ms[0].kill()
	wait.Until(t, 30*time.Second, "member 0's partitions consumed by live members", func() bool {
		return led.heldByLive(named, 3) && led.consumedAfter(moved, killedAt)
	})

	acked := map[string][]kawatest.Ack{churnNamed: prodA.Stop(t), churnLate: prodB.Stop(t)}
	wait.Until(t, 20*time.Second, "every acknowledged record consumed", func() bool { return led.covers(acked) })
	for _, m := range ms[1:] {
		m.stop()
	}
	led.stop()

	led.mu.Lock()
	defer led.mu.Unlock()
	for _, v := range led.violations {
		t.Error(v)
	}
	if led.commitErrs > 0 {
		t.Errorf("%d commits failed", led.commitErrs)
	}
	if led.samples == 0 {
		t.Error("committed offsets were never read")
	}
	t.Logf("%d+%d records acknowledged, %d consumed again after a move; member 0 held %v; %d committed-offset reads",
		len(acked[churnNamed]), len(acked[churnLate]), led.redelivered(), moved, led.samples)
}

// churnPart is one partition of one topic.
type churnPart struct {
	topic string
	p     int32
}

func (c churnPart) String() string { return fmt.Sprintf("%s/%d", c.topic, c.p) }

// churnLedger is the test's view of a multi-topic group, fed by the members (memberLedger) and
// by OffsetFetch after each commit (its own goroutine, ended by stop).
type churnLedger struct {
	mu         sync.Mutex
	holder     map[churnPart]int // partition → live member holding it
	dead       map[int]bool
	consumed   map[churnPart]map[int64]int // offset → times consumed
	lastAt     map[churnPart]time.Time     // last record consumed
	committed  map[churnPart]int64         // last committed offset OffsetFetch showed
	violations []string
	commitErrs int
	samples    int

	adm     *kadm.Client
	group   string
	commits chan struct{} // one pending "read the committed offsets"
	quit    chan struct{}
	done    chan struct{}
}

func newChurnLedger(k *kawatest.Broker, group string) *churnLedger {
	l := &churnLedger{
		holder: map[churnPart]int{}, dead: map[int]bool{}, consumed: map[churnPart]map[int64]int{},
		lastAt: map[churnPart]time.Time{}, committed: map[churnPart]int64{},
		adm: k.Admin(), group: group, commits: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	go l.watchCommits()
	return l
}

// watchCommits reads the group's committed offsets after each commit (coalesced) until stop.
func (l *churnLedger) watchCommits() {
	defer close(l.done)
	for {
		select {
		case <-l.quit:
			l.readCommitted() // the last commits
			return
		case <-l.commits:
			l.readCommitted()
		}
	}
}

func (l *churnLedger) readCommitted() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os, err := l.adm.FetchOffsets(ctx, l.group)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.violations = append(l.violations, fmt.Sprintf("OffsetFetch: %v", err))
		return
	}
	l.samples++
	os.Each(func(o kadm.OffsetResponse) {
		k := churnPart{o.Topic, o.Partition}
		if o.Err != nil {
			l.violations = append(l.violations, fmt.Sprintf("OffsetFetch %v: %v", k, o.Err))
			return
		}
		if prev, ok := l.committed[k]; ok && o.At < prev {
			l.violations = append(l.violations, fmt.Sprintf("committed offset of %v went back from %d to %d", k, prev, o.At))
		}
		l.committed[k] = max(l.committed[k], o.At)
	})
}

// stop ends watchCommits after one last read.
func (l *churnLedger) stop() {
	close(l.quit)
	<-l.done
}

func (l *churnLedger) assigned(m int, ps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead[m] {
		return
	}
	for topic, parts := range ps {
		for _, p := range parts {
			k := churnPart{topic, p}
			if o, ok := l.holder[k]; ok && o != m {
				l.violations = append(l.violations, fmt.Sprintf("%v assigned to member %d while member %d holds it", k, m, o))
			}
			if topic != churnNamed && m != churnRegexMember {
				l.violations = append(l.violations, fmt.Sprintf("%v assigned to member %d, subscribed to %s only", k, m, churnNamed))
			}
			l.holder[k] = m
		}
	}
}

func (l *churnLedger) revoked(m int, ps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for topic, parts := range ps {
		for _, p := range parts {
			if k := (churnPart{topic, p}); l.holder[k] == m {
				delete(l.holder, k)
			}
		}
	}
}

func (l *churnLedger) died(m int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead[m] = true
	maps.DeleteFunc(l.holder, func(_ churnPart, o int) bool { return o == m })
}

// process is called for each record of a poll, before the member lets a rebalance in: the
// member must hold the record's partition.
func (l *churnLedger) process(m int, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := churnPart{r.Topic, r.Partition}
	if o, ok := l.holder[k]; !ok || o != m {
		l.violations = append(l.violations, fmt.Sprintf("member %d consumed %v@%d without holding it (holder %d, held %v)", m, k, r.Offset, o, ok))
	}
	if l.consumed[k] == nil {
		l.consumed[k] = map[int64]int{}
	}
	l.consumed[k][r.Offset]++
	l.lastAt[k] = time.Now()
}

func (l *churnLedger) commit(_ []*kgo.Record, err error) {
	l.mu.Lock()
	if err != nil {
		l.commitErrs++
	}
	l.mu.Unlock()
	select {
	case l.commits <- struct{}{}:
	default: // a read is already due; it will see this commit
	}
}

func (l *churnLedger) partitions(topic string, n int32) []churnPart {
	ks := make([]churnPart, n)
	for i := range ks {
		ks[i] = churnPart{topic, int32(i)}
	}
	return ks
}

// heldByLive: every one of ks has a live holder, and n members hold them.
func (l *churnLedger) heldByLive(ks []churnPart, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	holders := map[int]bool{}
	for _, k := range ks {
		o, ok := l.holder[k]
		if !ok {
			return false
		}
		holders[o] = true
	}
	return len(holders) == n
}

func (l *churnLedger) heldBy(m int, topic string) []churnPart {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []churnPart
	for k, o := range l.holder {
		if o == m && k.topic == topic {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b churnPart) int { return int(a.p - b.p) })
	return ks
}

// consumedAfter: a record of each of ks was consumed after t.
func (l *churnLedger) consumedAfter(ks []churnPart, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range ks {
		if !l.lastAt[k].After(t) {
			return false
		}
	}
	return true
}

func (l *churnLedger) consumedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, offs := range l.consumed {
		n += len(offs)
	}
	return n
}

func (l *churnLedger) covers(acked map[string][]kawatest.Ack) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for topic, as := range acked {
		for _, a := range as {
			if l.consumed[churnPart{topic, a.Partition}][a.Offset] == 0 {
				return false
			}
		}
	}
	return true
}

// redelivered counts records consumed more than once (caller holds mu): at least once allows
// them after a kill, whose uncommitted poll the new holder reads again.
func (l *churnLedger) redelivered() int {
	n := 0
	for _, offs := range l.consumed {
		for _, c := range offs {
			if c > 1 {
				n++
			}
		}
	}
	return n
}
