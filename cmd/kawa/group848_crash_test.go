package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgMember speaks KIP-848 by hand (ConsumerGroupHeartbeat v1, OffsetCommit v9 with the member
// epoch), so a test can stop it at any step of a reconciliation.
type cgMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	id      string
	topicID [16]byte
	epoch   int32
	owned   []int32 // partitions the member holds, as it reports them
}

// heartbeat sends one heartbeat reporting m.owned (a join on epoch 0) and returns the response;
// the caller checks the error code.
func (m *cgMember) heartbeat(ctx context.Context) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = m.group, m.id, m.epoch
	if m.epoch == 0 {
		r.SubscribedTopicNames, r.RebalanceTimeoutMillis = []string{"t"}, 30000
	}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: m.topicID, Partitions: slices.Clone(m.owned)}}
	resp, err := r.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("%s heartbeat: %v", m.id, err)
	}
	return resp
}

// mustHeartbeat is heartbeat that fails the test on an error code; it returns the assignment the
// response carries (nil: none).
func (m *cgMember) mustHeartbeat(ctx context.Context) []int32 {
	m.t.Helper()
	resp := m.heartbeat(ctx)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		m.t.Fatalf("%s heartbeat at epoch %d: %v", m.id, m.epoch, err)
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment == nil {
		return nil
	}
	out := []int32{}
	for _, t := range resp.Assignment.Topics {
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return out
}

// commit commits offsets with the member's epoch; it returns the code of each partition.
func (m *cgMember) commit(ctx context.Context, epoch int32, offsets map[int32]int64) map[int32]int16 {
	m.t.Helper()
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 9
	r.Group, r.MemberID, r.Generation = m.group, m.id, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = "t", m.topicID // v10 names topics by ID
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	resp, err := r.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("%s commit: %v", m.id, err)
	}
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

func (m *cgMember) mustCommit(ctx context.Context, offsets map[int32]int64) {
	m.t.Helper()
	for p, code := range m.commit(ctx, m.epoch, offsets) {
		if err := kerr.ErrorForCode(code); err != nil {
			m.t.Fatalf("%s commit of partition %d at epoch %d: %v", m.id, p, m.epoch, err)
		}
	}
}

// holders is ConsumerGroupDescribe's view: partition -> members holding it (current assignment),
// and each member's epoch.
func holders(t *testing.T, ctx context.Context, cl *kgo.Client, group string) (map[int32][]string, map[string]int32) {
	t.Helper()
	g := consumerGroupOf(t, ctx, cl, group)
	out, epochs := map[int32][]string{}, map[string]int32{}
	for _, m := range g.Members {
		epochs[m.MemberID] = m.MemberEpoch
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				out[p] = append(out[p], m.MemberID)
			}
		}
	}
	return out, epochs
}

