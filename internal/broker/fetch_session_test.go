package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// sessionFetch sends one Fetch v12 with the given session fields and partitions (partition -> fetch offset).
func sessionFetch(t *testing.T, cl *kgo.Client, topic string, id, epoch int32, parts map[int32]int64, forget ...int32) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 20, 1, 50<<20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p, off := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// respParts lists the partitions in resp, and whether each carried records.
func respParts(resp *kmsg.FetchResponse) map[int32]bool {
	out := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = len(p.RecordBatches) > 0
		}
	}
	return out
}

// TestFetchSessionProtocol (KIP-227) with raw Fetch v12 requests: a full fetch creates a session; an
// incremental fetch is answered with only the partitions that have something new; forgotten partitions leave
// the session; a wrong epoch is INVALID_FETCH_SESSION_EPOCH, an unknown session FETCH_SESSION_ID_NOT_FOUND,
// and epoch -1 closes the session.
func TestFetchSessionProtocol(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic = "fsess"
	k.CreateTopic(topic, 8, nil)
	prod := k.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(p int32) {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(8) {
		produce(p)
	}
	cl := k.Client()
	all := map[int32]int64{}
	for p := range int32(8) {
		all[p] = 0
	}
	full := sessionFetch(t, cl, topic, 0, 0, all)
	if full.ErrorCode != 0 || full.SessionID == 0 || len(respParts(full)) != 8 {
		t.Fatalf("full fetch: error %d, session %d, %d partitions; want a session and all 8", full.ErrorCode, full.SessionID, len(respParts(full)))
	}
	id := full.SessionID
	for p := range all {
		all[p] = 1
	}
	if got := respParts(sessionFetch(t, cl, topic, id, 1, all)); len(got) != 0 {
		t.Fatalf("incremental fetch with nothing new answered %v, want no partitions", got)
	}
	produce(3)
	if got := respParts(sessionFetch(t, cl, topic, id, 2, nil)); len(got) != 1 || !got[3] {
		t.Fatalf("after a record on partition 3 the incremental fetch answered %v, want partition 3 only", got)
	}
	if r := sessionFetch(t, cl, topic, id, 2, nil); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("a replayed epoch: error %d, want INVALID_FETCH_SESSION_EPOCH", r.ErrorCode)
	}
	if r := sessionFetch(t, cl, topic, id+1, 1, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("an unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	// Partition 3 is at offset 2 now; forget 5, then write to both.
	sessionFetch(t, cl, topic, id, 3, map[int32]int64{3: 2}, 5)
	produce(5)
	produce(3)
	if got := respParts(sessionFetch(t, cl, topic, id, 4, nil)); len(got) != 1 || !got[3] {
		t.Fatalf("after forgetting partition 5 the fetch answered %v, want partition 3 only", got)
	}
	if r := sessionFetch(t, cl, topic, id, -1, map[int32]int64{0: 0}); r.SessionID != 0 || len(respParts(r)) != 1 {
		t.Fatalf("final epoch: session %d, %d partitions; want a sessionless full answer", r.SessionID, len(respParts(r)))
	}
	if r := sessionFetch(t, cl, topic, id, 5, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
}

// fetchBytes counts the bytes of Fetch responses a client reads (kgo's broker read hook).
type fetchBytes struct{ n, responses atomic.Int64 }

func (f *fetchBytes) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytesRead int, _, _ time.Duration, err error) {
	if key == kmsg.Fetch.Int16() && err == nil {
		f.n.Add(int64(bytesRead))
		f.responses.Add(1)
	}
}

// consumeCounting starts a consumer of topic from the start that counts what it receives per partition.
func consumeCounting(t *testing.T, k *kawatest.Broker, topic string, hook kgo.Hook, opts ...kgo.Opt) func() int64 {
	t.Helper()
	var got atomic.Int64
	cl := k.Client(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50 * time.Millisecond), kgo.WithHooks(hook)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(*kgo.Record) { got.Add(1) })
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return got.Load
}

// TestFetchSessionsShrinkResponses: franz-go consumers of 32 partitions, one with fetch sessions (its
// default) and one without, both get every record written to one partition, and the session consumer reads
// far fewer Fetch response bytes: its incremental responses carry only the partition that changed.
func TestFetchSessionsShrinkResponses(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic, parts, records = "fsess-many", 32, 20
	k.CreateTopic(topic, parts, nil)
	var withSessions, without fetchBytes
	gotS := consumeCounting(t, k, topic, &withSessions)
	gotF := consumeCounting(t, k, topic, &without, kgo.DisableFetchSessions())
	prod := k.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range records {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		wait.Until(t, 10*time.Second, fmt.Sprintf("both consumers have record %d", i), func() bool {
			return gotS() == int64(i+1) && gotF() == int64(i+1)
		})
	}
	s, f := withSessions.n.Load(), without.n.Load()
	ps, pf := float64(s)/float64(withSessions.responses.Load()), float64(f)/float64(without.responses.Load())
	t.Logf("fetch responses: with sessions %d bytes in %d (%.0f B each), without %d bytes in %d (%.0f B each)",
		s, withSessions.responses.Load(), ps, f, without.responses.Load(), pf)
	if ps*4 > pf {
		t.Fatalf("with sessions %.0f bytes per fetch response, without %.0f: want under a quarter", ps, pf)
	}
	if n, _ := k.B.FetchSessions(); n < 1 {
		t.Fatalf("%d fetch sessions cached with a session consumer running", n)
	}
}

// TestFetchSessionEvictedClientFallsBack: with one session slot, a consumer of more partitions evicts the
// first consumer's session; the first one's next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND, and
// franz-go falls back to full fetches: both keep receiving every record.
func TestFetchSessionEvictedClientFallsBack(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.FetchSessionCacheSlots = 1 })
	k.CreateTopic("fs-small", 2, nil)
	k.CreateTopic("fs-big", 6, nil)
	prod := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	write := func(topic string, p int32) {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var h1, h2 fetchBytes
	small := consumeCounting(t, k, "fs-small", &h1)
	write("fs-small", 0)
	wait.Until(t, 10*time.Second, "the small consumer's first record", func() bool { return small() == 1 })
	if n, _ := k.B.FetchSessions(); n != 1 {
		t.Fatalf("%d sessions cached, want the small consumer's", n)
	}
	big := consumeCounting(t, k, "fs-big", &h2)
	write("fs-big", 5)
	wait.Until(t, 10*time.Second, "the big consumer's first record", func() bool { return big() == 1 })
	if _, ev := k.B.FetchSessions(); ev < 1 {
		t.Fatalf("%d evictions: the larger session did not evict the smaller", ev)
	}
	for i := range 5 {
		write("fs-small", int32(i%2))
		write("fs-big", int32(i%6))
	}
	wait.Until(t, 10*time.Second, "both consumers' records after the eviction", func() bool { return small() == 6 && big() == 6 })
}
