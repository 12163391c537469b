package broker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// The Kafka 3.9-4.2 compaction outcomes (../shared/design-research.md section 3.3: deleted data comes back,
// aborted data served as committed, committed data hidden, partition frozen at a stale LSO) as rows on one
// broker: markers and tombstones are removed after their data and delete horizon, and a read_committed read from
// offset 0 after repeated cleaning, power cuts and a full replay (no producer snapshot) yields exactly the
// committed latest values with the LSO at the high watermark.

// cleanPasses runs n cleaning rounds.
func cleanPasses(t *testing.T, k *kawatest.Broker, n int) {
	t.Helper()
	for range n {
		if err := k.B.CleanNow(); err != nil {
			t.Fatal(err)
		}
	}
}

// markerState reads topic partition 0 read_uncommitted with control records, up to end, and returns the
// markers' offsets and the data records.
func markerState(t *testing.T, k *kawatest.Broker, topic string, end int64) (markers []int64, data []*kgo.Record) {
	t.Helper()
	for _, r := range consume(t, k, topic, false, end-1) {
		if r.Attrs.IsControl() {
			markers = append(markers, r.Offset)
		} else {
			data = append(data, r)
		}
	}
	return markers, data
}

// checkCommitted asserts that read_committed from offset 0 yields exactly want (keys with prefix "k", latest
// values) and that the LSO is the high watermark end.
func checkCommitted(t *testing.T, k *kawatest.Broker, topic string, end int64, want map[string]string, stage string) {
	t.Helper()
	checkCommittedLSO(t, k, topic, end, end, want, stage)
}

// checkCommittedLSO is checkCommitted for a partition whose LSO is lso (a transaction open from there).
func checkCommittedLSO(t *testing.T, k *kawatest.Broker, topic string, end, lso int64, want map[string]string, stage string) {
	t.Helper()
	got := readTxn(t, k, topic, true, end)
	seen := map[string]int{}
	for _, r := range got {
		if strings.HasPrefix(string(r.Key), "k") {
			seen[string(r.Key)]++
			if v := string(r.Value); strings.HasPrefix(v, "ab-") {
				t.Fatalf("%s: aborted record %s=%s at %d served to read_committed", stage, r.Key, v, r.Offset)
			}
		}
	}
	m := latest(got)
	for key, val := range want {
		if string(m[key]) != val {
			t.Fatalf("%s: read_committed %s = %q, want %q", stage, key, m[key], val)
		}
	}
	for key, val := range m {
		if strings.HasPrefix(key, "k") && want[key] != string(val) {
			t.Fatalf("%s: read_committed %s = %q, want it absent or %q", stage, key, val, want[key])
		}
	}
	if got := listOffset(t, k, topic, true); got != lso {
		t.Fatalf("%s: LSO %d, want %d (high watermark %d): a transaction is pinned", stage, got, lso, end)
	}
}

// fullReplay closes k, removes topic partition 0's producer snapshots (so the restart rebuilds producer state and
// the aborted-transaction index from the cleaned log alone) and starts a broker on the same files.
func fullReplay(t *testing.T, k *kawatest.Broker, topic string) *kawatest.Broker {
	t.Helper()
	k.Close()
	dir := filepath.Join(k.Config.DataDir, topic+"-0")
	ents, err := k.FS.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".snapshot") {
			if err := k.FS.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no producer snapshot in %s", dir)
	}
	cfg := k.Config
	cfg.Listen = "127.0.0.1:0"
	return kawatest.StartOn(t, k.FS, cfg)
}

// memCompacted starts a broker on a crash-clone file system with the compacted topic name and returns it with a
// plain producer to that topic.
func memCompacted(t *testing.T, name string) (*kawatest.Broker, *kgo.Client) {
	k := kawatest.NewBrokerOn(t, vfs.NewMem())
	compactedTopic(k, name, nil)
	return k, k.Client(kgo.DefaultProduceTopic(name))
}

// TestCompactionRemovesMarkers: producer a aborts a transaction (k0-k49), commits one whose values (k0-k19)
// plain writes then supersede, and commits a third (k20-k29). The first pass removes the aborted and the
// superseded data but keeps both markers (their data was still in the log when the pass began); the second
// stamps them with a delete horizon (delete.retention.ms=0); the third removes them, and the last COMMIT marker
// (a's last batch) stays. The ABORT marker's aborted-transaction entry goes with it: a's later transaction is
// served to read_committed (a stale entry would hide every later batch of a: committed data hidden), no aborted
// value ever is, and the LSO ends at the high watermark, after a power cut and after a full replay too.
func TestCompactionRemovesMarkers(t *testing.T) {
	t.Parallel()
	k, plain := memCompacted(t, "mk")
	a := k.Client(kgo.TransactionalID("a"))
	want := map[string]string{}
	end := int64(0)
	txnProduce(t, a, "mk", "ab", 0, 50, false, true)
	txnProduce(t, a, "mk", "c1", 0, 20, true, true)
	txnProduce(t, a, "mk", "c2", 20, 30, true, true)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "p-%d", i)})
		want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("p-%d", i)
	}
	for i := 20; i < 30; i++ {
		want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("c2-%d", i)
	}
	produceAll(t, plain, recs)
	rollPast(t, plain, "mk", "r1", 20)
	end += 50 + 1 + 20 + 1 + 10 + 1 + 20 + 20
	abortAt, c1At, c2At := int64(50), int64(71), int64(82)

	if m, _ := markerState(t, k, "mk", end); fmt.Sprint(m) != fmt.Sprint([]int64{abortAt, c1At, c2At}) {
		t.Fatalf("markers before cleaning at %v, want %v", m, []int64{abortAt, c1At, c2At})
	}
	checkCommitted(t, k, "mk", end, want, "before cleaning")
	for pass, wantMarkers := range [][]int64{{abortAt, c1At, c2At}, {abortAt, c1At, c2At}, {c2At}} {
		cleanPasses(t, k, 1)
		m, data := markerState(t, k, "mk", end)
		if fmt.Sprint(m) != fmt.Sprint(wantMarkers) {
			t.Fatalf("after pass %d: markers at %v, want %v", pass+1, m, wantMarkers)
		}
		if len(data) != len(want)+20 {
			t.Fatalf("after pass %d: %d data records, want %d", pass+1, len(data), len(want)+20)
		}
		checkCommitted(t, k, "mk", end, want, fmt.Sprintf("after pass %d", pass+1))
	}
	if st := k.B.CleanerStats(); st.MarkersRemoved != 2 {
		t.Fatalf("cleaner stats %+v: want 2 markers removed", st)
	}
	// a's next transaction comes after the removed ABORT marker.
	txnProduce(t, a, "mk", "c3", 30, 40, true, true)
	for i := 30; i < 40; i++ {
		want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("c3-%d", i)
	}
	end += 10 + 1
	checkCommitted(t, k, "mk", end, want, "a's transaction after the removed ABORT marker")
	cleanPasses(t, k, 2)
	checkCommitted(t, k, "mk", end, want, "cleaned again")
	k = k.PowerCut()
	checkCommitted(t, k, "mk", end, want, "after a power cut")
	k = fullReplay(t, k, "mk")
	checkCommitted(t, k, "mk", end, want, "after a full replay")
}

