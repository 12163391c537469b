package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/log"
)

// readPartition0 reads topic partition 0 of the broker at addr from offset 0 up to its high watermark and
// returns offset → "key=value" of every record.
func readPartition0(t *testing.T, addr, topic string) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(newClient(t, addr)).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	out := map[int64]string{}
	for next := int64(0); next < end.Offset; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s: %v at %d of %d", topic, err, next, end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Offset] = string(r.Key) + "=" + string(r.Value)
			next = r.Offset + 1
		})
	}
	return out
}

// TestCleanerSwapCrashPoints: a real `kawa serve` SIGKILLs itself (KAWA_CRASH_POINT) right after each named
// step of the cleaner's first segment swap (log.SwapSteps). Restarted without the crash point and with the
// cleaner idle, the topic reads as exactly the old log (every record at its offset) while the swap had not
// reached the rename, and exactly the cleaned one (the latest value per key) from the rename on: never a mix,
// never a loss, no .cleaned file left. Restarted again with the cleaner on, the log ends cleaned.
func TestCleanerSwapCrashPoints(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i, step := range log.SwapSteps {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			fast := write(t, "fast.properties", "log.cleaner.backoff.ms=50\n")
			idle := write(t, "idle.properties", "log.cleaner.backoff.ms=3600000\n")
			dir := t.TempDir()
			p := startKawa(t, dir, "--config", idle)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const topic = "cc"
			cfg := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "internal.segment.bytes": kadm.StringPtr("16384")}
			if _, err := kadm.NewClient(newClient(t, p.Addr)).CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
				t.Fatal(err)
			}
			// 100 keys x 3 versions in the first segment, then 20 KiB of unique keys to close it.
			cl := newClient(t, p.Addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ProducerBatchMaxBytes(4096))
			old := map[int64]string{}
			var recs []*kgo.Record
			for v := range 3 {
				for k := range 100 {
					recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d", v)})
				}
			}
			for r := range 20 {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "roll%d", r), Value: []byte(strings.Repeat("x", 1024))})
			}
			for _, part := range [][]*kgo.Record{recs[:300], recs[300:]} { // the versions in one batch, then small batches
				res := cl.ProduceSync(ctx, part...)
				if err := res.FirstErr(); err != nil {
					t.Fatal(err)
				}
				for _, r := range res {
					old[r.Record.Offset] = string(r.Record.Key) + "=" + string(r.Record.Value)
				}
			}
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			cleaned := map[int64]string{}
			for off, kv := range old {
				if k, v, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "k") || v == "v2" {
					cleaned[off] = kv
				}
			}
			p = startKawaWrapped(t, []string{"env", crashPointEnv + "=swap:" + step}, dir, "--config", fast)
			select {
			case <-p.done:
			case <-ctx.Done():
				t.Fatalf("kawa did not reach crash point swap:%s", step)
			}
			if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("kawa exited with %v, want killed at the crash point", p.cmd.ProcessState)
			}

			p = startKawa(t, dir, "--config", idle)
			got := readPartition0(t, p.Addr, topic)
			want, which := old, "old"
			if i >= slices.Index(log.SwapSteps, "renamed") {
				want, which = cleaned, "cleaned"
			}
			if !maps.Equal(got, want) {
				t.Fatalf("after a crash at swap:%s: %d records, want the %s log's %d exactly", step, len(got), which, len(want))
			}
			leftovers, _ := filepath.Glob(filepath.Join(dir, topic+"-0", "*.cleaned"))
			if len(leftovers) > 0 {
				t.Fatalf("after a crash at swap:%s: %v left", step, leftovers)
			}
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			p = startKawa(t, dir, "--config", fast)
			wait.Until(t, time.Minute, "the restarted cleaner to finish the log", func() bool {
				return maps.Equal(readPartition0(t, p.Addr, topic), cleaned)
			})
		})
	}
}
