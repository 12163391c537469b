package main

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGracefulShutdown: SIGTERM makes kawa finish in-flight work, flush and
// exit 0; after a restart every acknowledged record is there.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startKawa(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, p.Addr, kgo.DefaultProduceTopic("grace"), kgo.AllowAutoTopicCreation())
	var recs []*kgo.Record
	for i := 0; i < 1000; i++ {
		recs = append(recs, &kgo.Record{Value: []byte{byte(i), byte(i >> 8)}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	p2 := startKawa(t, dir)
	c2 := newClient(t, p2.Addr, kgo.ConsumeTopics("grace"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 1000 {
		fs := c2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 1000 after restart", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) || r.Value[0] != byte(got) || r.Value[1] != byte(got>>8) {
				t.Fatalf("record %d: offset %d value %v", got, r.Offset, r.Value)
			}
			got++
		})
	}
}
