package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProxyDropsAndDelays drives the fault proxy with a real client: a
// dropped Produce response fails a producer that may not retry, and the
// slow fault holds write responses back.
func TestProxyDropsAndDelays(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nf, err := NewProxy(c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	cl, err := kgo.NewClient(append(producerOpts(AtMostOnce), kgo.SeedBrokers(nf.Addr()), kgo.DefaultProduceTopic("t"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("warm")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	nf.DropResponse(0)
	if err := cl.ProduceSync(ctx, kgo.StringRecord("lost ack")).FirstErr(); err == nil {
		t.Error("produce with a dropped response succeeded")
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Errorf("produce after the drop: %v", err)
	}

	nf.SetDelay(300 * time.Millisecond)
	began := time.Now()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("slow")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("slow produce took %v", took)
	}
	nf.SetDelay(0)

	// The record whose acknowledgement was lost is in the log all the same.
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()[0]), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(got) < 4 && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if want := "warm,lost ack,after,slow"; strings.Join(got, ",") != want {
		t.Errorf("log %q, want %q", strings.Join(got, ","), want)
	}
}
