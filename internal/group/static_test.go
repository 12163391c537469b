package group

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// staticPair is a Stable group of two static members; the leader is returned first.
func staticPair(t *testing.T, c *Coordinator, version int16) (leader, follower *client) {
	t.Helper()
	a := newClient(c, "g", "a").static("inst-a")
	b := newClient(c, "g", "b").static("inst-b")
	a.version, b.version = version, version
	if stableGroup(t, context.Background(), a, b).LeaderID == a.id {
		return a, b
	}
	return b, a
}

func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	for _, version := range []int16{5, 8, 9} {
		for _, restartLeader := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				c, _ := newTestCoordinator(t, bubbleConfig())
				ctx := context.Background()
				leader, follower := staticPair(t, c, version)
				old, other := follower, leader
				if restartLeader {
					old, other = leader, follower
				}
				oldAssignment := "assigned:" + old.id

				// The process restarts within its session: same instance ID, no member ID.
				time.Sleep(5 * time.Second)
				restarted := *old
				restarted.id = ""
				j := restarted.joinOnce(ctx)
				wantCode(t, "static rejoin", j.ErrorCode, nil)
				if j.Generation != 1 || restarted.id == old.id {
					t.Fatalf("v%d rejoin: generation %d member %q (old %q)", version, j.Generation, restarted.id, old.id)
				}
				checkStaticRejoinLeader(t, version, restartLeader, j, old.id, restarted.id)
				if d := describe(c, 5, "g"); d.State != "Stable" {
					t.Fatalf("state %s after a static rejoin, want Stable (no rebalance)", d.State)
				}
				s := restarted.sync(ctx, nil)
				wantCode(t, "sync", s.ErrorCode, nil)
				if string(s.MemberAssignment) != oldAssignment {
					t.Fatalf("restarted member got %q, want its old assignment %q", s.MemberAssignment, oldAssignment)
				}
				wantCode(t, "other member heartbeat", other.heartbeat(ctx), nil)
				wantCode(t, "old incarnation heartbeat", old.heartbeat(ctx), kerr.FencedInstanceID)
				oldCommit := commitReq("g", 1, old.id, "t1", map[int32]int64{0: 1})
				oldCommit.InstanceID = old.instance
				wantCode(t, "old incarnation commit", commitCodes(c.OffsetCommit(ctx, oldCommit))[topicPartition{"t1", 0}], kerr.FencedInstanceID)
			})
		}
	}
}

func checkStaticRejoinLeader(t *testing.T, version int16, wasLeader bool, j *kmsg.JoinGroupResponse, oldID, newID string) {
	t.Helper()
	switch {
	case !wasLeader:
		if len(j.Members) != 0 || j.SkipAssignment || j.LeaderID == newID {
			t.Fatalf("follower rejoin: members %d skip %v leader %q", len(j.Members), j.SkipAssignment, j.LeaderID)
		}
	case version >= 9: // KIP-814: the leader learns the members but must not reassign
		if len(j.Members) != 2 || !j.SkipAssignment || j.LeaderID != newID {
			t.Fatalf("v9 leader rejoin: members %d skip %v leader %q", len(j.Members), j.SkipAssignment, j.LeaderID)
		}
	default: // older leaders are told the old member ID leads, so they do not reassign
		if len(j.Members) != 0 || j.LeaderID != oldID {
			t.Fatalf("v%d leader rejoin: members %d leader %q, want none and %q", version, len(j.Members), j.LeaderID, oldID)
		}
	}
}

func TestStaticMemberWithNewProtocolRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		rangeFirst := []kmsg.JoinGroupRequestProtocol{{Name: "range"}, {Name: "roundrobin"}}
		rrFirst := []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin"}, {Name: "range"}}
		var cls []*client
		for i, ps := range [][]kmsg.JoinGroupRequestProtocol{rangeFirst, rangeFirst, rrFirst} {
			cl := newClient(c, "g", "c").static(string(rune('a' + i)))
			cl.protocols = ps
			cls = append(cls, cl)
		}
		stableGroup(t, ctx, cls...)
		if d := describe(c, 5, "g"); d.Protocol != "range" {
			t.Fatalf("protocol %q, want range (two votes to one)", d.Protocol)
		}
		// A member restarts preferring roundrobin: the vote would change, so the group rebalances.
		restarted := *cls[0]
		restarted.id, restarted.protocols = "", rrFirst
		done := make(chan *kmsg.JoinGroupResponse, 3)
		go func() { done <- restarted.joinOnce(ctx) }()
		synctest.Wait()
		if d := describe(c, 5, "g"); d.State != "PreparingRebalance" {
			t.Fatalf("state %s after a protocol-changing static rejoin, want PreparingRebalance", d.State)
		}
		start := time.Now()
		go func() { done <- cls[1].join(ctx) }()
		go func() { done <- cls[2].join(ctx) }()
		for range 3 {
			j := <-done
			if j.ErrorCode != 0 || j.Generation != 2 || *j.Protocol != "roundrobin" {
				t.Fatalf("join: %v generation %d protocol %v", kerr.ErrorForCode(j.ErrorCode), j.Generation, *j.Protocol)
			}
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("rebalance took %v; it should end as soon as everyone rejoined", took)
		}
	})
}

func TestStaticMemberSessionExpiryRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		leader, follower := staticPair(t, c, 9)
		for range 3 {
			time.Sleep(4 * time.Second)
			leader.heartbeat(ctx)
		}
		// follower's 10s session ran out at 10s: it is gone and the group rebalances.
		wantCode(t, "leader heartbeat", leader.heartbeat(ctx), kerr.RebalanceInProgress)
		wantCode(t, "expired static member", follower.heartbeat(ctx), kerr.UnknownMemberID)
	})
}

func TestJoinStaticFencedAndUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		leader, _ := staticPair(t, c, 9)
		wrong := *leader
		wrong.id = "someone-else"
		wantCode(t, "join with another member's instance", wrong.joinOnce(ctx).ErrorCode, kerr.FencedInstanceID)
		unknown := *leader
		unknown.instance = new(string)
		*unknown.instance = "inst-z"
		wantCode(t, "join with an unmapped instance", unknown.joinOnce(ctx).ErrorCode, kerr.UnknownMemberID)
	})
}
