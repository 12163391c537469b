package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthzShareGroupOffsetsTopics: the share-group offsets APIs check the
// topics as Kafka's KafkaApis does, besides the group. alice holds READ and
// DELETE on share group S and READ on topic A only: for B she gets
// TOPIC_AUTHORIZATION_FAILED from DescribeShareGroupOffsets (DESCRIBE),
// AlterShareGroupOffsets (READ) and DeleteShareGroupOffsets (READ), and B is
// left out of a describe of every topic, while A is answered each time.
func TestAuthzShareGroupOffsetsTopics(t *testing.T) {
	a := startAuthz(t)
	a.createTopics("A", "B")
	a.grant(
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("A").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("S").Operations(kadm.OpRead, kadm.OpDelete),
	)
	alter := func(user string) *kmsg.AlterShareGroupOffsetsResponse {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = "S"
		for _, name := range []string{"A", "B"} {
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = name
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = 0, 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return a.raw(user, req).(*kmsg.AlterShareGroupOffsetsResponse)
	}
	codes := func(r *kmsg.AlterShareGroupOffsetsResponse) map[string]int16 {
		m := map[string]int16{}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				m[rt.Topic] = rp.ErrorCode
			}
		}
		return m
	}
	if got := codes(alter("admin")); got["A"] != 0 || got["B"] != 0 {
		t.Fatalf("admin's AlterShareGroupOffsets: %v", got)
	}
	if got := codes(alter("alice")); got["A"] != 0 || got["B"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's AlterShareGroupOffsets: codes %v, want A 0 and B TOPIC_AUTHORIZATION_FAILED", got)
	}

	describe := func(topics ...string) map[string]int16 {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = "S"
		for _, name := range topics {
			rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			rt.Topic, rt.Partitions = name, []int32{0}
			rg.Topics = append(rg.Topics, rt)
		}
		req.Groups = append(req.Groups, rg)
		resp := a.raw("alice", req).(*kmsg.DescribeShareGroupOffsetsResponse)
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe S as alice: %+v", resp.Groups)
		}
		m := map[string]int16{}
		for _, rt := range resp.Groups[0].Topics {
			for _, rp := range rt.Partitions {
				m[rt.Topic] = rp.ErrorCode
			}
		}
		return m
	}
	if got := describe("A", "B"); len(got) != 2 || got["A"] != 0 || got["B"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice describing A and B: codes %v, want A 0 and B TOPIC_AUTHORIZATION_FAILED", got)
	}
	if got := describe(); len(got) != 1 || got["A"] != 0 {
		t.Errorf("alice describing every topic of S: codes %v, want only A", got)
	}

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "S"
	for _, name := range []string{"A", "B"} {
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = name
		del.Topics = append(del.Topics, rt)
	}
	resp := a.raw("alice", del).(*kmsg.DeleteShareGroupOffsetsResponse)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt.ErrorCode
	}
	if resp.ErrorCode != 0 || got["A"] != 0 || got["B"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's DeleteShareGroupOffsets: top-level %d, topics %v; want A 0 and B TOPIC_AUTHORIZATION_FAILED", resp.ErrorCode, got)
	}
}
