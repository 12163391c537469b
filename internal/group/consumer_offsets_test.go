package group

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgCommit commits partition p of "t" as member id at epoch with OffsetCommit version v.
func (e *cgEnv) cgCommit(v int16, id string, epoch, p int32) int16 {
	r := commitReq("g", epoch, id, "t", map[int32]int64{p: 7})
	r.Version = v
	return commitCodes(e.c.OffsetCommit(context.Background(), r))[topicPartition{"t", p}]
}

// cgTxnCommit is cgCommit through TxnOffsetCommit v3 (producer 1, epoch 0).
func (e *cgEnv) cgTxnCommit(id string, epoch, p int32) int16 {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.Group, r.ProducerID, r.MemberID, r.Generation = 3, "g", 1, id, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = p, 7
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return e.c.TxnOffsetCommit(context.Background(), r).Topics[0].Partitions[0].ErrorCode
}

// cgFetch is OffsetFetch v9 of "t"/0 naming member id (nil: none) at epoch; it returns the group's code.
func (e *cgEnv) cgFetch(id *string, epoch int32) int16 {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 9
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberID, rg.MemberEpoch = "g", id, epoch
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	r.Groups = append(r.Groups, rg)
	return e.c.OffsetFetch(context.Background(), r).Groups[0].ErrorCode
}

// Offset commits, transactional commits and fetches of a consumer group are checked against the
// member epoch: KIP-1251's rule (an epoch older than the member's is accepted for a partition
// assigned at or before it), STALE_MEMBER_EPOCH otherwise (ILLEGAL_GENERATION for TxnOffsetCommit,
// which also takes a commit naming no member), UNKNOWN_MEMBER_ID for a stranger, UNSUPPORTED_VERSION
// for a member committing below v9, and OffsetFetch v9's exact-epoch check.
func TestConsumerGroupOffsetsByMemberEpoch(t *testing.T) {
	t.Parallel()
	e := newCGEnv(t)
	// a holds 0-3 since epoch 1; b joins (epoch 2) and a revokes 2 and 3, then moves to epoch 2
	// keeping 0 and 1 (assigned at epoch 1); b gets 2 and 3 at epoch 2.
	e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
	e.want(e.hb("b", 0, nil, nil), 0, 2, []int32{})
	e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, []int32{0, 1})
	e.want(e.hb("a", 1, []int32{0, 1}, nil), 0, 2, nil)
	e.want(e.hb("b", 2, []int32{}, nil), 0, 2, []int32{2, 3})

	type tc struct {
		name      string
		got, want int16
	}
	var cases []tc
	add := func(name string, got int16, want *kerr.Error) {
		w := int16(0)
		if want != nil {
			w = want.Code
		}
		cases = append(cases, tc{name, got, w})
	}
	add("a at its epoch", e.cgCommit(9, "a", 2, 0), nil)
	add("a at epoch 1 for a partition assigned at 1 (KIP-1251)", e.cgCommit(9, "a", 1, 0), nil)
	add("b at epoch 1 for a partition assigned at 2", e.cgCommit(9, "b", 1, 2), kerr.StaleMemberEpoch)
	add("a above its epoch", e.cgCommit(9, "a", 3, 0), kerr.StaleMemberEpoch)
	add("a at an older epoch for a partition it does not hold", e.cgCommit(9, "a", 1, 3), kerr.StaleMemberEpoch)
	add("a at its epoch for a partition it does not hold", e.cgCommit(9, "a", 2, 3), nil)
	add("unknown member", e.cgCommit(9, "x", 2, 0), kerr.UnknownMemberID)
	add("no member, non-empty group", e.cgCommit(9, "", -1, 0), kerr.UnknownMemberID)
	add("a member with OffsetCommit v8", e.cgCommit(8, "a", 2, 0), kerr.UnsupportedVersion)
	add("txn: a at epoch 1 for a partition assigned at 1", e.cgTxnCommit("a", 1, 1), nil)
	add("txn: b at epoch 1 (Kafka: ILLEGAL_GENERATION, not STALE_MEMBER_EPOCH)", e.cgTxnCommit("b", 1, 2), kerr.IllegalGeneration)
	add("txn: a above its epoch", e.cgTxnCommit("a", 3, 0), kerr.IllegalGeneration)
	add("txn: unknown member", e.cgTxnCommit("x", 2, 0), kerr.UnknownMemberID)
	add("txn: no member, non-empty group (Kafka does not check it)", e.cgTxnCommit("", -1, 0), nil)
	a, x := "a", "x"
	add("fetch: a at its epoch", e.cgFetch(&a, 2), nil)
	add("fetch: a at an older epoch", e.cgFetch(&a, 1), kerr.StaleMemberEpoch)
	add("fetch: unknown member", e.cgFetch(&x, 2), kerr.UnknownMemberID)
	add("fetch: no member (admin)", e.cgFetch(nil, -1), nil)
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, kerr.ErrorForCode(c.got), kerr.ErrorForCode(c.want))
		}
	}
	// Once everyone left, anonymous commits are accepted again.
	e.want(e.hb("a", -1, nil, nil), 0, -1, nil)
	e.want(e.hb("b", -1, nil, nil), 0, -1, nil)
	if code := e.cgCommit(9, "", -1, 0); code != 0 {
		t.Errorf("anonymous commit to the empty group: %v", kerr.ErrorForCode(code))
	}
}

