package broker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// produceKeyed produces n records to topic with keys k<i mod keys> and values "<prefix>-<i>", in large batches.
func produceKeyed(t *testing.T, cl *kgo.Client, topic, prefix string, n, keys int) {
	t.Helper()
	const chunk = 20000
	for from := 0; from < n; from += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for i := from; i < min(from+chunk, n); i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%06d", i%keys), Value: fmt.Appendf(nil, "%s-%07d", prefix, i)})
		}
		produceAll(t, cl, recs)
	}
}

// TestCompactionScale is the acceptance size: 100k keys x 10 versions (1M records, 1 MiB segments).
// After cleaning every key appears once with its 10th version, also after a restart. It measures (t.Log) the
// cleaner's throughput and the produce throughput of another topic with and without a concurrent cleaning
// pass, in the same run.
func TestCompactionScale(t *testing.T) {
	if testing.Short() {
		t.Skip("1M records")
	}
	k := kawatest.NewBroker(t)
	compactedTopic(k, "big", map[string]*string{"internal.segment.bytes": ptr("1048576")})
	k.CreateTopic("p1", 1, nil)
	k.CreateTopic("p2", 1, nil)
	cl := k.Client(kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const keys, versions = 100_000, 10
	start := time.Now()
	produceKeyed(t, cl, "big", "v", keys*versions, keys)
	rollPast(t, cl, "big", "roll", 1100) // > 1 MiB: every versioned record is in a closed segment
	t.Logf("produced %d records to big in %v", keys*versions, time.Since(start))

	const probe = 300_000
	start = time.Now()
	produceKeyed(t, cl, "p1", "x", probe, probe)
	idle := time.Since(start)

	var wg sync.WaitGroup
	var cleanErr error
	var cleanTook time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := time.Now()
		cleanErr = k.B.CleanNow()
		cleanTook = time.Since(s)
	}()
	start = time.Now()
	produceKeyed(t, cl, "p2", "x", probe, probe)
	busy := time.Since(start)
	wg.Wait()
	if cleanErr != nil {
		t.Fatal(cleanErr)
	}
	st := k.B.CleanerStats()
	t.Logf("cleaner: %d bytes -> %d bytes, %d records removed in %v (%.1f MB/s read)", st.BytesRead, st.BytesWritten,
		st.RecordsRemoved, cleanTook, float64(st.BytesRead)/1e6/cleanTook.Seconds())
	t.Logf("produce of %d records: %v idle, %v during cleaning (throughput ratio %.2f)", probe, idle, busy, idle.Seconds()/busy.Seconds())
	if st.RecordsRemoved != keys*(versions-1) {
		t.Fatalf("removed %d records, want %d", st.RecordsRemoved, keys*(versions-1))
	}
	check := func(stage string) {
		got := readAll(t, k, "big")
		if len(got) != keys+1100 {
			t.Fatalf("%s: %d records, want %d", stage, len(got), keys+1100)
		}
		seen := make(map[string]bool, keys)
		for _, r := range got[:keys] {
			if seen[string(r.Key)] {
				t.Fatalf("%s: key %s twice", stage, r.Key)
			}
			seen[string(r.Key)] = true
			var i int
			fmt.Sscanf(string(r.Key), "k%d", &i)
			if want := fmt.Sprintf("v-%07d", (versions-1)*keys+i); string(r.Value) != want {
				t.Fatalf("%s: %s = %s, want %s", stage, r.Key, r.Value, want)
			}
		}
	}
	check("after cleaning")
	start = time.Now()
	k = k.Restart()
	t.Logf("restart took %v", time.Since(start))
	check("after restart")
}
