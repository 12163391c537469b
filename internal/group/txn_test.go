package group

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnCommitReq(cl *client, pid int64, epoch int16, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	r.TransactionalID = "tx"
	r.Group, r.ProducerID, r.ProducerEpoch = cl.group, pid, epoch
	r.Generation, r.MemberID, r.InstanceID = cl.gen, cl.id, cl.instance
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset = p, o
		t.Partitions = append(t.Partitions, tp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func txnCode(c *Coordinator, r *kmsg.TxnOffsetCommitRequest) int16 {
	resp := c.TxnOffsetCommit(context.Background(), r)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// BL-15: a commit marker applied while the group rebalances makes the staged offset visible; an
// abort brings back the previous committed offset; neither leaves UNSTABLE_OFFSET_COMMIT behind,
// including after a restart.
func TestTxnMarkerDuringRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		m1 := newClient(c, "G", "m1")
		stableGroup(t, ctx, m1)
		c.OffsetCommit(ctx, commitReq("G", m1.gen, m1.id, "t", map[int32]int64{0: 50}))

		wantCode(t, "stage p0->100", txnCode(c, txnCommitReq(m1, 7, 0, "t", map[int32]int64{0: 100})), nil)
		assertFetch(t, c, true, fetched{-1, -1, kerr.UnstableOffsetCommit.Code})
		assertFetch(t, c, false, fetched{50, 3, 0}) // staged offsets are invisible

		m2 := newClient(c, "G", "m2")
		go m2.join(ctx)
		synctest.Wait()
		if d := describe(c, 5, "G"); d.State != "PreparingRebalance" {
			t.Fatalf("state %s, want a rebalance in progress", d.State)
		}
		if err := c.CompleteTxn(ctx, "G", 7, true); err != nil {
			t.Fatalf("commit marker: %v", err)
		}
		assertFetch(t, c, true, fetched{100, -1, 0})

		// The next transaction aborts: 100 stays.
		wantCode(t, "stage p0->200", txnCode(c, txnCommitReq(m1, 7, 0, "t", map[int32]int64{0: 200})), nil)
		if err := c.CompleteTxn(ctx, "G", 7, false); err != nil {
			t.Fatalf("abort marker: %v", err)
		}
		assertFetch(t, c, true, fetched{100, -1, 0})
		if err := c.CompleteTxn(ctx, "G", 7, true); err != nil { // a resent marker is a no-op
			t.Fatalf("resent marker: %v", err)
		}
		assertFetch(t, c, true, fetched{100, -1, 0})

		// A transaction still open at the restart stays unstable until its marker comes.
		wantCode(t, "stage p0->300", txnCode(c, txnCommitReq(m1, 8, 0, "t", map[int32]int64{0: 300})), nil)
		c.Close()
		c2 := restart(t, s)
		assertFetch(t, c2, true, fetched{-1, -1, kerr.UnstableOffsetCommit.Code})
		if err := c2.CompleteTxn(ctx, "G", 8, false); err != nil {
			t.Fatalf("abort after restart: %v", err)
		}
		assertFetch(t, c2, true, fetched{100, -1, 0})
		assertFetch(t, restart(t, s), true, fetched{100, -1, 0})
	})
}

func assertFetch(t *testing.T, c *Coordinator, requireStable bool, want fetched) {
	t.Helper()
	got, top := fetch(c, "G", "t", requireStable, 0)
	wantCode(t, "fetch", top, nil)
	if got[0] != want {
		t.Fatalf("fetch(require_stable=%v) = %+v, want %+v", requireStable, got[0], want)
	}
}

// CompleteTxn must cover a staged write still in the queue, or that staged key would outlive the
// transaction in the log.
func TestCompleteTxnWaitsForQueuedStagedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, testConfig())
		ctx := context.Background()
		cl := &client{c: c, group: "G", gen: -1}
		gate := make(chan struct{})
		s.gate = gate
		staged := make(chan int16, 1)
		go func() { staged <- txnCode(c, txnCommitReq(cl, 7, 0, "t", map[int32]int64{0: 100})) }()
		synctest.Wait()
		marked := make(chan error, 1)
		go func() { marked <- c.CompleteTxn(ctx, "G", 7, true) }()
		synctest.Wait()
		close(gate)
		wantCode(t, "stage", <-staged, nil)
		if err := <-marked; err != nil {
			t.Fatalf("marker: %v", err)
		}
		assertFetch(t, c, true, fetched{100, -1, 0})
		s.gate = nil
		assertFetch(t, restart(t, s), true, fetched{100, -1, 0})
	})
}

// BL-17: a member that lost its partitions in a rebalance cannot commit transactional offsets for
// them (KIP-447).
func TestTxnOffsetCommitFencesZombies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		m1 := newClient(c, "G", "m1")
		m2 := newClient(c, "G", "m2")
		if stableGroup(t, ctx, m1, m2).LeaderID != m1.id {
			m1, m2 = m2, m1
		}
		m1.session, m2.session = 10*time.Second, time.Hour
		zombieGen := *m1

		// The rebalance moves on to generation 2 while m1 still belongs.
		if rebalance(t, ctx, m1, m2).Generation != 2 {
			t.Fatal("no second generation")
		}
		wantCode(t, "stale generation", txnCode(c, txnCommitReq(&zombieGen, 7, 0, "t", map[int32]int64{0: 10})), kerr.IllegalGeneration)

		// m1 stalls past its session: it is removed, and m2 carries on in generation 3.
		for range 3 {
			time.Sleep(4 * time.Second)
			m2.heartbeat(ctx)
		}
		stableGroup(t, ctx, m2)
		wantCode(t, "removed member", txnCode(c, txnCommitReq(m1, 7, 0, "t", map[int32]int64{0: 10})), kerr.UnknownMemberID)
		assertFetch(t, c, true, fetched{-1, -1, 0}) // nothing staged, nothing committed

		wantCode(t, "current member", txnCode(c, txnCommitReq(m2, 9, 0, "t", map[int32]int64{0: 10})), nil)
		wantCode(t, "older producer epoch", txnCode(c, txnCommitReq(m2, 9, -1, "t", map[int32]int64{0: 11})), kerr.InvalidProducerEpoch)
		noGroup := *m2
		noGroup.group = "nope"
		wantCode(t, "unknown group with a generation", txnCode(c, txnCommitReq(&noGroup, 9, 0, "t", map[int32]int64{0: 1})), kerr.IllegalGeneration)
	})
}

func TestTxnOffsetCommitStaticFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		leader, _ := staticPair(t, c, 9)
		old := *leader
		restarted := *leader
		restarted.id = ""
		restarted.joinOnce(ctx)
		wantCode(t, "fenced instance", txnCode(c, txnCommitReq(&old, 7, 0, "t", map[int32]int64{0: 1})), kerr.FencedInstanceID)
	})
}
