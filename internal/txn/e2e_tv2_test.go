package txn_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// keyCounter counts the requests through a proxy by key and version.
type keyCounter struct {
	mu sync.Mutex
	n  map[int16]map[int16]int
}

func (c *keyCounter) rule(f proxy.Frame) proxy.Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[f.Key] == nil {
		c.n[f.Key] = map[int16]int{}
	}
	c.n[f.Key][f.Version]++
	return proxy.Action{}
}

// count returns the number of requests of key and the versions they used.
func (c *keyCounter) count(key kmsg.Key) (n int, versions []int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for v, m := range c.n[int16(key)] {
		n += m
		versions = append(versions, v)
	}
	slices.Sort(versions)
	return n, versions
}

// franz-go reads transaction.version=2 from ApiVersions (KIP-584) and runs
// its transactions under KIP-890 part 2: Produce v12 and TxnOffsetCommit v5
// enrol the partitions and the group without AddPartitionsToTxn or
// AddOffsetsToTxn, and every EndTxn (v5) bumps the producer epoch.
func TestFranzGoNegotiatesTV2(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	in, out, group := name("in"), name("out"), name("g")
	k.CreateTopic(in, 2, nil)
	k.CreateTopic(out, 2, nil)
	px, err := proxy.New(k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	kc := &keyCounter{n: map[int16]map[int16]int{}}
	px.OnRequest(kc.rule)

	w := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxT(t)
	for i := range 4 {
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: in, Partition: int32(i % 2), Value: []byte{'0' + byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txnID := name("tx")
	r := newRaw(t, k, nil)
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(px.Addr()), kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(out),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)

	var got []*kgo.Record
	for len(got) < 4 {
		fs := s.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	var epochs []int16
	for i := range 3 {
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			s.Produce(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "t%d-%d", i, p)}, nil)
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("transaction %d: End = %v, %v", i, committed, err)
		}
		d := r.waitState(txnID, "CompleteCommit")
		epochs = append(epochs, d.ProducerEpoch)
	}
	// Each TV2 end bumps the epoch once; the described epoch is the bumped
	// one the markers carried.
	if epochs[1] != epochs[0]+1 || epochs[2] != epochs[1]+1 {
		t.Fatalf("producer epochs after each commit: %v, want consecutive", epochs)
	}
	for key, want := range map[kmsg.Key]int{kmsg.AddPartitionsToTxn: 0, kmsg.AddOffsetsToTxn: 0} {
		if n, vs := kc.count(key); n != want {
			t.Fatalf("%s: %d requests %v, want %d", kmsg.NameForKey(int16(key)), n, vs, want)
		}
	}
	for key, want := range map[kmsg.Key]int16{kmsg.Produce: 12, kmsg.EndTxn: 5, kmsg.TxnOffsetCommit: 5} {
		if n, vs := kc.count(key); n == 0 || !slices.Equal(vs, []int16{want}) {
			t.Fatalf("%s: %d requests at versions %v, want only v%d", kmsg.NameForKey(int16(key)), n, vs, want)
		}
	}
	for p := int32(0); p < 2; p++ {
		if o := committedOffset(t, k, group, in, p); o != 2 {
			t.Fatalf("committed offset of %s-%d = %d, want 2", in, p, o)
		}
	}
	waitVisible(t, k, out, []string{"t0-0", "t0-1", "t1-0", "t1-1", "t2-0", "t2-1"})
}
