package txn_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// Offsets committed in an aborted transaction (franz-go
// GroupTransactSession) are not visible to OffsetFetch; a later committed
// transaction's are.
func TestAbortedTxnOffsetsInvisible(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	in, out, group := name("in"), name("out"), name("g")
	k.CreateTopic(in, 3, nil)
	k.CreateTopic(out, 1, nil)
	w := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxT(t)
	for i := 0; i < 6; i++ {
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: in, Partition: int32(i % 3), Value: []byte{'0' + byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txnID := name("tx")
	r := newRaw(t, k, nil)
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(k.Addr), kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(out),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for _, commit := range []bool{false, true} {
		var got []*kgo.Record
		for len(got) < 6 {
			fs := s.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			got = append(got, fs.Records()...)
		}
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			s.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
		}
		committed, err := s.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil || committed != commit {
			t.Fatalf("End(%v) = %v, %v", commit, committed, err)
		}
		// franz-go may re-initialise (Empty) right after its abort.
		r.waitState(txnID, map[bool]string{false: "CompleteAbort", true: "CompleteCommit"}[commit], "Empty")
		for p := int32(0); p < 3; p++ {
			want := int64(-1)
			if commit {
				want = 2
			}
			if got := committedOffset(t, k, group, in, p); got != want {
				t.Fatalf("commit=%v: committed offset of %s-%d = %d, want %d", commit, in, p, got, want)
			}
		}
	}
	waitVisible(t, k, out, []string{"0", "1", "2", "3", "4", "5"})
}

// member is a raw classic-protocol group member.
type member struct {
	r      *raw
	group  string
	id     string
	gen    int32
	leader bool
}

// join runs JoinGroup (retrying MEMBER_ID_REQUIRED, KIP-394) with the given
// rebalance timeout and returns the response code.
func (m *member) join(ctx context.Context, rebalance time.Duration) int16 {
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = m.group, m.id, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, int32(rebalance.Milliseconds())
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
		req.Protocols = append(req.Protocols, p)
		resp, err := m.r.cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			return -1
		}
		jr := resp.(*kmsg.JoinGroupResponse)
		m.id = jr.MemberID
		if jr.ErrorCode == kerr.MemberIDRequired.Code {
			continue
		}
		m.gen, m.leader = jr.Generation, jr.LeaderID == jr.MemberID
		return jr.ErrorCode
	}
}