// TestCompactionMarkerAfterSnapshot: a producer snapshot is taken (by DeleteRecords) while producer b's
// transaction is open; the transaction commits, its values are superseded and its COMMIT marker is cleaned away
// while b's next transaction is open. A power cut must not bring the first transaction back as open from that
// snapshot (the replay would join it to the next one and freeze the LSO at its first offset, hiding the plain
// writes between them from read_committed): the cleaner has the partition snapshot again before it removes a
// marker.
func TestCompactionMarkerAfterSnapshot(t *testing.T) {
	t.Parallel()
	k, plain := memCompacted(t, "ms")
	b := k.Client(kgo.TransactionalID("b"))
	produceAll(t, plain, []*kgo.Record{{Key: []byte("pre"), Value: []byte("x")}, {Key: []byte("pre"), Value: []byte("y")}})
	txnProduce(t, b, "ms", "first", 0, 10, true, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := k.Admin().DeleteRecords(ctx, kadm.Offsets{"ms": {0: {Topic: "ms", Partition: 0, At: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "p-%d", i)})
		want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("p-%d", i)
	}
	produceAll(t, plain, recs)
	rollPast(t, plain, "ms", "r1", 20)
	lso := int64(2 + 10 + 1 + 10 + 20)
	txnProduce(t, b, "ms", "next", 50, 55, true, false) // open from lso on
	end := lso + 5
	checkCommittedLSO(t, k, "ms", end, lso, want, "before cleaning")
	cleanPasses(t, k, 3)
	if st := k.B.CleanerStats(); st.MarkersRemoved != 1 {
		t.Fatalf("cleaner stats %+v: want the first transaction's marker removed", st)
	}
	checkCommittedLSO(t, k, "ms", end, lso, want, "after cleaning")
	k = k.PowerCut()
	checkCommittedLSO(t, k, "ms", end, lso, want, "after a power cut")
}

// TestCompactionTombstoneNeverResurrects: a key written in a committed transaction and by a plain write, then
// deleted by a tombstone in a later transaction; after the tombstone's delete horizon (0) and repeated passes
// the key is gone from every reader and stays gone across a power cut and a full replay, and exactly the live
// records remain.
func TestCompactionTombstoneNeverResurrects(t *testing.T) {
	t.Parallel()
	k, plain := memCompacted(t, "tb")
	a := k.Client(kgo.TransactionalID("a"))
	txnProduce(t, a, "tb", "c1", 0, 20, true, true)
	produceAll(t, plain, []*kgo.Record{{Key: []byte("k5"), Value: []byte("p-5")}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var tomb []*kgo.Record
	for _, i := range []int{3, 5, 7} {
		tomb = append(tomb, &kgo.Record{Topic: "tb", Key: fmt.Appendf(nil, "k%d", i)})
	}
	produceAll(t, a, tomb)
	if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, a, "tb", "c2", 30, 32, true, true)
	rollPast(t, plain, "tb", "r1", 20)
	end := int64(20 + 1 + 1 + 3 + 1 + 2 + 1 + 20)
	// EndTransaction returns once the commit is decided; the markers follow
	// (as in Kafka). Until c2's marker is in, the last stable offset sits in
	// the first segment and the cleaner may not touch it.
	wait.Until(t, time.Minute, "the last stable offset at the log end", func() bool {
		return listOffset(t, k, "tb", true) == end
	})
	want := map[string]string{}
	for i := range 20 {
		if i != 3 && i != 5 && i != 7 {
			want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("c1-%d", i)
		}
	}
	want["k30"], want["k31"] = "c2-30", "c2-31"
	check := func(stage string) {
		t.Helper()
		checkCommitted(t, k, "tb", end, want, stage)
		_, data := markerState(t, k, "tb", end)
		if len(data) != len(want)+20 {
			t.Fatalf("%s: %d data records, want %d (tombstones and deleted keys gone)", stage, len(data), len(want)+20)
		}
	}
	cleanPasses(t, k, 4)
	check("after cleaning")
	k = k.PowerCut()
	check("after a power cut")
	cleanPasses(t, k, 2)
	k = fullReplay(t, k, "tb")
	check("after a full replay")
}
