package group

import (
	"context"
	"math"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteGroups(c *Coordinator, groups ...string) []int16 {
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = 2
	r.Groups = groups
	var out []int16
	for _, g := range c.DeleteGroups(context.Background(), r).Groups {
		out = append(out, g.ErrorCode)
	}
	return out
}

func TestDeleteGroupsErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		stableGroup(t, ctx, newClient(c, "busy", "a"))
		c.OffsetCommit(ctx, commitReq("idle", -1, "", "t1", map[int32]int64{0: 1}))

		codes := deleteGroups(c, "busy", "missing", "idle", "idle")
		want := []*kerr.Error{kerr.NonEmptyGroup, kerr.GroupIDNotFound, nil, kerr.GroupIDNotFound}
		for i, w := range want {
			wantCode(t, "delete "+[]string{"busy", "missing", "idle", "idle again"}[i], codes[i], w)
		}

		// A delete whose tombstones are not stored fails and leaves the group as it was.
		c.OffsetCommit(ctx, commitReq("keep", -1, "", "t1", map[int32]int64{0: 4}))
		s.setFail(errDisk)
		wantCode(t, "delete with a failing store", deleteGroups(c, "keep")[0], kerr.CoordinatorNotAvailable)
		s.setFail(nil)
		if gs := listGroups(c); gs["keep"] != "Empty/" {
			t.Fatalf("groups after the failed delete: %v", gs)
		}
		if got, _ := fetch(c, "keep", "t1", false, 0); got[0].offset != 4 {
			t.Fatalf("offset after the failed delete: %+v", got[0])
		}
		if got, _ := fetch(restart(t, s), "keep", "t1", false, 0); got[0].offset != 4 {
			t.Fatalf("offset after restart: %+v", got[0])
		}
	})
}

func TestOffsetDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a := newClient(c, "g", "a") // subscribes to t1
		stableGroup(t, ctx, a)
		c.OffsetCommit(ctx, commitReq("g", a.gen, a.id, "t1", map[int32]int64{0: 1}))
		c.OffsetCommit(ctx, commitReq("g", a.gen, a.id, "t2", map[int32]int64{0: 2, 1: 3}))

		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g"
		r.Topics = []kmsg.OffsetDeleteRequestTopic{
			{Topic: "t1", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
			{Topic: "t2", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 7}}},
		}
		resp := c.OffsetDelete(ctx, r)
		wantCode(t, "top level", resp.ErrorCode, nil)
		wantCode(t, "subscribed topic", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
		wantCode(t, "unsubscribed topic", resp.Topics[1].Partitions[0].ErrorCode, nil)
		wantCode(t, "no offset", resp.Topics[1].Partitions[1].ErrorCode, nil)
		if got, _ := fetch(c, "g", "t2", false, 0, 1); got[0].offset != -1 || got[1].offset != 3 {
			t.Fatalf("t2 after delete: %+v", got)
		}
		if got, _ := fetch(c, "g", "t1", false, 0); got[0].offset != 1 {
			t.Fatalf("t1 after delete: %+v", got)
		}
		if got, _ := fetch(restart(t, s), "g", "t2", false, 0, 1); got[0].offset != -1 || got[1].offset != 3 {
			t.Fatalf("t2 after restart: %+v", got)
		}
		r.Group = "nope"
		wantCode(t, "unknown group", c.OffsetDelete(ctx, r).ErrorCode, kerr.GroupIDNotFound)
	})
}

func TestListAndDescribeGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		a := newClient(c, "stable", "cli-a").static("inst")
		stableGroup(t, ctx, a)
		c.OffsetCommit(ctx, commitReq("simple", -1, "", "t1", map[int32]int64{0: 1}))

		r := kmsg.NewPtrListGroupsRequest()
		r.Version = 5
		resp := c.ListGroups(ctx, r)
		if len(resp.Groups) != 2 || resp.Groups[0].Group != "simple" || resp.Groups[1].GroupState != "Stable" ||
			resp.Groups[1].ProtocolType != "consumer" || resp.Groups[1].GroupType != "classic" {
			t.Fatalf("listed %+v", resp.Groups)
		}
		r.StatesFilter = []string{"empty"}
		if gs := c.ListGroups(ctx, r).Groups; len(gs) != 1 || gs[0].Group != "simple" {
			t.Fatalf("states filter: %+v", gs)
		}
		r.StatesFilter, r.TypesFilter = nil, []string{"consumer"}
		if gs := c.ListGroups(ctx, r).Groups; len(gs) != 0 {
			t.Fatalf("types filter consumer: %+v", gs)
		}

		d := describe(c, 5, "stable")
		m := d.Members[0]
		if d.State != "Stable" || d.Protocol != "range" || m.MemberID != a.id || *m.InstanceID != "inst" ||
			m.ClientID != "cli-a" || string(m.MemberAssignment) != "assigned:"+a.id || d.AuthorizedOperations != math.MinInt32 {
			t.Fatalf("described %+v", d)
		}
		dr := kmsg.NewPtrDescribeGroupsRequest()
		dr.Version, dr.Groups, dr.IncludeAuthorizedOperations = 5, []string{"simple"}, true
		sd := c.DescribeGroups(ctx, dr).Groups[0]
		if sd.State != "Empty" || sd.ProtocolType != "" || len(sd.Members) != 0 || sd.AuthorizedOperations != groupOperations {
			t.Fatalf("described %+v", sd)
		}
	})
}
