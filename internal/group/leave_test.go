package group

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestLeaveGroupBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a := newClient(c, "g", "a")
		b := newClient(c, "g", "b").static("inst-b")
		d := newClient(c, "g", "d").static("inst-d")
		e := newClient(c, "g", "e")
		stableGroup(t, ctx, a, b, d, e)

		str := func(s string) *string { return &s }
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Version = 5
		r.Group = "g"
		r.Members = []kmsg.LeaveGroupRequestMember{
			{MemberID: a.id},                            // dynamic member
			{InstanceID: str("inst-b")},                 // static member removed by instance ID alone
			{MemberID: "ghost"},                         // unknown
			{MemberID: d.id, InstanceID: str("inst-x")}, // instance ID not in the group
			{MemberID: "imposter", InstanceID: str("inst-d")},
		}
		resp := c.LeaveGroup(ctx, r)
		wantCode(t, "top level", resp.ErrorCode, nil)
		want := []*kerr.Error{nil, nil, kerr.UnknownMemberID, kerr.UnknownMemberID, kerr.FencedInstanceID}
		if len(resp.Members) != len(want) {
			t.Fatalf("%d member answers, want %d", len(resp.Members), len(want))
		}
		for i, m := range resp.Members {
			wantCode(t, "member "+m.MemberID, m.ErrorCode, want[i])
			if m.MemberID != r.Members[i].MemberID || m.InstanceID != r.Members[i].InstanceID {
				t.Fatalf("answer %d echoes %q/%v", i, m.MemberID, m.InstanceID)
			}
		}
		g := describe(c, 5, "g")
		if g.State != "PreparingRebalance" || len(g.Members) != 2 {
			t.Fatalf("after the leave: %s with %d members", g.State, len(g.Members))
		}
		wantCode(t, "remaining member heartbeat", e.heartbeat(ctx), kerr.RebalanceInProgress)
		wantCode(t, "left member heartbeat", a.heartbeat(ctx), kerr.UnknownMemberID)
	})
}

func TestLeaveGroupOldVersions(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	a := newClient(c, "g", "a")
	stableGroup(t, ctx, a)

	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 2
	r.Group, r.MemberID = "g", "ghost"
	resp := c.LeaveGroup(ctx, r)
	wantCode(t, "v2 unknown member", resp.ErrorCode, kerr.UnknownMemberID)
	if resp.Members != nil {
		t.Fatalf("v2 answer has members %v", resp.Members)
	}
	r.MemberID = a.id
	wantCode(t, "v2 leave", c.LeaveGroup(ctx, r).ErrorCode, nil)
	if d := describe(c, 5, "g"); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after the last member left: %s with %d members", d.State, len(d.Members))
	}
	r.Group = "nope"
	wantCode(t, "unknown group", c.LeaveGroup(ctx, r).ErrorCode, kerr.UnknownMemberID)
}

func TestLeavePendingMember(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	a := newClient(c, "g", "a")
	wantCode(t, "first join", a.joinOnce(ctx).ErrorCode, kerr.MemberIDRequired)
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 3
	r.Group = "g"
	r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a.id}}
	wantCode(t, "pending member leaves", c.LeaveGroup(ctx, r).Members[0].ErrorCode, nil)
	wantCode(t, "rejoin with the forgotten ID", a.joinOnce(ctx).ErrorCode, kerr.UnknownMemberID)
}
