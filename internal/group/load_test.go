package group

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BL-18: a group deleted with success stays deleted after a restart.
func TestDeleteGroupsSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a, b := newClient(c, "G", "a"), newClient(c, "G", "b")
		stableGroup(t, ctx, a, b)
		c.OffsetCommit(ctx, commitReq("G", a.gen, a.id, "t1", map[int32]int64{0: 10, 1: 20}))
		c.OffsetCommit(ctx, commitReq("other", -1, "", "t1", map[int32]int64{0: 7}))
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version = 3
		leave.Group = "G"
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a.id}, {MemberID: b.id}}
		c.LeaveGroup(ctx, leave)
		synctest.Wait() // the Empty generation's group record

		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Version = 2
		del.Groups = []string{"G"}
		wantCode(t, "delete", c.DeleteGroups(ctx, del).Groups[0].ErrorCode, nil)
		checkDeleted(t, c)
		c.Close()

		c2 := restart(t, s)
		checkDeleted(t, c2)
		if got, _ := fetch(c2, "other", "t1", false, 0); got[0].offset != 7 {
			t.Fatalf("the other group's offset is %d after restart, want 7", got[0].offset)
		}
	})
}

func checkDeleted(t *testing.T, c *Coordinator) {
	t.Helper()
	if gs := listGroups(c); len(gs) != 1 || gs["other"] == "" {
		t.Fatalf("groups %v, want only other", gs)
	}
	if d := describe(c, 5, "G"); d.State != "Dead" || d.ErrorCode != 0 {
		t.Fatalf("v5 describe: %s %v", d.State, kerr.ErrorForCode(d.ErrorCode))
	}
	if d := describe(c, 6, "G"); d.State != "Dead" || d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("v6 describe: %s %v", d.State, kerr.ErrorForCode(d.ErrorCode))
	}
	got, _ := fetch(c, "G", "t1", false, 0, 1)
	if got[0].offset != -1 || got[1].offset != -1 {
		t.Fatalf("offsets of the deleted group: %+v", got)
	}
}

// BL-19 and issue 11 item 6: acknowledged commits survive a restart, and so does a Stable group
// (Kafka's GroupMetadata records): it comes back Stable at its generation with its members, leader and
// assignments, members carry on through heartbeats without a rebalance, and their sessions run from
// the load (Kafka's onGroupLoaded).
func TestStableGroupSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a, b := newClient(c, "G", "a"), newClient(c, "G", "b")
		leader := stableGroup(t, ctx, a, b)
		c.OffsetCommit(ctx, commitReq("G", a.gen, a.id, "t1", map[int32]int64{0: 99}))
		c.OffsetCommit(ctx, commitReq("G", a.gen, a.id, "t1", map[int32]int64{0: 100}))
		c.Close() // SIGKILL: no leave, nothing flushed beyond what was acknowledged

		time.Sleep(time.Hour) // the broker was down long past every session timeout
		c2 := restart(t, s)
		if got, _ := fetch(c2, "G", "t1", false, 0); got[0] != (fetched{100, 3, 0}) {
			t.Fatalf("after restart: %+v, want offset 100 epoch 3", got[0])
		}
		if gs := listGroups(c2); gs["G"] != "Stable/consumer" {
			t.Fatalf("listed as %q, want Stable/consumer", gs["G"])
		}
		d := describe(c2, 5, "G")
		if d.Protocol != "range" || len(d.Members) != 2 {
			t.Fatalf("described %+v, want protocol range and 2 members", d)
		}
		for _, m := range d.Members {
			if string(m.MemberAssignment) != "assigned:"+m.MemberID || m.ClientID == "" {
				t.Fatalf("member %s: assignment %q, client %q", m.MemberID, m.MemberAssignment, m.ClientID)
			}
		}
		a.c, b.c = c2, c2
		wantCode(t, "a heartbeat at the old generation", a.heartbeat(ctx), nil)
		wantCode(t, "b heartbeat at the old generation", b.heartbeat(ctx), nil)
		if r := b.sync(ctx, nil); r.ErrorCode != 0 || string(r.MemberAssignment) != "assigned:"+b.id {
			t.Fatalf("b SyncGroup in Stable after restart: %v %q", kerr.ErrorForCode(r.ErrorCode), r.MemberAssignment)
		}
		follower := a
		if a.id == leader.LeaderID {
			follower = b
		}
		j := follower.join(ctx) // an unchanged follower rejoining a Stable group keeps the generation
		if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != leader.LeaderID {
			t.Fatalf("rejoin: %v generation %d leader %s, want generation 1 leader %s", kerr.ErrorForCode(j.ErrorCode), j.Generation, j.LeaderID, leader.LeaderID)
		}

		// Sessions (10 s) started at the load: a keeps heartbeating, b stops.
		time.Sleep(9 * time.Second)
		wantCode(t, "a heartbeat 9 s after the load", a.heartbeat(ctx), nil)
		if d := describe(c2, 5, "G"); len(d.Members) != 2 || d.State != "Stable" {
			t.Fatalf("9 s after the load: %s with %d members, want Stable with 2", d.State, len(d.Members))
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantCode(t, "a heartbeat after b's session ran out", a.heartbeat(ctx), kerr.RebalanceInProgress)
		if d := describe(c2, 5, "G"); len(d.Members) != 1 || d.Members[0].MemberID != a.id {
			t.Fatalf("after b's session: %d members, want only a", len(d.Members))
		}
	})
}

