package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// rawMember is a one-member group formed by raw JoinGroup/SyncGroup requests.
type rawMember struct {
	group, member string
	generation    int32
}

// consumerMetadata is a ConsumerMemberMetadata subscribing to topic.
func consumerMetadata(topic string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = []string{topic}
	return m.AppendTo(nil)
}

func joinRequest(group, member string, instance *string, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID, req.ProtocolType = group, member, instance, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(groupSession.Milliseconds()), 10_000
	for _, name := range protocols {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, consumerMetadata("t")
		req.Protocols = append(req.Protocols, p)
	}
	return req
}

// joinAlone forms group with one dynamic member: the KIP-394 round trip,
// then the join and the leader's SyncGroup.
func joinAlone(t *testing.T, ctx context.Context, cl *kgo.Client, group string) rawMember {
	t.Helper()
	first, err := joinRequest(group, "", nil, "range").RequestWith(ctx, cl)
	if err != nil || first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		t.Fatalf("first JoinGroup: %v, code %d, member %q; want MEMBER_ID_REQUIRED with an ID", err, first.ErrorCode, first.MemberID)
	}
	resp, err := joinRequest(group, first.MemberID, nil, "range").RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.LeaderID != first.MemberID || resp.Generation != 1 {
		t.Fatalf("JoinGroup: %v, code %d, leader %q, generation %d", err, resp.ErrorCode, resp.LeaderID, resp.Generation)
	}
	j := rawMember{group: group, member: first.MemberID, generation: resp.Generation}
	if code := syncGroup(t, ctx, cl, j, j.generation); code != 0 {
		t.Fatalf("SyncGroup: code %d", code)
	}
	return j
}

func syncGroup(t *testing.T, ctx context.Context, cl *kgo.Client, j rawMember, generation int32) int16 {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = j.group, j.member, generation
	pt, proto := "consumer", "range"
	req.ProtocolType, req.Protocol = &pt, &proto
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID = j.member
	req.GroupAssignment = append(req.GroupAssignment, a)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

// commitCodes sends one OffsetCommit and returns its codes by "topic/partition".
func commitCodes(t *testing.T, ctx context.Context, cl *kgo.Client, group, member string, generation int32, parts map[string][]int32) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, generation
	for topic, ps := range parts {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	return out
}

// TestGroupBadRequests (issue 4 acceptance): malformed or stale group
// requests get Kafka's error codes and leave no trace.
func TestGroupBadRequests(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("t", 1, nil)
	cl := k.Client(kgo.MaxVersions(kversion.V4_0_0())) // raw requests name topics: OffsetCommit/Fetch v10 need topic IDs
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	joins := []struct {
		name string
		req  *kmsg.JoinGroupRequest
		want error
	}{
		{"no protocols", joinRequest("bad", "", nil), kerr.InconsistentGroupProtocol},
		{"empty protocol type", func() *kmsg.JoinGroupRequest {
			r := joinRequest("bad", "", nil, "range")
			r.ProtocolType = ""
			return r
		}(), kerr.InconsistentGroupProtocol},
		{"empty group", joinRequest("", "", nil, "range"), kerr.InvalidGroupID},
		{"session below the minimum", func() *kmsg.JoinGroupRequest {
			r := joinRequest("bad", "", nil, "range")
			r.SessionTimeoutMillis = 1000
			return r
		}(), kerr.InvalidSessionTimeout},
		{"unknown member of a new group", joinRequest("bad", "ghost", nil, "range"), kerr.UnknownMemberID},
	}
	for _, c := range joins {
		resp, err := c.req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := kerr.ErrorForCode(resp.ErrorCode); got != c.want {
			t.Errorf("JoinGroup with %s: %v, want %v", c.name, got, c.want)
		}
	}
	if g := describeGroup(t, k.Admin(), "bad"); g.State != "Dead" {
		t.Errorf("failed joins left group bad in state %q", g.State)
	}

	j := joinAlone(t, ctx, cl, "g")
	if code := syncGroup(t, ctx, cl, j, j.generation-1); code != kerr.IllegalGeneration.Code {
		t.Errorf("SyncGroup with a stale generation: code %d, want ILLEGAL_GENERATION", code)
	}
	if code := syncGroup(t, ctx, cl, rawMember{group: j.group, member: "ghost"}, j.generation); code != kerr.UnknownMemberID.Code {
		t.Errorf("SyncGroup from an unknown member: code %d, want UNKNOWN_MEMBER_ID", code)
	}
	resp, err := joinRequest("g", "", nil, "roundrobin").RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup with no protocol in common: %v code %d, want INCONSISTENT_GROUP_PROTOCOL", err, resp.ErrorCode)
	}

	commits := []struct {
		name       string
		member     string
		generation int32
		parts      map[string][]int32
		want       map[string]int16
	}{
		{"unknown member", "ghost", j.generation, map[string][]int32{"t": {0}},
			map[string]int16{"t/0": kerr.UnknownMemberID.Code}},
		{"stale generation", j.member, j.generation - 1, map[string][]int32{"t": {0}},
			map[string]int16{"t/0": kerr.IllegalGeneration.Code}},
		{"missing topic and partition", j.member, j.generation, map[string][]int32{"t": {0, 7}, "nope": {0}},
			map[string]int16{"t/0": 0, "t/7": kerr.UnknownTopicOrPartition.Code, "nope/0": kerr.UnknownTopicOrPartition.Code}},
	}
	for _, c := range commits {
		got := commitCodes(t, ctx, cl, j.group, c.member, c.generation, c.parts)
		if len(got) != len(c.want) {
			t.Errorf("OffsetCommit %s: %v, want %v", c.name, got, c.want)
		}
		for tp, code := range c.want {
			if got[tp] != code {
				t.Errorf("OffsetCommit %s: %s code %d, want %d", c.name, tp, got[tp], code)
			}
		}
	}
	// Only the valid partition was stored.
	if got := fetchCommitted(t, cl, "g", "t", 0); got[0] != 1 {
		t.Errorf("t/0 committed %d, want 1", got[0])
	}
	if got := fetchCommitted(t, cl, "g", "nope", 0); got[0] != -1 {
		t.Errorf("nope/0 committed %d, want -1", got[0])
	}
}
