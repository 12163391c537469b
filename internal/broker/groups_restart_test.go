package broker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// rebalanceWatch records a kgo group member's rebalance callbacks and counts
// heartbeats the broker answered (kgo.HookBrokerE2E).
type rebalanceWatch struct {
	mu                      sync.Mutex
	assigned, revoked, lost int
	heartbeats              int
	changed                 chan struct{} // closed and replaced on every change
}

func newRebalanceWatch() *rebalanceWatch { return &rebalanceWatch{changed: make(chan struct{})} }

func (w *rebalanceWatch) bump(f func()) {
	w.mu.Lock()
	f()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

func (w *rebalanceWatch) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == 12 && e2e.Err() == nil {
		w.bump(func() { w.heartbeats++ })
	}
}

func (w *rebalanceWatch) opts() []kgo.Opt {
	return []kgo.Opt{
		kgo.WithHooks(w),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { w.bump(func() { w.assigned++ }) }),
		kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) { w.bump(func() { w.revoked++ }) }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { w.bump(func() { w.lost++ }) }),
	}
}

// waitFor blocks until cond holds (checked on every change) or ctx ends.
func (w *rebalanceWatch) waitFor(t *testing.T, ctx context.Context, what string, cond func(w *rebalanceWatch) bool) {
	t.Helper()
	for {
		w.mu.Lock()
		ok, ch := cond(w), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// TestGroupSurvivesBrokerRestart: issue 11 item 6. Kafka keeps group
// metadata (members, generation, protocol, leader, assignments) in
// __consumer_offsets, so after a broker restart a Stable group resumes at its
// generation and its members keep their partitions through heartbeats, with
// no rebalance. A real kgo consumer stays connected across an in-process
// restart on the same data dir and address.
func TestGroupSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k.CreateTopic("gr", 2, nil)
	produceValues(t, k, "gr", 0, 5)
	produceValues(t, k, "gr", 1, 5)

	w := newRebalanceWatch()
	m, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(k.Addr)}, memberOpts("g-restart", "gr")...), w.opts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for got := 0; got < 10; {
		fs := m.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	before := describeGroup(t, k.Admin(), "g-restart")
	if before.State != "Stable" || len(before.Members) != 1 {
		t.Fatalf("before restart: %s with %d members", before.State, len(before.Members))
	}
	w.waitFor(t, ctx, "the first assignment", func(w *rebalanceWatch) bool { return w.assigned == 1 })
	_, genBefore := m.GroupMetadata()

	// Restart on the same address, so the client's connections come back to it.
	k.Close()
	cfg := k.Config
	cfg.Listen = k.Addr
	k = kawatest.Start(t, cfg)

	after := describeGroup(t, k.Admin(), "g-restart")
	if after.State != "Stable" || len(after.Members) != 1 || after.Members[0].MemberID != before.Members[0].MemberID {
		t.Fatalf("after restart: %s with members %+v, want Stable with member %s", after.State, after.Members, before.Members[0].MemberID)
	}
	w.mu.Lock()
	hb := w.heartbeats
	w.mu.Unlock()
	// Five answered heartbeats at 250 ms: an UNKNOWN_MEMBER_ID or
	// ILLEGAL_GENERATION answer would have made kgo drop its partitions and rejoin.
	w.waitFor(t, ctx, "heartbeats after the restart", func(w *rebalanceWatch) bool { return w.heartbeats >= hb+5 })
	produceValues(t, k, "gr", 0, 3)
	produceValues(t, k, "gr", 1, 3)
	for got := 0; got < 6; {
		fs := m.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	w.mu.Lock()
	assigned, revoked, lost := w.assigned, w.revoked, w.lost
	w.mu.Unlock()
	if assigned != 1 || revoked != 0 || lost != 0 {
		t.Fatalf("callbacks across the restart: assigned %d, revoked %d, lost %d; want 1, 0, 0 (no rebalance)", assigned, revoked, lost)
	}
	final := describeGroup(t, k.Admin(), "g-restart")
	if final.State != "Stable" || len(final.Members) != 1 || final.Members[0].MemberID != before.Members[0].MemberID {
		t.Fatalf("at the end: %s with %+v", final.State, final.Members)
	}
	if id, gen := m.GroupMetadata(); id != before.Members[0].MemberID || gen != genBefore {
		t.Fatalf("client's member %s generation %d at the end, want %s generation %d", id, gen, before.Members[0].MemberID, genBefore)
	}
}
