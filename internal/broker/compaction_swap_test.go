package broker_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// offsetsOf maps each record's offset to "key=value".
func offsetsOf(recs []*kgo.Record) map[int64]string {
	m := map[int64]string{}
	for _, r := range recs {
		m[r.Offset] = string(r.Key) + "=" + string(r.Value)
	}
	return m
}

// TestCompactionPowerCutAtSwapSteps: a power cut (crash-clone file system) right after each named step of the
// first segment swap (log.SwapSteps) recovers the topic to exactly the old log before the swap is durable (the
// directory fsync after the rename) and exactly the cleaned one from then on: never a mix, never a loss.
// (SIGKILL of a real process at the same steps: TestCleanerSwapCrashPoints in cmd/kawa; a cut before every
// file-system operation: TestReplaceSegmentCrashAtEveryStep in internal/log.)
func TestCompactionPowerCutAtSwapSteps(t *testing.T) {
	t.Parallel()
	for i, step := range log.SwapSteps {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			mem := vfs.NewMem()
			var cut *vfs.MemFS
			k := kawatest.NewBrokerOn(t, mem, func(c *config.Broker) {
				c.OnSegmentSwap = func(s string) {
					if s == step && cut == nil {
						cut = mem.CrashClone()
					}
				}
			})
			compactedTopic(k, "sw", nil)
			cl := k.Client(kgo.DefaultProduceTopic("sw"), kgo.ProducerBatchCompression(kgo.NoCompression()))
			var recs []*kgo.Record
			for v := range 3 {
				for key := range 100 {
					recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", key), Value: fmt.Appendf(nil, "v%d", v)})
				}
			}
			produceAll(t, cl, recs)
			rollPast(t, cl, "sw", "roll", 20)
			old := offsetsOf(readAll(t, k, "sw"))
			if err := k.B.CleanNow(); err != nil {
				t.Fatal(err)
			}
			cleaned := offsetsOf(readAll(t, k, "sw"))
			if cut == nil || len(cleaned) != 100+20 || len(old) != 300+20 {
				t.Fatalf("swap step %s not reached (%v) or unexpected logs: %d old, %d cleaned records", step, cut != nil, len(old), len(cleaned))
			}
			cfg := k.Config
			cfg.Listen = "127.0.0.1:0"
			k.Close()
			k = kawatest.StartOn(t, cut, cfg)
			want, which := old, "old"
			if i >= slices.Index(log.SwapSteps, "dir-synced") {
				want, which = cleaned, "cleaned"
			}
			if got := offsetsOf(readAll(t, k, "sw")); !maps.Equal(got, want) {
				t.Fatalf("power cut after swap:%s: %d records, want the %s log's %d exactly", step, len(got), which, len(want))
			}
		})
	}
}
