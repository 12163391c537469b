package outbox_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// BenchmarkRelay measures records/s from a filled outbox into the topic
// (the relay's select, produce, ack wait and delete) against a plain
// idempotent franz-go producer writing the same records. Run with a fixed
// count, e.g. -bench Relay -benchtime 20000x; compare the rec/s metrics.
func BenchmarkRelay(b *testing.B) {
	value := make([]byte, 100)
	b.Run("plain-idempotent-producer", func(b *testing.B) {
		br := kawatest.NewBroker(b)
		br.CreateTopic(testTopic, testPartitions, nil)
		cl := br.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
		ctx := context.Background()
		b.ResetTimer()
		var wg sync.WaitGroup
		var failed atomic.Int64
		wg.Add(b.N)
		for i := range b.N {
			rec := &kgo.Record{Topic: testTopic, Key: []byte("key-" + strconv.Itoa(i%50)), Value: value,
				Headers: []kgo.RecordHeader{{Key: "kawa-message-id", Value: []byte("01a231c9-67cb-73ea-b703-b8425ac8292d")}, {Key: "kawa-seq", Value: []byte(strconv.Itoa(i))}, {Key: "kawa-source", Value: []byte(testSource)}}}
			cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rec/s")
		if failed.Load() > 0 {
			b.Fatalf("%d records failed", failed.Load())
		}
	})
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, mode := range []outbox.Mode{outbox.Idempotent, outbox.Transactional} {
			b.Run(backend+"/"+mode.String(), func(b *testing.B) {
				be := sqltest.New(b, backend)
				br := kawatest.NewBroker(b)
				br.CreateTopic(testTopic, testPartitions, nil)
				ctx := context.Background()
				if err := outbox.Migrate(ctx, be.DB, be.Dialect); err != nil {
					b.Fatal(err)
				}
				ob, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: testSource})
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < b.N; i += 100 {
					tx, err := be.DB.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					for j := i; j < min(i+100, b.N); j++ {
						if _, err := ob.Enqueue(ctx, tx, outbox.Record{Topic: testTopic, Key: []byte("key-" + strconv.Itoa(j%50)), Value: value}); err != nil {
							b.Fatal(err)
						}
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				var sent atomic.Int64
				done := make(chan struct{})
				r, err := ob.NewRelay(outbox.RelayConfig{Mode: mode, ClientOpts: []kgo.Opt{kgo.SeedBrokers(br.Addr)},
					Hooks: outbox.Hooks{Published: func(_, n int) {
						if sent.Add(int64(n)) == int64(b.N) {
							close(done)
						}
					}}})
				if err != nil {
					b.Fatal(err)
				}
				rctx, cancel := context.WithCancel(ctx)
				runDone := make(chan error, 1)
				b.ResetTimer()
				go func() { runDone <- r.Run(rctx) }()
				<-done
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rec/s")
				cancel()
				if err := <-runDone; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
