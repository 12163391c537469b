package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrashKeepsAcknowledgedRecords: a real kawa process, an acks=all
// producer recording acknowledged offsets, SIGKILL mid-stream, restart on
// the same directory: every acknowledged record is present at its offset
// with its value, nothing corrupt is served, and new writes continue at the
// next offset.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startKawa(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const topic = "crash"
	adm := kadm.NewClient(newClient(t, p.Addr))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, p.Addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(0), kgo.RequestRetries(0), kgo.ProduceRequestTimeout(5*time.Second))

	type ack struct {
		part   int32
		offset int64
		value  string
	}
	var mu sync.Mutex
	var acks []ack
	var count atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("v-%d", i)
			prod.Produce(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				mu.Lock()
				acks = append(acks, ack{r.Partition, r.Offset, string(r.Value)})
				mu.Unlock()
				count.Add(1)
			})
			if i%500 == 499 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	ctxEnd, _ := ctx.Deadline()
	wait.Until(t, time.Until(ctxEnd), "3000 acks before the SIGKILL", func() bool { return count.Load() >= 3000 })
	p.Kill() // SIGKILL mid-stream
	close(stop)
	wg.Wait()
	prod.Close()
	// The active segments were preallocated (the topic config preallocate defaults to true) and the kill left
	// them untrimmed: recovery below must find the true end before the zeros.
	for part := range 2 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s-%d", topic, part), "00000000000000000000.log"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 64<<10 || !bytes.Equal(b[len(b)-64:], make([]byte, 64)) {
			t.Fatalf("partition %d: the segment file (%d bytes) does not end in preallocated zeros", part, len(b))
		}
	}
	mu.Lock()
	got := append([]ack(nil), acks...)
	mu.Unlock()

	p2 := startKawa(t, dir)
	cons := newClient(t, p2.Addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	adm2 := kadm.NewClient(newClient(t, p2.Addr))
	ends, err := adm2.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int32]map[int64]string{}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	for seen := int64(0); seen < total; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records after restart", seen, total)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if stored[r.Partition] == nil {
				stored[r.Partition] = map[int64]string{}
			}
			stored[r.Partition][r.Offset] = string(r.Value)
		})
	}
	for _, a := range got {
		if v, ok := stored[a.part][a.offset]; !ok || v != a.value {
			t.Fatalf("acknowledged record %q at partition %d offset %d: after restart got %q (present=%v)", a.value, a.part, a.offset, v, ok)
		}
	}
	t.Logf("%d acknowledged records before SIGKILL, %d records in the log after restart", len(got), total)

	// New writes continue at the next offset.
	w := newClient(t, p2.Addr, kgo.DefaultProduceTopic(topic))
	for part := int32(0); part < 2; part++ {
		r := w.ProduceSync(ctx, &kgo.Record{Value: []byte("after"), Partition: part})
		if err := r.FirstErr(); err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup(topic, part)
		if off := r[0].Record.Offset; off != end.Offset {
			t.Fatalf("partition %d: new write at offset %d, want %d (the end after recovery)", part, off, end.Offset)
		}
	}
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