// group.consumer.max.size: a join beyond it is GROUP_MAX_SIZE_REACHED; a static member's instance
// coming back takes its old place and is let in.
func TestConsumerGroupMaxSize(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Topics = func() []TopicInfo { return []TopicInfo{{Name: "t", ID: topicT, Partitions: 4}} }
	cfg.TopicID = func(name string) ([16]byte, bool) { return topicT, name == "t" }
	cfg.TopicName = func(id [16]byte) (string, bool) { return "t", id == topicT }
	cfg.ConsumerMaxSize = 2
	c, s := newTestCoordinator(t, cfg)
	e := &cgEnv{t: t, c: c, s: s, cfg: cfg}
	inst := "i-1"
	e.want(e.hb("a", 0, nil, &inst), 0, 1, []int32{0, 1, 2, 3})
	e.want(e.hb("b", 0, nil, nil), 0, 2, []int32{})
	e.want(e.hb("c", 0, nil, nil), kerr.GroupMaxSizeReached.Code, 0, nil)
	e.want(e.hb("a", -2, nil, &inst), 0, -2, nil)
	e.want(e.hb("a2", 0, nil, &inst), 0, 1, []int32{0, 1}) // back at a's epoch; 2 and 3 go to b
	e.want(e.hb("c", 0, nil, nil), kerr.GroupMaxSizeReached.Code, 0, nil)
	e.want(e.hb("b", -1, nil, nil), 0, -1, nil)
	e.want(e.hb("c", 0, nil, nil), 0, 4, []int32{})
}

// DescribeGroups describes classic groups only, as Kafka: a consumer group is Dead, and
// GROUP_ID_NOT_FOUND "not a classic group" from v6. ListGroups' types filter (KIP-848) tells the
// two apart; a classic JoinGroup into a live consumer group is INCONSISTENT_GROUP_PROTOCOL.
func TestConsumerGroupSeenByClassicAPIs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := newCGEnv(t)
		e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
		stableGroup(t, ctx, newClient(e.c, "classic", "c1"))
		if d := describe(e.c, 5, "g"); d.ErrorCode != 0 || d.State != "Dead" || d.ProtocolType != "" || len(d.Members) != 0 {
			t.Errorf("DescribeGroups v5 of a consumer group: %+v", d)
		}
		d := describe(e.c, 6, "g")
		if d.ErrorCode != kerr.GroupIDNotFound.Code || d.ErrorMessage == nil || *d.ErrorMessage != "Group g is not a classic group." || d.State != "Dead" {
			t.Errorf("DescribeGroups v6 of a consumer group: code %d message %v state %s", d.ErrorCode, d.ErrorMessage, d.State)
		}
		for _, tc := range []struct {
			types []string
			want  []string
		}{{nil, []string{"classic", "g"}}, {[]string{"consumer"}, []string{"g"}}, {[]string{"Classic"}, []string{"classic"}}} {
			r := kmsg.NewPtrListGroupsRequest()
			r.Version, r.TypesFilter = 5, tc.types
			var got []string
			for _, lg := range e.c.ListGroups(ctx, r).Groups {
				got = append(got, lg.Group)
				if want := map[string]string{"g": "consumer", "classic": "classic"}[lg.Group]; lg.GroupType != want || lg.ProtocolType != consumerProtocol {
					t.Errorf("ListGroups %s: type %q protocol type %q", lg.Group, lg.GroupType, lg.ProtocolType)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ListGroups types %v: %v, want %v", tc.types, got, tc.want)
			}
		}
		if resp := newClient(e.c, "g", "c2").join(ctx); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
			t.Errorf("classic JoinGroup into a live consumer group: %s", kerr.ErrorForCode(resp.ErrorCode))
		}
	})
}

