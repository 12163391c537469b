package group

import (
	"context"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func tpSet(tps ...topicPartition) map[topicPartition]bool {
	out := map[topicPartition]bool{}
	for _, tp := range tps {
		out[tp] = true
	}
	return out
}

// Kafka's RangeAssignor documentation: two members subscribed to t0 and t1 (3 partitions each):
// C0 gets t0p0, t0p1, t1p0, t1p1 and C1 gets t0p2, t1p2.
func TestRangeAssignorKafkaExample(t *testing.T) {
	t.Parallel()
	both := map[string]bool{"t0": true, "t1": true}
	got := assign(assignorRange, []assignInput{{id: "C1", topics: both}, {id: "C0", topics: both}}, map[string]int32{"t0": 3, "t1": 3})
	want := map[string]map[topicPartition]bool{
		"C0": tpSet(topicPartition{"t0", 0}, topicPartition{"t0", 1}, topicPartition{"t1", 0}, topicPartition{"t1", 1}),
		"C1": tpSet(topicPartition{"t0", 2}, topicPartition{"t1", 2}),
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("range: %v, want %v", got, want)
	}
}

// Uniform: balanced over each topic's subscribers, and sticky: a member joining takes one partition
// from each of the two that had three, and nobody else moves.
func TestUniformAssignorBalancedAndSticky(t *testing.T) {
	t.Parallel()
	sub := map[string]bool{"t": true}
	first := assign(assignorUniform, []assignInput{{id: "a", topics: sub}, {id: "b", topics: sub}}, map[string]int32{"t": 6})
	if len(first["a"]) != 3 || len(first["b"]) != 3 {
		t.Fatalf("two members: %v", first)
	}
	second := assign(assignorUniform, []assignInput{
		{id: "a", topics: sub, current: first["a"]}, {id: "b", topics: sub, current: first["b"]}, {id: "c", topics: sub},
	}, map[string]int32{"t": 6})
	seen := map[topicPartition]string{}
	for id, set := range second {
		if len(set) != 2 {
			t.Errorf("%s got %d partitions, want 2: %v", id, len(set), second)
		}
		for tp := range set {
			if o, ok := seen[tp]; ok {
				t.Errorf("%v assigned to %s and %s", tp, o, id)
			}
			seen[tp] = id
			if id != "c" && !first[id][tp] {
				t.Errorf("%s gained %v: not sticky", id, tp)
			}
		}
	}
	if len(seen) != 6 {
		t.Errorf("assigned %d of 6 partitions", len(seen))
	}
	// A member not subscribed to a topic gets none of it.
	got := assign(assignorUniform, []assignInput{{id: "a", topics: sub}, {id: "b", topics: map[string]bool{}}}, map[string]int32{"t": 2})
	if len(got["a"]) != 2 || len(got["b"]) != 0 {
		t.Errorf("unsubscribed member: %v", got)
	}
}

// cgEnv is a coordinator with one 4-partition topic "t" for consumer-protocol tests.
type cgEnv struct {
	t   *testing.T
	c   *Coordinator
	s   *memStore
	cfg Config
}

var topicT = [16]byte{1}

func newCGEnv(t *testing.T) *cgEnv {
	cfg := testConfig()
	cfg.Topics = func() []TopicInfo { return []TopicInfo{{Name: "t", ID: topicT, Partitions: 4}} }
	cfg.TopicID = func(name string) ([16]byte, bool) { return topicT, name == "t" }
	cfg.TopicName = func(id [16]byte) (string, bool) { return "t", id == topicT }
	c, s := newTestCoordinator(t, cfg)
	return &cgEnv{t: t, c: c, s: s, cfg: cfg}
}

// hb sends a heartbeat; owned nil means the request does not report owned partitions.
func (e *cgEnv) hb(id string, epoch int32, owned []int32, instance *string) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch, r.InstanceID = "g", id, epoch, instance
	if epoch == 0 {
		r.SubscribedTopicNames = []string{"t"}
		r.RebalanceTimeoutMillis = 10000
	}
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicT, Partitions: owned}}
	}
	return e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r)
}

