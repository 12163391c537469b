package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// newProxy starts a proxy in front of k, closed at cleanup.
func newProxy(t *testing.T, k *kawatest.Broker) *proxy.Proxy {
	t.Helper()
	px, err := proxy.New(k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px
}

// loseProduceAcks makes the proxy apply lose[i] to the i-th Produce
// response (counted from 1 in arrival order) and forward the others. It
// returns the count of Produce responses seen.
func loseProduceAcks(px *proxy.Proxy, lose map[int64]proxy.Action) *atomic.Int64 {
	var n atomic.Int64
	px.OnResponse(func(f proxy.Frame) proxy.Action {
		if f.Key != 0 {
			return proxy.Action{}
		}
		return lose[n.Add(1)]
	})
	return &n
}

// lost maps responses [from, to] to a: Drop alone swallows the answer (the
// client times out or sees the next correlation ID), Drop with Cut also
// resets the connection.
func lost(m map[int64]proxy.Action, from, to int64, a proxy.Action) map[int64]proxy.Action {
	if m == nil {
		m = map[int64]proxy.Action{}
	}
	for i := from; i <= to; i++ {
		m[i] = a
	}
	return m
}

// TestBL01ResendAfterCut is BL-01: five batches in flight (seq 0-49) are all
// appended, the connection is cut before any answer reaches the client, and
// the client resends all five on a new connection: each is answered with
// its original base offset, and the log holds offsets 0-49 once.
func TestBL01ResendAfterCut(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("bl01", 1, nil)
	px := newProxy(t, k)
	appended := make(chan struct{})
	var n atomic.Int32
	px.OnResponse(func(f proxy.Frame) proxy.Action {
		if f.Key != 0 {
			return proxy.Action{}
		}
		if n.Add(1) == 5 {
			close(appended) // the broker has answered all five: all are in the log
		}
		return proxy.Action{Drop: true}
	})
	p := initProducer(t, k.Addr)
	var batches [][]byte
	for i := range 5 {
		batches = append(batches, p.batch(int32(10*i), seqValues("v", 10*i, 10)...))
	}
	c := dial(t, px.Addr())
	for _, b := range batches {
		c.sendProduce("bl01", 0, b)
	}
	select {
	case <-appended:
	case <-time.After(10 * time.Second):
		t.Fatalf("broker answered %d of 5 produce requests", n.Load())
	}
	px.CutAll()
	if !c.closed() {
		t.Fatal("connection survived the cut")
	}

	px.OnResponse(nil)
	c = dial(t, px.Addr())
	var corrs []int32
	for _, b := range batches {
		corrs = append(corrs, c.sendProduce("bl01", 0, b))
	}
	for i, corr := range corrs {
		got, err := c.readProduce()
		if err != nil {
			t.Fatal(err)
		}
		if got.corr != corr || got.code != 0 || got.base != int64(10*i) {
			t.Fatalf("resend %d: correlation %d %v, want correlation %d success at %d", i, got.corr, got, corr, 10*i)
		}
	}
	wantPartitionLog(t, k.Addr, "bl01", 0, 0, seqValues("v", 0, 50))
}

// TestLostAcksFranzGo: franz-go (idempotent by default) produces to three
// partitions while the proxy drops ten Produce responses; franz-go retries
// (a dropped answer shows up as a correlation-ID mismatch or a timeout) and
// every record is in the log exactly once, in order, at the offset its
// promise reported.
func TestLostAcksFranzGo(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic, parts, n = "lostack-kgo", 3, 3000
	k.CreateTopic(topic, parts, nil)
	px := newProxy(t, k)
	seen := loseProduceAcks(px, lost(nil, 6, 15, proxy.Action{Drop: true}))
	cl := k.Client(kgo.SeedBrokers(px.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1024), kgo.ProduceRequestTimeout(500*time.Millisecond), kgo.RequestTimeoutOverhead(250*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked := make([]int64, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		wg.Add(1)
		r := &kgo.Record{Partition: int32(i % parts), Value: []byte(fmt.Sprintf("v-%d", i))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			acked[i] = r.Offset
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce failed: %v", firstErr)
	}
	if seen.Load() <= 15 {
		t.Fatalf("only %d produce responses crossed the proxy; the test needs more than 15", seen.Load())
	}
	checkExactlyOnce(t, k.Addr, topic, parts, n, acked)
}

// checkExactlyOnce requires partition p of topic to hold "v-i" for every
// i ≡ p (mod parts), i < n, in increasing i, each once from offset 0; acked,
// when non-nil, is the offset each record's acknowledgement reported.
func checkExactlyOnce(t *testing.T, addr, topic string, parts, n int, acked []int64) {
	t.Helper()
	for p := range parts {
		var want []string
		for i := p; i < n; i += parts {
			want = append(want, fmt.Sprintf("v-%d", i))
			if acked != nil && acked[i] != int64(len(want)-1) {
				t.Fatalf("record v-%d acknowledged at offset %d, stored at %d", i, acked[i], len(want)-1)
			}
		}
		wantPartitionLog(t, addr, topic, int32(p), 0, want)
	}
}