// consumerGroupOf is ConsumerGroupDescribe's answer for group; an error code fails the test.
func consumerGroupOf(t *testing.T, ctx context.Context, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = []string{group}
	resp, err := r.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		t.Fatalf("ConsumerGroupDescribe: %v", err)
	}
	return g
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// TestConsumerGroupSurvivesSIGKILL: a real kawa process, a KIP-848 group of two members SIGKILLed
// mid-reconciliation (a has been told to revoke two partitions and has not yet confirmed; b waits
// for them). After the restart the group has the same group epoch and member epochs: both members
// go on heartbeating with theirs (no FENCED_MEMBER_EPOCH, no UNKNOWN_MEMBER_ID), b gets the
// partitions only once a reported them released (never two holders), and every acknowledged
// commit, including a's commit of a partition it was revoking, is still there. A second SIGKILL
// with the group stable changes nothing either.
func TestConsumerGroupSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	p := startKawa(t, dir, "--listen", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, addr, kgo.RetryTimeout(time.Minute))
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 4, 1, nil, "t")
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	const group = "g848-crash"
	a := &cgMember{t: t, cl: cl, group: group, id: "member-a", topicID: created.ID}
	b := &cgMember{t: t, cl: cl, group: group, id: "member-b", topicID: created.ID}
	if got := a.mustHeartbeat(ctx); !slices.Equal(got, []int32{0, 1, 2, 3}) || a.epoch != 1 {
		t.Fatalf("a joined at epoch %d with %v, want epoch 1 with all four", a.epoch, got)
	}
	a.owned = []int32{0, 1, 2, 3}
	a.mustCommit(ctx, map[int32]int64{0: 10, 1: 11, 2: 12, 3: 13})
	if got := b.mustHeartbeat(ctx); len(got) != 0 || b.epoch != 2 {
		t.Fatalf("b joined at epoch %d with %v, want epoch 2 with nothing yet", b.epoch, got)
	}
	keep := a.mustHeartbeat(ctx) // the revocation: a keeps two, stays at epoch 1
	revoke := minus(a.owned, keep)
	if len(keep) != 2 || a.epoch != 1 {
		t.Fatalf("a told to keep %v at epoch %d, want two partitions at epoch 1", keep, a.epoch)
	}
	// Still holding what it is revoking, a commits its progress there (KIP-1251: its epoch is
	// not older than the partitions' assignment epoch).
	a.mustCommit(ctx, map[int32]int64{revoke[0]: 20, revoke[1]: 21})

	p.Kill()
	p = startKawa(t, dir, "--listen", addr)

	owners, epochs := holders(t, ctx, cl, group)
	if epochs[a.id] != 1 || epochs[b.id] != 2 {
		t.Fatalf("member epochs after restart %v, want a=1 b=2", epochs)
	}
	for part, hs := range owners {
		if len(hs) > 1 {
			t.Fatalf("partition %d held by %v after restart", part, hs)
		}
	}
	if got := b.mustHeartbeat(ctx); len(got) != 0 {
		t.Fatalf("b got %v after the restart while a still holds %v", got, revoke)
	}
	if got := committedOffsets(t, ctx, cl, group, "t", 4); got[keep[0]] != int64(10+keep[0]) || got[revoke[0]] != 20 || got[revoke[1]] != 21 {
		t.Fatalf("committed offsets after restart %v, want %d=%d %d=20 %d=21", got, keep[0], 10+keep[0], revoke[0], revoke[1])
	}
	a.owned = keep // a confirms the revocation
	if a.mustHeartbeat(ctx); a.epoch != 2 {
		t.Fatalf("a at epoch %d after releasing, want 2", a.epoch)
	}
	got := b.mustHeartbeat(ctx)
	if !slices.Equal(got, revoke) {
		t.Fatalf("b got %v, want the released %v", got, revoke)
	}
	b.owned = got
	b.mustCommit(ctx, map[int32]int64{revoke[0]: 30})
	a.mustCommit(ctx, map[int32]int64{keep[0]: 31})

	p.Kill()
	startKawa(t, dir, "--listen", addr)
	owners, epochs = holders(t, ctx, cl, group)
	if epochs[a.id] != 2 || epochs[b.id] != 2 {
		t.Fatalf("member epochs after the second restart %v, want 2 and 2", epochs)
	}
	for part := int32(0); part < 4; part++ {
		if hs := owners[part]; len(hs) != 1 {
			t.Fatalf("partition %d held by %v after the second restart, want one holder", part, hs)
		}
	}
	for range 3 {
		a.mustHeartbeat(ctx)
		b.mustHeartbeat(ctx)
	}
	if a.epoch != 2 || b.epoch != 2 {
		t.Fatalf("epochs moved to a=%d b=%d on keep-alive heartbeats", a.epoch, b.epoch)
	}
	if got := committedOffsets(t, ctx, cl, group, "t", 4); got[revoke[0]] != 30 || got[keep[0]] != 31 {
		t.Fatalf("committed offsets after the second restart %v", got)
	}
	t.Logf("kept %v, moved %v across two SIGKILLs", keep, revoke)
}