// A generation that joined but had not synced when the broker stopped has no stored assignment: the
// group comes back Empty at that generation, and its members rejoin into the next one.
func TestUnsyncedGenerationRestartsEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a := newClient(c, "G", "a")
		if j := a.join(ctx); j.ErrorCode != 0 || j.Generation != 1 {
			t.Fatalf("join: %v generation %d", kerr.ErrorForCode(j.ErrorCode), j.Generation)
		}
		synctest.Wait() // the generation's group record
		c.Close()

		c2 := restart(t, s)
		if gs := listGroups(c2); gs["G"] != "Empty/consumer" {
			t.Fatalf("listed as %q, want Empty/consumer", gs["G"])
		}
		a.c = c2
		wantCode(t, "old member heartbeat", a.heartbeat(ctx), kerr.UnknownMemberID)
		a2 := newClient(c2, "G", "a")
		if j := a2.join(ctx); j.Generation != 2 {
			t.Fatalf("generation %d after restart, want 2", j.Generation)
		}
	})
}

// SyncGroup answers only once the assignment is stored; if it cannot be, the parked SyncGroups get
// COORDINATOR_NOT_AVAILABLE and the group rebalances (Kafka's doSyncGroup).
func TestSyncGroupWaitsForTheGroupRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a := newClient(c, "G", "a")
		j := a.join(ctx)
		synctest.Wait()
		s.setFail(errDisk)
		if r := a.sync(ctx, assignEach(j)); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("SyncGroup with a failing store: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
		}
		if d := describe(c, 5, "G"); d.State != "PreparingRebalance" {
			t.Fatalf("after the failed store: %s, want PreparingRebalance", d.State)
		}
		s.setFail(nil)
		if j := a.join(ctx); j.ErrorCode != 0 || j.Generation != 2 {
			t.Fatalf("rejoin: %v generation %d", kerr.ErrorForCode(j.ErrorCode), j.Generation)
		}
		if r := a.sync(ctx, assignEach(j)); r.ErrorCode != 0 {
			t.Fatalf("SyncGroup: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		c.Close()
		if gs := listGroups(restart(t, s)); gs["G"] != "Stable/consumer" {
			t.Fatalf("after restart: %q, want Stable/consumer", gs["G"])
		}
	})
}

