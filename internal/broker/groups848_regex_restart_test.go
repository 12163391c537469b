package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// cgRawMember is a KIP-848 member speaking ConsumerGroupHeartbeat v1 itself: it reports what it
// was last assigned, so it confirms revocations on its next heartbeat.
type cgRawMember struct {
	id, regex string
	names     []string
	epoch     int32
	owned     []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func (m *cgRawMember) heartbeat(t *testing.T, cl *kgo.Client, group string) {
	t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch, r.Topics = group, m.id, m.epoch, m.owned
	if m.epoch == 0 {
		r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 30000, m.names
		if m.regex != "" {
			r.SubscribedTopicRegex, r.SubscribedTopicNames = &m.regex, nil
		}
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	resp, err := r.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("%s heartbeat: %v", m.id, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("%s heartbeat at epoch %d: %v", m.id, m.epoch, err)
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = m.owned[:0:0]
		for _, at := range resp.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: at.TopicID, Partitions: at.Partitions})
		}
	}
}

// describeLine is ConsumerGroupDescribe of group in one line: state, group and assignment epochs,
// then per member its epoch and current assignment by topic name.
func describeLine(t *testing.T, cl *kgo.Client, group string) string {
	t.Helper()
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = []string{group}
	resp, err := r.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		t.Fatalf("ConsumerGroupDescribe: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s epoch %d assignment %d", g.State, g.Epoch, g.AssignmentEpoch)
	for _, m := range g.Members {
		var tps []string
		for _, tp := range m.Assignment.TopicPartitions {
			tps = append(tps, fmt.Sprintf("%s%v", tp.Topic, tp.Partitions))
		}
		slices.Sort(tps)
		fmt.Fprintf(&b, "; %s@%d %v", m.MemberID, m.MemberEpoch, tps)
	}
	return b.String()
}

// TestConsumerGroupRegexRestart (issue 15): a group with a regex member and a name member, stable,
// survives a broker restart with the same group epoch, member epochs and assignment; heartbeats
// after it bump nothing (the regex's resolution and the topics' metadata hash were stored in
// __consumer_offsets, not recomputed into a new epoch), and the regex still picks up a matching
// topic created after the restart.
func TestConsumerGroupRegexRestart(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, consumerProtocol)
	k.CreateTopic("rx-a", 4, nil)
	k.CreateTopic("rx-b", 2, nil)
	k.CreateTopic("other", 1, nil)
	const group = "rx-restart"
	ms := []*cgRawMember{{id: "member-regex", regex: "rx-.*"}, {id: "member-names", names: []string{"rx-a"}}}
	cl := k.Client()
	stable := func(cl *kgo.Client) string {
		t.Helper()
		var d string
		wait.Until(t, 10*time.Second, "the group to be Stable", func() bool {
			for _, m := range ms {
				m.heartbeat(t, cl, group)
			}
			d = describeLine(t, cl, group)
			return strings.HasPrefix(d, "Stable")
		})
		return d
	}
	before := stable(cl)
	if !strings.Contains(before, "rx-b[0 1]") || strings.Contains(before, "other") {
		t.Fatalf("before restart: %s; want rx-b with the regex member and no other", before)
	}
	k = k.Restart()
	cl = k.Client()
	if got := describeLine(t, cl, group); got != before {
		t.Fatalf("after restart: %s\nwant %s", got, before)
	}
	for range 3 {
		for _, m := range ms {
			m.heartbeat(t, cl, group)
		}
	}
	if got := describeLine(t, cl, group); got != before {
		t.Fatalf("after heartbeats following the restart: %s\nwant %s (no epoch bump)", got, before)
	}
	var epoch int32
	fmt.Sscanf(before, "Stable epoch %d", &epoch)
	k.CreateTopic("rx-c", 1, nil)
	after := stable(cl)
	if !strings.HasPrefix(after, fmt.Sprintf("Stable epoch %d ", epoch+1)) || !strings.Contains(after, "rx-c[0]") {
		t.Fatalf("after rx-c was created: %s; want epoch %d with rx-c assigned", after, epoch+1)
	}
	t.Logf("before restart: %s; after rx-c: %s", before, after)
}
