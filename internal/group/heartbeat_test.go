package group

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHeartbeatRebalanceInProgressAndStaleGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a, b := newClient(c, "g", "a"), newClient(c, "g", "b")
		stableGroup(t, ctx, a, b)
		wantCode(t, "stable heartbeat", a.heartbeat(ctx), nil)

		// A third member starts a rebalance; existing members learn it from their heartbeats.
		cNew := newClient(c, "g", "c")
		done := make(chan *kmsg.JoinGroupResponse, 1)
		go func() { done <- cNew.join(ctx) }()
		synctest.Wait()
		if s := describe(c, 5, "g").State; s != "PreparingRebalance" {
			t.Fatalf("state %s after a new member joined, want PreparingRebalance", s)
		}
		wantCode(t, "heartbeat during rebalance", a.heartbeat(ctx), kerr.RebalanceInProgress)
		wantCode(t, "sync during rebalance", a.sync(ctx, nil).ErrorCode, kerr.RebalanceInProgress)

		old := *a // a's view of generation 1
		stableGroup(t, ctx, a, b)
		if j := <-done; j.ErrorCode != 0 || j.Generation != 2 {
			t.Fatalf("third member: %v generation %d", kerr.ErrorForCode(j.ErrorCode), j.Generation)
		}
		wantCode(t, "heartbeat with generation 1", old.heartbeat(ctx), kerr.IllegalGeneration)
		wantCode(t, "sync with generation 1", old.sync(ctx, nil).ErrorCode, kerr.IllegalGeneration)

		ghost := *a
		ghost.id = "ghost"
		wantCode(t, "unknown member heartbeat", ghost.heartbeat(ctx), kerr.UnknownMemberID)
		wantCode(t, "unknown member sync", ghost.sync(ctx, nil).ErrorCode, kerr.UnknownMemberID)
		nogroup := *a
		nogroup.group = "nope"
		wantCode(t, "unknown group heartbeat", nogroup.heartbeat(ctx), kerr.UnknownMemberID)
		wantCode(t, "unknown group sync", nogroup.sync(ctx, nil).ErrorCode, kerr.UnknownMemberID)
	})
}

func TestSessionTimeoutRemovesMemberAndRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a, b := newClient(c, "g", "a"), newClient(c, "g", "b")
		stableGroup(t, ctx, a, b)

		// a heartbeats every 4s; b has crashed and never does. b's 10s session runs out at 10s.
		for range 2 {
			time.Sleep(4 * time.Second)
			wantCode(t, "a heartbeat", a.heartbeat(ctx), nil)
		}
		time.Sleep(4 * time.Second)
		wantCode(t, "a heartbeat after b's session expired", a.heartbeat(ctx), kerr.RebalanceInProgress)
		j := a.join(ctx)
		if j.ErrorCode != 0 || j.Generation != 2 || j.LeaderID != a.id || len(j.Members) != 1 {
			t.Fatalf("rejoin: %v generation %d leader %q members %d", kerr.ErrorForCode(j.ErrorCode), j.Generation, j.LeaderID, len(j.Members))
		}
		wantCode(t, "b heartbeat", b.heartbeat(ctx), kerr.UnknownMemberID)
	})
}

func TestRebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a, b := newClient(c, "g", "a"), newClient(c, "g", "b")
		a.session, b.session = time.Hour, time.Hour // only the rebalance timeout is in play
		if stableGroup(t, ctx, a, b).LeaderID != a.id {
			a, b = b, a
		}
		// The leader (a) rejoining forces a rebalance; b ignores it.
		start := time.Now()
		j := a.join(ctx)
		if took := time.Since(start); took != a.rebalance {
			t.Fatalf("join phase took %v, want the rebalance timeout %v", took, a.rebalance)
		}
		if j.ErrorCode != 0 || j.Generation != 2 || len(j.Members) != 1 {
			t.Fatalf("rejoin: %v generation %d members %d", kerr.ErrorForCode(j.ErrorCode), j.Generation, len(j.Members))
		}
		wantCode(t, "dropped member heartbeat", b.heartbeat(ctx), kerr.UnknownMemberID)
	})
}

func TestMembersThatDoNotSyncAreRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a, b := newClient(c, "g", "a"), newClient(c, "g", "b")
		a.session, b.session = time.Hour, time.Hour // only the sync timeout is in play
		joins := make(chan *kmsg.JoinGroupResponse, 2)
		go func() { joins <- a.join(ctx) }()
		go func() { joins <- b.join(ctx) }()
		j1, j2 := <-joins, <-joins
		leader := j1
		if j2.LeaderID == j2.MemberID {
			leader = j2
		}
		lc := a
		if leader.MemberID == b.id {
			lc = b
		}
		// Only the leader syncs; the other member never does and is dropped after the rebalance timeout.
		if s := lc.sync(ctx, assignEach(leader)); s.ErrorCode != 0 {
			t.Fatalf("leader sync: %v", kerr.ErrorForCode(s.ErrorCode))
		}
		time.Sleep(lc.rebalance + time.Second)
		d := describe(c, 5, "g")
		if d.State != "PreparingRebalance" || len(d.Members) != 1 || d.Members[0].MemberID != lc.id {
			t.Fatalf("after the sync timeout: %s with %d members %+v leader %s", d.State, len(d.Members), d.Members, lc.id)
		}
	})
}

func TestHeartbeatStormStaysResponsive(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	a := newClient(c, "g", "a")
	a.session = time.Minute
	stableGroup(t, ctx, a)

	const conns, beats = 1000, 20
	type result struct{ ok, unknown, illegal, other int }
	results := make(chan result, conns)
	start := make(chan struct{})
	for i := range conns {
		go func() {
			var res result
			cl := *a
			switch i % 3 {
			case 1:
				cl.id = "stranger"
			case 2:
				cl.gen = 99
			}
			<-start
			for range beats {
				switch cl.heartbeat(ctx) {
				case 0:
					res.ok++
				case kerr.UnknownMemberID.Code:
					res.unknown++
				case kerr.IllegalGeneration.Code:
					res.illegal++
				default:
					res.other++
				}
			}
			results <- res
		}()
	}
	close(start)
	// The coordinator keeps answering other requests during the storm.
	began := time.Now()
	codes := commitCodes(c.OffsetCommit(ctx, commitReq("g", a.gen, a.id, "t1", map[int32]int64{0: 5})))
	wantCode(t, "commit during storm", codes[topicPartition{"t1", 0}], nil)
	if got, _ := fetch(c, "g", "t1", false, 0); got[0].offset != 5 {
		t.Fatalf("fetch during storm: %+v", got)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("commit and fetch took %v during the storm", took)
	}
	var total result
	for range conns {
		r := <-results
		total.ok, total.unknown, total.illegal, total.other = total.ok+r.ok, total.unknown+r.unknown, total.illegal+r.illegal, total.other+r.other
	}
	want := result{ok: 334 * beats, unknown: 333 * beats, illegal: 333 * beats}
	if total != want {
		t.Fatalf("storm answers %+v, want %+v", total, want)
	}
	if d := describe(c, 5, "g"); d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("after the storm: %s with %d members", d.State, len(d.Members))
	}
}
