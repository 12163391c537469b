package broker_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthzDescribeGroupsChecksFirst (issue 15): DescribeGroups,
// ConsumerGroupDescribe and ShareGroupDescribe check DESCRIBE on each group
// before describing it, as Kafka's KafkaApis does (one path for the three,
// describeAuthorized). A refused group is
// GROUP_AUTHORIZATION_FAILED, listed before the described ones, and its
// entry is the same whether the group exists (with members) or not, so
// nothing about it leaks; a described group's authorized operations are the
// principal's (KIP-430), not every group operation.
func TestAuthzDescribeGroupsChecksFirst(t *testing.T) {
	a := startAuthz(t)
	a.createTopics("t")
	a.grant(
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("cg-open").Operations(kadm.OpRead), // implies DESCRIBE
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("classic-open").Operations(kadm.OpDescribe),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("share-open").Operations(kadm.OpRead),
	)
	const read, describe = 1 << 3, 1 << 8
	// Groups as admin: two consumer groups with a member each, two classic
	// groups holding offsets, one share group with a member.
	for _, g := range []string{"cg-open", "cg-secret"} {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version = 1
		hb.Group, hb.MemberID, hb.SubscribedTopicNames, hb.RebalanceTimeoutMillis = g, "member-"+g, []string{"t"}, 30000
		if r := a.raw("admin", hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("join %s: %v", g, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	for _, g := range []string{"classic-open", "classic-secret"} {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 0, LeaderEpoch: -1})
		if r, err := a.admin("admin").CommitOffsets(testCtx(t), g, os); err != nil || r.Error() != nil {
			t.Fatalf("commit to %s: %v %v", g, err, r.Error())
		}
	}
	for _, g := range []string{"share-open", "share-secret"} {
		sh := kmsg.NewPtrShareGroupHeartbeatRequest()
		sh.GroupID, sh.MemberID, sh.SubscribedTopicNames = g, "member-"+g+"-0000000000", []string{"t"}
		if r := a.raw("admin", sh).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("share join %s: %v", g, kerr.ErrorForCode(r.ErrorCode))
		}
	}

	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups, cd.IncludeAuthorizedOperations = []string{"cg-secret", "cg-open", "cg-missing"}, true
	cr := a.raw("alice", cd).(*kmsg.ConsumerGroupDescribeResponse)
	if len(cr.Groups) != 3 {
		t.Fatalf("ConsumerGroupDescribe answered %d groups, want 3", len(cr.Groups))
	}
	refusedCG := func(name string) kmsg.ConsumerGroupDescribeResponseGroup {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.ErrorCode, g.AuthorizedOperations = name, kerr.GroupAuthorizationFailed.Code, math.MinInt32
		return g
	}
	for i, name := range []string{"cg-secret", "cg-missing"} {
		if got := cr.Groups[i]; !reflect.DeepEqual(got, refusedCG(name)) {
			t.Errorf("ConsumerGroupDescribe entry %d: %+v, want the bare refusal of %s", i, got, name)
		}
	}
	if g := cr.Groups[2]; g.Group != "cg-open" || g.ErrorCode != 0 || len(g.Members) != 1 || g.AuthorizedOperations != read|describe {
		t.Errorf("ConsumerGroupDescribe of cg-open: %s code %d, %d members, operations %b; want described, 1 member, READ|DESCRIBE (%b)",
			g.Group, g.ErrorCode, len(g.Members), g.AuthorizedOperations, read|describe)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"classic-open", "classic-secret", "cg-secret", "classic-missing"}, true
	dr := a.raw("alice", dg).(*kmsg.DescribeGroupsResponse)
	if len(dr.Groups) != 4 {
		t.Fatalf("DescribeGroups answered %d groups, want 4", len(dr.Groups))
	}
	for i, name := range []string{"classic-secret", "cg-secret", "classic-missing"} {
		want := kmsg.NewDescribeGroupsResponseGroup()
		want.Group, want.ErrorCode, want.AuthorizedOperations = name, kerr.GroupAuthorizationFailed.Code, math.MinInt32
		if got := dr.Groups[i]; !reflect.DeepEqual(got, want) {
			t.Errorf("DescribeGroups entry %d: %+v, want the bare refusal of %s", i, got, name)
		}
	}
	if g := dr.Groups[3]; g.Group != "classic-open" || g.ErrorCode != 0 || g.State != "Empty" || g.AuthorizedOperations != describe {
		t.Errorf("DescribeGroups of classic-open: %s code %d state %q operations %b; want Empty with DESCRIBE only (%b)",
			g.Group, g.ErrorCode, g.State, g.AuthorizedOperations, describe)
	}

	sd := kmsg.NewPtrShareGroupDescribeRequest()
	sd.GroupIDs, sd.IncludeAuthorizedOperations = []string{"share-open", "share-secret", "share-missing"}, true
	sr := a.raw("alice", sd).(*kmsg.ShareGroupDescribeResponse)
	if len(sr.Groups) != 3 {
		t.Fatalf("ShareGroupDescribe answered %d groups, want 3", len(sr.Groups))
	}
	if g := sr.Groups[2]; g.GroupID != "share-open" || g.ErrorCode != 0 || len(g.Members) != 1 || g.AuthorizedOperations != read|describe {
		t.Errorf("ShareGroupDescribe of share-open: %s code %d, %d members, operations %b; want described, 1 member, READ|DESCRIBE",
			g.GroupID, g.ErrorCode, len(g.Members), g.AuthorizedOperations)
	}
	for i, name := range []string{"share-secret", "share-missing"} {
		want := kmsg.NewShareGroupDescribeResponseGroup()
		want.GroupID, want.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
		if got := sr.Groups[i]; !reflect.DeepEqual(got, want) {
			t.Errorf("ShareGroupDescribe entry %d: %+v, want the bare refusal of %s", i, got, name)
		}
	}
	// The super user still sees everything.
	if r := a.raw("admin", cd).(*kmsg.ConsumerGroupDescribeResponse); r.Groups[0].ErrorCode != 0 || len(r.Groups[0].Members) != 1 {
		t.Errorf("admin's ConsumerGroupDescribe of cg-secret: %v, %d members", kerr.ErrorForCode(r.Groups[0].ErrorCode), len(r.Groups[0].Members))
	}
}
