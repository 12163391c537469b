package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// groupMember joins group on topic (range, 6 s session) and polls until
// it has an assignment, returning the records those polls got; the caller
// closes it (LeaveGroup).
func groupMember(t *testing.T, ctx context.Context, addr, group, topic string) (*kgo.Client, []*kgo.Record) {
	t.Helper()
	var assigned atomic.Bool
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(6*time.Second), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Store(true) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var recs []*kgo.Record
	for !assigned.Load() {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		recs = append(recs, cl.PollFetches(pctx).Records()...)
		cancel()
		if ctx.Err() != nil {
			t.Fatal("member never got an assignment")
		}
	}
	return cl, recs
}

// produceOnePartition writes n one-byte records to one partition in one batch.
func produceOnePartition(t *testing.T, ctx context.Context, addr, topic string, partition int32, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: partition, Value: []byte{byte(i)}}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committedOffsets asks OffsetFetch for partitions 0..n-1 of topic (-1: none).
func committedOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string, n int32) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < n; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("OffsetFetch %s[%d]: %v", group, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// TestGroupDeleteSurvivesSIGKILL (BL-18, SIGKILL variant): G's member
// commits offsets for two partitions and leaves; DeleteGroups succeeds; the
// broker is SIGKILLed right after the answer. After restart G is not
// listed, DescribeGroups says Dead (or GROUP_ID_NOT_FOUND) and OffsetFetch
// answers -1 for both partitions.
func TestGroupDeleteSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startKawa(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, group = "bl18", "G"
	adm := kadm.NewClient(newClient(t, p.Addr))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	m, _ := groupMember(t, ctx, p.Addr, group, topic)
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 3}, 1: {Epoch: -1, Offset: 4}}}
	var commitErr error
	m.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && commitErr == nil {
					commitErr = err
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	m.Close() // all members leave
	if got := committedOffsets(t, ctx, newClient(t, p.Addr), group, topic, 2); got[0] != 3 || got[1] != 4 {
		t.Fatalf("committed %v, want p0=3 p1=4", got)
	}
	resp, err := adm.DeleteGroup(ctx, group)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("DeleteGroups: %v", err)
	}
	p.Kill()

	p2 := startKawa(t, dir)
	cl := newClient(t, p2.Addr)
	listed, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed[group]; ok {
		t.Errorf("ListGroups shows %s after restart", group)
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{group}
	desc, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if d := desc.Groups[0]; !(d.ErrorCode == 0 && d.State == "Dead" || d.ErrorCode == kerr.GroupIDNotFound.Code) {
		t.Errorf("DescribeGroups: state %q code %d, want Dead or GROUP_ID_NOT_FOUND", d.State, d.ErrorCode)
	}
	if got := committedOffsets(t, ctx, cl, group, topic, 2); got[0] != -1 || got[1] != -1 {
		t.Errorf("OffsetFetch after restart: %v, want -1 for both", got)
	}
}

// TestGroupOffsetsSurviveSIGKILL (BL-19): a member processes offsets 0-99
// and commits 100; meanwhile a second group commits 1, 2, 3, ... one at a
// time until the broker is SIGKILLed mid-stream. After restart the first
// group's offset is 100 and a rejoining member resumes there; the second
// group's offset is one some client really committed: the last
// acknowledged one or the one in flight at the kill.
func TestGroupOffsetsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startKawa(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, group = "bl19", "G"
	adm := kadm.NewClient(newClient(t, p.Addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceOnePartition(t, ctx, p.Addr, topic, 0, 100)
	m, processed := groupMember(t, ctx, p.Addr, group, topic)
	for len(processed) < 100 {
		processed = append(processed, m.PollRecords(ctx, 100).Records()...)
		if ctx.Err() != nil {
			t.Fatalf("processed %d of 100", len(processed))
		}
	}
	if err := m.CommitRecords(ctx, processed...); err != nil {
		t.Fatalf("commit 100: %v", err)
	}

	st := startCommitStorm(t, p.Addr, topic)
	st.waitAcked(50)
	p.Kill()
	lastAcked, lastSent := st.stop()

	p2 := startKawa(t, dir)
	cl := newClient(t, p2.Addr)
	if got := committedOffsets(t, ctx, cl, group, topic, 1)[0]; got != 100 {
		t.Errorf("G's offset after SIGKILL: %d, want 100", got)
	}
	got := committedOffsets(t, ctx, cl, "storm", topic, 1)[0]
	if got < lastAcked || got > lastSent {
		t.Errorf("storm offset after SIGKILL: %d, want between the last acknowledged %d and the last sent %d", got, lastAcked, lastSent)
	}
	produceOnePartition(t, ctx, p2.Addr, topic, 0, 1)
	m2, recs := groupMember(t, ctx, p2.Addr, group, topic)
	if len(recs) == 0 {
		recs = m2.PollRecords(ctx, 10).Records()
	}
	if len(recs) == 0 || recs[0].Offset != 100 {
		t.Errorf("rejoined member's first record: %v, want offset 100", recs)
	}
	t.Logf("storm: %d acknowledged, %d sent, %d after restart", lastAcked, lastSent, got)
}

// commitStorm commits offsets 1, 2, 3, ... for group "storm" one request
// at a time, without retries, recording the last sent and acknowledged.
type commitStorm struct {
	mu          sync.Mutex
	cond        *sync.Cond
	acked, sent int64
	cancel      context.CancelFunc
	done        chan struct{}
}

func startCommitStorm(t *testing.T, addr, topic string) *commitStorm {
	// Raw commits name the topic, so stay below OffsetCommit v10 (topic IDs).
	cl := newClient(t, addr, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second), kgo.MaxVersions(kversion.V4_0_0()))
	ctx, cancel := context.WithCancel(context.Background())
	s := &commitStorm{cancel: cancel, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go func() {
		defer close(s.done)
		for off := int64(1); ctx.Err() == nil; off++ {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation = "storm", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, off
			rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
			req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
			s.mu.Lock()
			s.sent = off
			s.mu.Unlock()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				return // the broker died
			}
			s.mu.Lock()
			s.acked = off
			s.cond.Broadcast()
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *commitStorm) waitAcked(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.acked < n {
		s.cond.Wait()
	}
}

// stop waits for the storm to end (the broker is gone) and returns the last
// acknowledged and last sent offsets.
func (s *commitStorm) stop() (acked, sent int64) {
	<-s.done
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked, s.sent
}