// Offsets of a live consumer group do not expire while a member subscribes to their topic (KIP-211);
// once the group is Empty they expire offsets.retention.minutes after that.
func TestConsumerGroupOffsetRetention(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Topics = func() []TopicInfo { return []TopicInfo{{Name: "t", ID: topicT, Partitions: 4}} }
		cfg.TopicID = func(name string) ([16]byte, bool) { return topicT, name == "t" }
		cfg.TopicName = func(id [16]byte) (string, bool) { return "t", id == topicT }
		cfg.ConsumerSessionTimeout = 30 * 24 * time.Hour
		cfg.OffsetsRetention = 7 * 24 * time.Hour
		c, s := newTestCoordinator(t, cfg)
		e := &cgEnv{t: t, c: c, s: s, cfg: cfg}
		e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
		if code := e.cgCommit(9, "a", 1, 0); code != 0 {
			t.Fatalf("commit: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(8 * 24 * time.Hour)
		synctest.Wait()
		if got, _ := fetch(e.c, "g", "t", false, 0); got[0].offset != 7 {
			t.Fatalf("offset of a subscribed topic after 8 days: %+v, want 7", got[0])
		}
		e.want(e.hb("a", -1, nil, nil), 0, -1, nil)
		time.Sleep(6 * 24 * time.Hour)
		synctest.Wait()
		if got, _ := fetch(e.c, "g", "t", false, 0); got[0].offset != 7 {
			t.Fatalf("offset 6 days after the group became Empty: %+v, want 7", got[0])
		}
		time.Sleep(24*time.Hour + 20*time.Minute)
		synctest.Wait()
		if got, _ := fetch(e.c, "g", "t", false, 0); got[0].offset != -1 {
			t.Fatalf("offset 7 days after the group became Empty: %+v, want expired", got[0])
		}
	})
}

// A regex subscription (KIP-848 v1, RE2 on whole names) picks up a matching topic created later:
// the group epoch bumps, the regex member gets the new topic's partitions, the name-subscribed
// member keeps its own, and no partition has two holders.
func TestConsumerGroupRegexPicksUpNewTopic(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	topics := []TopicInfo{{Name: "t", ID: topicT, Partitions: 4}}
	uID := [16]byte{2}
	cfg := testConfig()
	cfg.Topics = func() []TopicInfo { mu.Lock(); defer mu.Unlock(); return slices.Clone(topics) }
	cfg.TopicID = func(name string) ([16]byte, bool) {
		return map[string][16]byte{"t": topicT, "u-1": uID}[name], name == "t" || name == "u-1"
	}
	cfg.TopicName = func(id [16]byte) (string, bool) {
		switch id {
		case topicT:
			return "t", true
		case uID:
			return "u-1", true
		}
		return "", false
	}
	c, s := newTestCoordinator(t, cfg)
	e := &cgEnv{t: t, c: c, s: s, cfg: cfg}
	e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
	rx := "u-.*"
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.SubscribedTopicRegex, r.RebalanceTimeoutMillis = 1, "g", "b", &rx, 10000
	if resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r); resp.ErrorCode != 0 || len(parts(resp)) != 0 || resp.MemberEpoch != 2 {
		t.Fatalf("regex join before a match: %v epoch %d %v", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch, parts(resp))
	}
	mu.Lock()
	topics = append(topics, TopicInfo{Name: "u-1", ID: uID, Partitions: 2})
	mu.Unlock()
	r = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", "b", 2
	resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r)
	if resp.ErrorCode != 0 || resp.MemberEpoch != 3 || resp.Assignment == nil || len(resp.Assignment.Topics) != 1 ||
		resp.Assignment.Topics[0].TopicID != uID || !slices.Equal(resp.Assignment.Topics[0].Partitions, []int32{0, 1}) {
		t.Fatalf("regex member after u-1 was created: %v epoch %d %+v", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch, resp.Assignment)
	}
	e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 3, nil) // keeps t, moves to the new epoch
	holders := map[topicPartition]string{}
	for id, m := range e.c.groups["g"].cg.members {
		for tp := range m.assigned {
			if o, ok := holders[tp]; ok {
				t.Errorf("%v held by %s and %s", tp, o, id)
			}
			holders[tp] = id
		}
	}
	if len(holders) != 6 {
		t.Errorf("%d partitions held, want 6: %v", len(holders), holders)
	}
}
