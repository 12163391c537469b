package broker_test

import (
	"context"
	"crypto/tls"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/server"
)

// TestMeasureSecurityCost (KAWA_SECURITY_MEASURE=1; issue 14 "Measure"):
// produce throughput and p99 of 1 KiB acks=all records over PLAINTEXT and
// SASL_SSL (SCRAM-SHA-512) in the same run, and SCRAM-SHA-512 logins per
// second at 4096 iterations (each a new client: TCP, SaslHandshake, two
// SaslAuthenticate round trips, Metadata).
func TestMeasureSecurityCost(t *testing.T) {
	if os.Getenv("KAWA_SECURITY_MEASURE") == "" {
		t.Skip("set KAWA_SECURITY_MEASURE=1 to measure")
	}
	records := 100000
	if n, err := strconv.Atoi(os.Getenv("KAWA_SECURITY_RECORDS")); err == nil && n > 0 {
		records = n
	}
	const rounds, syncRecords = 3, 2000
	plain := kawatest.NewBroker(t)
	sec := startSecure(t, server.SASLSSL, tls.NoClientCert)
	login := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	type system struct {
		name string
		b    *kawatest.Broker
		opts []kgo.Opt
	}
	systems := []system{{"PLAINTEXT", plain, nil}, {"SASL_SSL/SCRAM-SHA-512", sec.b, []kgo.Opt{sec.tlsOpt(), login}}}
	// Throughput with every record in flight, then latency with one record
	// in flight (the p50/p99 of a full pipeline are kgo's queueing, not the
	// listener's cost); rounds alternate which listener goes first, and the
	// ratios are per round.
	measure := func(sys system) (mbps float64, p50, p99 time.Duration) {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sys.b.Addr), kgo.DefaultProduceTopic("measure"),
			kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks())}, sys.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		value := make([]byte, 1024)
		var wg sync.WaitGroup
		start := time.Now()
		for range records {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		mbps = float64(records*1024) / time.Since(start).Seconds() / 1e6
		lat := make([]time.Duration, syncRecords)
		for i := range lat {
			sent := time.Now()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			lat[i] = time.Since(sent)
		}
		slices.Sort(lat)
		return mbps, lat[syncRecords/2], lat[syncRecords*99/100]
	}
	for r := range rounds {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		var mb [2]float64
		var p99 [2]time.Duration
		for _, i := range order {
			var p50 time.Duration
			mb[i], p50, p99[i] = measure(systems[i])
			t.Logf("round %d %s: %d x 1 KiB acks=all at %.1f MB/s; one in flight: p50 %v, p99 %v", r+1, systems[i].name, records,
				mb[i], p50.Round(time.Microsecond), p99[i].Round(time.Microsecond))
		}
		t.Logf("round %d SASL_SSL over PLAINTEXT: throughput %.2f, p99 %.2f", r+1, mb[1]/mb[0], float64(p99[1])/float64(p99[0]))
	}

	var logins int
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if err := loginErr(t, sec.b, sec.tlsOpt(), login); err != nil {
			t.Fatal(err)
		}
		logins++
	}
	t.Logf("SCRAM-SHA-512 at 4096 iterations over SASL_SSL: %d logins in %v, %.1f logins/s (one client at a time)",
		logins, time.Since(start).Round(time.Millisecond), float64(logins)/time.Since(start).Seconds())
}
