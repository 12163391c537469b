package broker_test

import (
	"context"
	"crypto/tls"
	"os"
	"slices"
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
	const records = 20000
	plain := kawatest.NewBroker(t)
	sec := startSecure(t, server.SASLSSL, tls.NoClientCert)
	login := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	for _, tc := range []struct {
		name string
		b    *kawatest.Broker
		opts []kgo.Opt
	}{
		{"PLAINTEXT", plain, nil},
		{"SASL_SSL/SCRAM-SHA-512", sec.b, []kgo.Opt{sec.tlsOpt(), login}},
	} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.b.Addr), kgo.DefaultProduceTopic("measure"),
			kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks())}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		value := make([]byte, 1024)
		lat := make([]time.Duration, records)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range records {
			wg.Add(1)
			sent := time.Now()
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Error(err)
				}
				lat[i] = time.Since(sent)
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		cancel()
		cl.Close()
		slices.Sort(lat)
		t.Logf("%s: %d x 1 KiB acks=all in %v: %.1f MB/s, %.0f records/s, p50 %v, p99 %v", tc.name, records, elapsed.Round(time.Millisecond),
			float64(records*1024)/elapsed.Seconds()/1e6, float64(records)/elapsed.Seconds(), lat[records/2].Round(time.Microsecond), lat[records*99/100].Round(time.Microsecond))
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