// parts is the assignment a response carries (nil: none carried).
func parts(r *kmsg.ConsumerGroupHeartbeatResponse) []int32 {
	if r.Assignment == nil {
		return nil
	}
	out := []int32{}
	for _, t := range r.Assignment.Topics {
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return out
}

func (e *cgEnv) want(r *kmsg.ConsumerGroupHeartbeatResponse, code int16, epoch int32, assignment []int32) {
	e.t.Helper()
	if r.ErrorCode != code || (code == 0 && (r.MemberEpoch != epoch || !slices.Equal(parts(r), assignment))) {
		e.t.Fatalf("heartbeat: %s epoch %d assignment %v, want %s epoch %d assignment %v",
			kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, parts(r), kerr.ErrorForCode(code), epoch, assignment)
	}
}

// Reconciliation as Kafka's CurrentAssignmentBuilder: the second member gets nothing until the first
// revoked; the first keeps its epoch until it reports the revoked partitions released; epochs other
// than the current or previous one are fenced; a member silent for the session timeout is removed and
// its partitions move.
func TestConsumerGroupRevokeBeforeAssign(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newCGEnv(t)
		e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
		e.want(e.hb("b", 0, nil, nil), 0, 2, []int32{})                     // group epoch 2; a still holds everything
		e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, []int32{0, 1}) // revoke 2, 3; epoch stays
		e.want(e.hb("b", 2, []int32{}, nil), 0, 2, []int32{})               // not released yet
		if code := e.c.groups["g"].validateConsumerCommit("b", 2, []topicPartition{{"t", 2}}); code != 0 {
			t.Errorf("commit by b at its epoch: %s", kerr.ErrorForCode(code))
		}
		e.want(e.hb("a", 1, []int32{0, 1}, nil), 0, 2, nil) // released: a moves to epoch 2
		e.want(e.hb("b", 2, []int32{}, nil), 0, 2, []int32{2, 3})
		if code := e.c.groups["g"].validateConsumerCommit("b", 3, []topicPartition{{"t", 2}}); code != kerr.StaleMemberEpoch.Code {
			t.Errorf("commit with an epoch above the member's: %s", kerr.ErrorForCode(code))
		}
		if code := e.c.groups["g"].validateConsumerCommit("a", 1, []topicPartition{{"t", 0}}); code != 0 {
			t.Errorf("commit with the epoch a partition was assigned in (KIP-1251): %s", kerr.ErrorForCode(code))
		}
		e.want(e.hb("a", 5, nil, nil), kerr.FencedMemberEpoch.Code, 0, nil)
		e.want(e.hb("x", 1, nil, nil), kerr.UnknownMemberID.Code, 0, nil)
		// a goes silent; b keeps heartbeating and gets everything after a's session timeout.
		for range 8 { // 40 s: a is still in the group
			time.Sleep(5 * time.Second)
			synctest.Wait()
			e.want(e.hb("b", 2, []int32{2, 3}, nil), 0, 2, nil)
		}
		time.Sleep(5*time.Second + time.Millisecond) // past a's 45 s session
		synctest.Wait()
		e.want(e.hb("b", 2, []int32{2, 3}, nil), 0, 3, []int32{0, 1, 2, 3})
		e.want(e.hb("a", 2, nil, nil), kerr.UnknownMemberID.Code, 0, nil)
		e.want(e.hb("a", 0, nil, nil), 0, 4, []int32{}) // a fenced member rejoins with epoch 0
	})
}

// A static member's leave (-2) keeps its partitions; its instance rejoins with a new member ID and
// epoch 0 and gets them back at the same epoch; nobody else received them meanwhile. A second live
// member with the same instance ID is UNRELEASED_INSTANCE_ID.
func TestConsumerGroupStaticLeaveRejoin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newCGEnv(t)
		inst := "i-1"
		e.staticPair(&inst)
		e.want(e.hb("a2", 0, nil, &inst), kerr.UnreleasedInstanceID.Code, 0, nil)
		e.want(e.hb("a", -2, nil, &inst), 0, -2, nil)
		time.Sleep(10 * time.Second)
		e.want(e.hb("b", 2, []int32{2, 3}, nil), 0, 2, nil) // b did not get a's partitions
		e.want(e.hb("a2", 0, nil, &inst), 0, 2, []int32{0, 1})
	})
}

// staticPair makes a group of the static member a (instance inst) and the dynamic member b, both
// at epoch 2, a holding partitions 0 and 1 and b 2 and 3.
func (e *cgEnv) staticPair(inst *string) {
	e.t.Helper()
	e.want(e.hb("a", 0, nil, inst), 0, 1, []int32{0, 1, 2, 3})
	e.want(e.hb("b", 0, nil, nil), 0, 2, []int32{})
	e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, inst), 0, 1, []int32{0, 1})
	e.want(e.hb("a", 1, []int32{0, 1}, inst), 0, 2, nil)
	e.want(e.hb("b", 2, []int32{}, nil), 0, 2, []int32{2, 3})
}

func TestConsumerGroupHeartbeatErrors(t *testing.T) {
	t.Parallel()
	e := newCGEnv(t)
	bad := "("
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.SubscribedTopicRegex = "g", "m", &bad
	if resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r); resp.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Errorf("bad regex: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
	asg := "cooperative-sticky"
	r = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.SubscribedTopicNames, r.ServerAssignor = "g", "m", []string{"t"}, &asg
	if resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r); resp.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Errorf("unknown assignor: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
	r = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID = "g", "m"
	if resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("join without a subscription: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
	// A regex subscription matches whole names.
	rx := "t|u"
	r = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.SubscribedTopicRegex = "g", "m", &rx
	if resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r); resp.ErrorCode != 0 || len(parts(resp)) != 4 {
		t.Errorf("regex join: %s %v", kerr.ErrorForCode(resp.ErrorCode), parts(resp))
	}
}