func TestLoadLastValueWinsAndTombstones(t *testing.T) {
	t.Parallel()
	tp := topicPartition{"t", 0}
	o := func(v int64) []byte {
		return encodeOffsetValue(offset{offset: v, leaderEpoch: -1, commitTime: time.UnixMilli(5)})
	}
	recs := []Record{
		{Key: offsetKey("g", tp), Value: o(1)},
		{Key: offsetKey("g", tp), Value: o(2)},
		{Key: offsetKey("gone", tp), Value: o(3)},
		{Key: offsetKey("gone", tp)},
		{Key: groupKey("gone")},
		{Key: stagedKey("g", 7, topicPartition{"t", 1}), Value: encodeStagedValue(2, offset{offset: 40})},
		{Key: []byte{0, 9, 9}, Value: []byte{1}}, // not ours
	}
	c, _ := newTestCoordinator(t, testConfig())
	err := c.Load(recs)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load error %v, want ErrCorrupt for the foreign record", err)
	}
	if got, _ := fetch(c, "g", "t", false, 0); got[0].offset != 2 {
		t.Fatalf("offset %d, want the last value 2", got[0].offset)
	}
	if gs := listGroups(c); len(gs) != 1 {
		t.Fatalf("groups %v, want only g", gs)
	}
	if got, _ := fetch(c, "g", "t", true, 1); got[1].code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("staged partition after load: %+v, want UNSTABLE_OFFSET_COMMIT", got[1])
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	o := offset{offset: 42, leaderEpoch: 7, metadata: "meta", commitTime: time.UnixMilli(1234), expireTime: time.UnixMilli(5678)}
	if got, err := decodeOffsetValue(encodeOffsetValue(o)); err != nil || got != o {
		t.Fatalf("offset value: %+v %v", got, err)
	}
	o.expireTime = time.Time{}
	if got, err := decodeOffsetValue(encodeOffsetValue(o)); err != nil || got != o {
		t.Fatalf("offset value without expiry: %+v %v", got, err)
	}
	if e, got, err := decodeStagedValue(encodeStagedValue(3, o)); err != nil || e != 3 || got != o {
		t.Fatalf("staged value: %d %+v %v", e, got, err)
	}
	gv := groupValue{protocolType: "consumer", generation: 9, stateSince: time.UnixMilli(77), members: 2}
	if got, err := decodeGroupValue(encodeGroupValue(gv)); err != nil || got != gv {
		t.Fatalf("group value: %+v %v", got, err)
	}
	k, err := decodeKey(stagedKey("g", 12, topicPartition{"t", 3}))
	if err != nil || k.kind != kindStaged || k.group != "g" || k.producerID != 12 || k.tp != (topicPartition{"t", 3}) {
		t.Fatalf("staged key: %+v %v", k, err)
	}
	for _, bad := range [][]byte{nil, {0, 1}, {0, 2, kindOffset}, append(offsetKey("g", topicPartition{"t", 0}), 0)} {
		if _, err := decodeKey(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeKey(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
	if _, err := decodeOffsetValue([]byte{0, 1, 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short value: %v", err)
	}
}

func TestLoadInProgressAndClosed(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	c.mu.Lock()
	c.loading = true
	c.mu.Unlock()
	ctx := context.Background()
	wantCode(t, "join while loading", newClient(c, "g", "a").joinOnce(ctx).ErrorCode, kerr.CoordinatorLoadInProgress)
	_, top := fetch(c, "g", "t", false, 0)
	wantCode(t, "fetch while loading", top, kerr.CoordinatorLoadInProgress)
	c.mu.Lock()
	c.loading = false
	c.mu.Unlock()
	c.Close()
	wantCode(t, "join after close", newClient(c, "g", "a").joinOnce(ctx).ErrorCode, kerr.CoordinatorNotAvailable)
	if err := c.CompleteTxn(ctx, "g", 1, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("CompleteTxn after close: %v", err)
	}
}