func (m *member) sync() int16 {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	if m.leader {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID = m.id
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	return m.r.do(req).(*kmsg.SyncGroupResponse).ErrorCode
}

// txnCommit stages topic/0 -> offset for the group in p's transaction
// (TxnOffsetCommit v3, KIP-447 generation and member).
func (m *member) txnCommit(txnID string, p *pid, topic string, offset int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, m.group, p.id, p.epoch
	req.Generation, req.MemberID = m.gen, m.id
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return m.r.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (r *raw) addOffsets(txnID string, p *pid, group string) int16 {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, p.id, p.epoch, group
	return r.do(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

// stableOffset is OffsetFetch(require_stable) of group topic/0: the offset
// and the partition's code.
func (r *raw) stableOffset(group, topic string) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := r.do(req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	if len(resp.Groups) > 0 {
		g := resp.Groups[0]
		if g.ErrorCode != 0 {
			return -1, g.ErrorCode
		}
		p := g.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// waitStable polls OffsetFetch(require_stable) until it answers want with no
// error; UNSTABLE_OFFSET_COMMIT in between is transient.
func (r *raw) waitStable(group, topic string, want int64) {
	r.t.Helper()
	wait.Until(r.t, 10*time.Second, fmt.Sprintf("OffsetFetch(require_stable) %s to answer %d", group, want), func() bool {
		off, code := r.stableOffset(group, topic)
		if code != 0 && code != kerr.UnstableOffsetCommit.Code {
			r.t.Fatalf("OffsetFetch(require_stable) %s: %d %s, want %d", group, off, codeName(code), want)
		}
		return code == 0 && off == want
	})
}

func groupState(r *raw, group string) string {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	return r.do(req).(*kmsg.DescribeGroupsResponse).Groups[0].State
}

// BL-15: a commit decided while the group rebalances is applied to the
// group's offsets whatever its state; an abort drops the staged offsets and
// the previous commit comes back.
func TestTxnOffsetsCommitDuringRebalance(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic, group := name("in"), name("g")
	k.CreateTopic(topic, 1, nil)
	r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 4})
	m1 := &member{r: r, group: group}
	if code := m1.join(ctxT(t), time.Second); code != 0 || m1.sync() != 0 {
		t.Fatalf("M1 join: %s", codeName(code))
	}
	id := name("tx")
	p := r.mustInit(id, 60000, nil)
	if code := r.addOffsets(id, p, group); code != 0 {
		t.Fatal(codeName(code))
	}
	if code := m1.txnCommit(id, p, topic, 100); code != 0 {
		t.Fatalf("TxnOffsetCommit: %s", codeName(code))
	}
	m2 := &member{r: newRaw(t, k, nil), group: group}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m2.join(ctx, time.Second) // parks: the group rebalances
	wait.Until(t, 10*time.Second, "the group to prepare a rebalance", func() bool { return groupState(r, group) == "PreparingRebalance" })
	if e := r.endTxn(id, p, true); e.ErrorCode != 0 {
		t.Fatalf("EndTxn during the rebalance: %s", codeName(e.ErrorCode))
	}
	other := newRaw(t, k, nil) // a new application instance
	other.waitStable(group, topic, 100)

	r.waitState(id, "CompleteCommit")
	if code := r.addOffsets(id, p, group); code != 0 {
		t.Fatal(codeName(code))
	}
	if code := m1.txnCommit(id, p, topic, 200); code != 0 && code != kerr.IllegalGeneration.Code && code != kerr.UnknownMemberID.Code {
		t.Fatalf("second TxnOffsetCommit: %s", codeName(code))
	}
	if e := r.endTxn(id, p, false); e.ErrorCode != 0 {
		t.Fatal(codeName(e.ErrorCode))
	}
	other.waitStable(group, topic, 100)
}

// BL-17: M1 stages p0 -> 5 in T, stalls, and loses p0 in a rebalance; M2
// sees UNSTABLE_OFFSET_COMMIT until T ends; M1's TxnOffsetCommit with its
// stale generation is ILLEGAL_GENERATION (or UNKNOWN_MEMBER_ID); M1 aborts,
// its output never becomes visible, and M2 gets the last real commit (none).
func TestZombieMemberTxnOffsetCommitFenced(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic, outTopic, group := name("in"), name("out"), name("g")
	k.CreateTopic(topic, 1, nil)
	k.CreateTopic(outTopic, 1, nil)
	r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 4})
	m1 := &member{r: r, group: group}
	if code := m1.join(ctxT(t), 300*time.Millisecond); code != 0 || m1.sync() != 0 {
		t.Fatalf("M1 join: %s", codeName(code))
	}
	id := name("tx")
	p := r.mustInit(id, 60000, nil)
	r.addPartitions(id, p, outTopic, 0)
	r.produce(&id, p, outTopic, 0, 0, "out-0..9")
	r.addOffsets(id, p, group)
	if code := m1.txnCommit(id, p, topic, 5); code != 0 {
		t.Fatalf("stage: %s", codeName(code))
	}
	m2 := &member{r: newRaw(t, k, nil), group: group}
	if code := m2.join(ctxT(t), 300*time.Millisecond); code != 0 || m2.gen != m1.gen+1 || m2.sync() != 0 {
		t.Fatalf("M2 join: %s generation %d (M1 had %d)", codeName(code), m2.gen, m1.gen)
	}
	if _, code := m2.r.stableOffset(group, topic); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("M2 OffsetFetch(require_stable) while T is open: %s", codeName(code))
	}
	code := m1.txnCommit(id, p, topic, 10)
	if code != kerr.IllegalGeneration.Code && code != kerr.UnknownMemberID.Code {
		t.Fatalf("zombie TxnOffsetCommit: %s, want ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID", codeName(code))
	}
	if e := r.endTxn(id, p, false); e.ErrorCode != 0 {
		t.Fatal(codeName(e.ErrorCode))
	}
	m2.r.waitStable(group, topic, -1)
	if v := readAll(t, k, outTopic, true, -1); !slices.Equal(v, []string(nil)) {
		t.Fatalf("zombie's output visible: %q", v)
	}
}
