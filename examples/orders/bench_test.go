package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// BenchmarkRelay measures the outbox relay's throughput, idempotent and
// transactional, against a plain idempotent franz-go producer (acks=all)
// writing the same records (keys, values and the headers the relay sends),
// on each backend, as records/s and ratios from one run. Each iteration
// fills the outbox with benchRecords orders (100 per application
// transaction, untimed), times a relay from its start until every row is
// published and deleted, does the same in the other mode, then times the
// plain producer; each variant writes to its own 3-partition topic on an
// in-process broker (fsync always).
//
//	go test -run '^$' -bench Relay -benchtime 3x ./examples/orders
func BenchmarkRelay(b *testing.B) {
	const benchRecords = 10000
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			be := sqltest.New(b, backend)
			br := kawatest.NewBroker(b)
			c := &config{runID: "bench", products: 20, shards: 4}
			if err := prepare(context.Background(), be.DB, be.Dialect, c); err != nil {
				b.Fatal(err)
			}
			ob, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: c.source(), Shards: c.shards})
			if err != nil {
				b.Fatal(err)
			}
			var relayTime [3]time.Duration // idempotent, transactional, plain
			iter := 0
			for b.Loop() {
				for m, mode := range []outbox.Mode{outbox.Idempotent, outbox.Transactional} {
					topic := fmt.Sprintf("bench-%d-%d", iter, m)
					br.CreateTopic(topic, 3, nil)
					fillOutbox(b, be, ob, topic, benchRecords)
					relayTime[m] += timeRelay(b, br, ob, mode, benchRecords)
				}
				topic := fmt.Sprintf("bench-%d-plain", iter)
				br.CreateTopic(topic, 3, nil)
				relayTime[2] += timePlain(b, br, topic, benchRecords)
				iter++
			}
			n := float64(iter * benchRecords)
			idem, txn, plain := n/relayTime[0].Seconds(), n/relayTime[1].Seconds(), n/relayTime[2].Seconds()
			b.ReportMetric(idem, "idempotent-records/s")
			b.ReportMetric(txn, "transactional-records/s")
			b.ReportMetric(plain, "plain-records/s")
			b.ReportMetric(idem/plain, "idempotent/plain")
			b.ReportMetric(txn/plain, "transactional/plain")
		})
	}
}

func benchOrder(i int) (order, []byte) {
	o := order{OrderID: fmt.Sprintf("o-%06d", i), Product: productName(i % 20), Qty: 1}
	v, _ := json.Marshal(o)
	return o, v
}

func fillOutbox(b *testing.B, be sqltest.Backend, ob *outbox.Outbox, topic string, n int) {
	ctx := context.Background()
	for i := 0; i < n; i += 100 {
		tx, err := be.DB.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for j := i; j < min(n, i+100); j++ {
			o, v := benchOrder(j)
			if _, err := ob.Enqueue(ctx, tx, outbox.Record{Topic: topic, Key: []byte(o.Product), Value: v}); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// timeRelay runs a relay until it has published n rows and returns the time
// from its start.
func timeRelay(b *testing.B, br *kawatest.Broker, ob *outbox.Outbox, mode outbox.Mode, n int) time.Duration {
	var published atomic.Int64
	done := make(chan struct{})
	r, err := ob.NewRelay(outbox.RelayConfig{
		Mode:       mode,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(br.Addr)},
		Hooks: outbox.Hooks{Published: func(_, k int) {
			if published.Add(int64(k)) == int64(n) {
				close(done)
			}
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- r.Run(ctx) }()
	select {
	case <-done:
	case err := <-errc:
		b.Fatalf("relay stopped: %v", err)
	case <-time.After(5 * time.Minute):
		b.Fatalf("relay published %d of %d rows in 5m", published.Load(), n)
	}
	took := time.Since(start)
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return took
}

// timePlain produces the same n records with a plain idempotent producer
// (franz-go's defaults: acks=all, idempotent, murmur2 by key) and waits for
// every ack.
func timePlain(b *testing.B, br *kawatest.Broker, topic string, n int) time.Duration {
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var failed atomic.Pointer[error]
	start := time.Now()
	for i := range n {
		o, v := benchOrder(i)
		r := &kgo.Record{Key: []byte(o.Product), Value: v, Headers: []kgo.RecordHeader{
			{Key: dedup.HeaderMessageID, Value: []byte(fmt.Sprintf("0190f3a4-0000-7000-8000-%012d", i))},
			{Key: dedup.HeaderSequence, Value: []byte(fmt.Sprint(i/20 + 1))},
			{Key: dedup.HeaderSource, Value: []byte("orders-bench")},
		}}
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(&err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return time.Since(start)
}
