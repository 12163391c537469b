package broker_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestLogStatsCountFsyncs: with fsync=always each acknowledged acks=all
// produce of a lone sequential producer is made durable by its own fsync, so
// the broker's sum (what kawa_log_fsyncs and kawa_log_fsynced_bytes export)
// counts at least one fsync and the record's bytes per produce; with
// fsync=never producing adds no fsync.
func TestLogStatsCountFsyncs(t *testing.T) {
	t.Parallel()
	const n, size = 10, 1000
	for _, tc := range []struct {
		fsync config.Fsync
		want  bool
	}{{config.FsyncAlways, true}, {config.FsyncNever, false}} {
		k := kawatest.NewBroker(t, func(c *config.Broker) { c.Fsync = tc.fsync })
		if _, err := k.Admin().CreateTopic(context.Background(), 1, 1, nil, "stats"); err != nil {
			t.Fatal(err)
		}
		cl := k.Client(kgo.DefaultProduceTopic("stats"), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression())) // zeros would compress to nothing
		before := k.B.LogStats()
		for range n {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: make([]byte, size)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		after := k.B.LogStats()
		fsyncs, bytes := after.Fsyncs-before.Fsyncs, after.FsyncedSize-before.FsyncedSize
		if tc.want && (fsyncs < n || bytes < n*size) {
			t.Errorf("fsync=%v: %d fsyncs of %d bytes for %d produces of %d B, want >= %d and >= %d", tc.fsync, fsyncs, bytes, n, size, n, n*size)
		}
		if !tc.want && (fsyncs != 0 || bytes != 0) {
			t.Errorf("fsync=%v: %d fsyncs of %d bytes, want none", tc.fsync, fsyncs, bytes)
		}
		cl.Close()
	}
}
