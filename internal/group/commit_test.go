package group

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetCommitFetchRoundTrip(t *testing.T) {
	t.Parallel()
	c, s := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	resp := c.OffsetCommit(ctx, commitReq("g", -1, "", "t1", map[int32]int64{0: 10, 1: 20}))
	for tp, code := range commitCodes(resp) {
		wantCode(t, tp.topic, code, nil)
	}
	if n := len(s.records()); n != 2 {
		t.Fatalf("store has %d records, want 2", n)
	}
	got, top := fetch(c, "g", "t1", false, 0, 1, 2)
	wantCode(t, "fetch", top, nil)
	want := map[int32]fetched{0: {10, 3, 0}, 1: {20, 3, 0}, 2: {-1, -1, 0}}
	for p, w := range want {
		if got[p] != w {
			t.Fatalf("partition %d: %+v, want %+v", p, got[p], w)
		}
	}
	if gs := listGroups(c); gs["g"] != "Empty/" {
		t.Fatalf("simple group listed as %q", gs["g"])
	}

	// No topics: every committed partition (v2+).
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 6
	r.Group = "g"
	all := c.OffsetFetch(ctx, r)
	if len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 2 || *all.Topics[0].Partitions[1].Metadata != "md" {
		t.Fatalf("fetch all: %+v", all.Topics)
	}
	unknown, _ := fetch(c, "nope", "t1", false, 0)
	if unknown[0] != (fetched{-1, -1, 0}) {
		t.Fatalf("unknown group: %+v", unknown[0])
	}
}

func TestOffsetCommitErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := bubbleConfig()
		cfg.TopicExists = func(topic string, p int32) bool { return topic == "t1" && p < 4 }
		c, _ := newTestCoordinator(t, cfg)
		ctx := context.Background()
		a := newClient(c, "g", "a")
		stableGroup(t, ctx, a)
		tp0 := topicPartition{"t1", 0}
		code := func(r *kmsg.OffsetCommitRequest) int16 { return commitCodes(c.OffsetCommit(ctx, r))[tp0] }

		wantCode(t, "member commit", code(commitReq("g", a.gen, a.id, "t1", map[int32]int64{0: 1})), nil)
		wantCode(t, "unknown member", code(commitReq("g", a.gen, "ghost", "t1", map[int32]int64{0: 1})), kerr.UnknownMemberID)
		wantCode(t, "stale generation", code(commitReq("g", a.gen-1, a.id, "t1", map[int32]int64{0: 1})), kerr.IllegalGeneration)
		wantCode(t, "anonymous commit to an active group", code(commitReq("g", -1, "", "t1", map[int32]int64{0: 1})), kerr.UnknownMemberID)

		missing := commitCodes(c.OffsetCommit(ctx, commitReq("g", a.gen, a.id, "nosuch", map[int32]int64{0: 1})))
		wantCode(t, "unknown topic", missing[topicPartition{"nosuch", 0}], kerr.UnknownTopicOrPartition)
		wantCode(t, "unknown partition", commitCodes(c.OffsetCommit(ctx, commitReq("g", a.gen, a.id, "t1", map[int32]int64{9: 1})))[topicPartition{"t1", 9}], kerr.UnknownTopicOrPartition)

		v9 := commitReq("nogroup", 3, "m", "t1", map[int32]int64{0: 1})
		wantCode(t, "v9 unknown group", code(v9), kerr.GroupIDNotFound)
		v9.Version = 8
		wantCode(t, "v8 unknown group", code(v9), kerr.IllegalGeneration)

		big := commitReq("g", a.gen, a.id, "t1", map[int32]int64{0: 1})
		md := strings.Repeat("x", 4097)
		big.Topics[0].Partitions[0].Metadata = &md
		wantCode(t, "metadata too large", code(big), kerr.OffsetMetadataTooLarge)

		// During CompletingRebalance a member has its generation but no assignment yet.
		b := newClient(c, "g", "b")
		go b.join(ctx)
		synctest.Wait()
		a.join(ctx) // generation 2 begins; a does not sync yet
		wantCode(t, "commit while completing", code(commitReq("g", a.gen, a.id, "t1", map[int32]int64{0: 1})), kerr.RebalanceInProgress)

		got, _ := fetch(c, "g", "t1", false, 0)
		if got[0].offset != 1 {
			t.Fatalf("offset %d after the rejected commits, want 1", got[0].offset)
		}
	})
}

func TestOffsetCommitDurableBeforeSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, testConfig())
		ctx := context.Background()
		gate := make(chan struct{})
		s.gate = gate
		done := make(chan *kmsg.OffsetCommitResponse, 1)
		go func() { done <- c.OffsetCommit(ctx, commitReq("g", -1, "", "t1", map[int32]int64{0: 100})) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("OffsetCommit returned before the store did")
		default:
		}
		if got, _ := fetch(c, "g", "t1", false, 0); got[0].offset != -1 {
			t.Fatalf("offset %d visible before it is durable", got[0].offset)
		}
		close(gate)
		wantCode(t, "commit", commitCodes(<-done)[topicPartition{"t1", 0}], nil)
		if got, _ := fetch(c, "g", "t1", false, 0); got[0].offset != 100 {
			t.Fatalf("offset %d after the commit, want 100", got[0].offset)
		}
	})
}

func TestOffsetCommitStoreFailure(t *testing.T) {
	t.Parallel()
	c, s := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	c.OffsetCommit(ctx, commitReq("g", -1, "", "t1", map[int32]int64{0: 5}))
	s.setFail(errDisk)
	codes := commitCodes(c.OffsetCommit(ctx, commitReq("g", -1, "", "t1", map[int32]int64{0: 6})))
	wantCode(t, "failed store", codes[topicPartition{"t1", 0}], kerr.CoordinatorNotAvailable)
	if got, _ := fetch(c, "g", "t1", false, 0); got[0].offset != 5 {
		t.Fatalf("offset %d after a failed commit, want the stored 5", got[0].offset)
	}
	s.setFail(nil)
	if got, _ := fetch(restart(t, s), "g", "t1", false, 0); got[0].offset != 5 {
		t.Fatalf("offset %d after restart, want 5", got[0].offset)
	}
}

func TestOffsetFetchManyGroupsV8(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	ids := map[string][16]byte{"t1": {1}, "t2": {2}}
	cfg.TopicName = func(id [16]byte) (string, bool) {
		for n, i := range ids {
			if i == id {
				return n, true
			}
		}
		return "", false
	}
	cfg.TopicID = func(n string) ([16]byte, bool) { id, ok := ids[n]; return id, ok }
	c, _ := newTestCoordinator(t, cfg)
	ctx := context.Background()
	c.OffsetCommit(ctx, commitReq("g1", -1, "", "t1", map[int32]int64{0: 11}))
	c.OffsetCommit(ctx, commitReq("g2", -1, "", "t2", map[int32]int64{3: 23}))

	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	r.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g1", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t1", Partitions: []int32{0, 1}}}},
		{Group: "g2"}, // all topics
		{Group: "g3", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t1", Partitions: []int32{0}}}},
	}
	resp := c.OffsetFetch(ctx, r)
	if len(resp.Groups) != 3 {
		t.Fatalf("%d groups answered", len(resp.Groups))
	}
	g1, g2, g3 := resp.Groups[0], resp.Groups[1], resp.Groups[2]
	if g1.Group != "g1" || g1.Topics[0].Partitions[0].Offset != 11 || g1.Topics[0].Partitions[1].Offset != -1 {
		t.Fatalf("g1: %+v", g1)
	}
	if len(g2.Topics) != 1 || g2.Topics[0].Topic != "t2" || g2.Topics[0].Partitions[0].Partition != 3 || g2.Topics[0].Partitions[0].Offset != 23 {
		t.Fatalf("g2: %+v", g2)
	}
	if g3.ErrorCode != 0 || g3.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("g3: %+v", g3)
	}

	// v10 names topics by ID.
	r.Version = 10
	r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g1", Topics: []kmsg.OffsetFetchRequestGroupTopic{
		{TopicID: ids["t1"], Partitions: []int32{0}}, {TopicID: [16]byte{9}, Partitions: []int32{0}},
	}}}
	v10 := c.OffsetFetch(ctx, r).Groups[0]
	if v10.Topics[0].TopicID != ids["t1"] || v10.Topics[0].Partitions[0].Offset != 11 {
		t.Fatalf("v10 by ID: %+v", v10.Topics[0])
	}
	wantCode(t, "v10 unknown topic ID", v10.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicID)
}
