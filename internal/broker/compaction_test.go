package broker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// compactedTopic creates a one-partition compacted topic with small segments and tombstones removed by the
// second pass after their first (delete.retention.ms=0).
func compactedTopic(k *kawatest.Broker, name string, extra map[string]*string) {
	cfg := map[string]*string{
		"cleanup.policy": ptr("compact"), "internal.segment.bytes": ptr("16384"), "delete.retention.ms": ptr("0"),
	}
	for n, v := range extra {
		cfg[n] = v
	}
	k.CreateTopic(name, 1, cfg)
}

// produceAll produces recs synchronously and fails the test on any error.
func produceAll(t *testing.T, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// rollPast produces n 1 KiB records (printable) under fresh keys, so every record before them lies in closed segments
// (16 KiB segments): the cleaner never touches the active segment.
func rollPast(t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		raw := make([]byte, 512)
		rand.Read(raw)
		v := hex.AppendEncode(nil, raw) // printable, and no LZ codec (the clients' default snappy) shrinks it
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: v})
	}
	produceAll(t, cl, recs)
}

// listOffset returns topic partition 0's high watermark, or with committed its last stable offset (ListOffsets
// with isolation level READ_COMMITTED, KIP-98).
func listOffset(t *testing.T, k *kawatest.Broker, topic string, committed bool) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := k.Admin()
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	offs, err := list(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := offs.Lookup(topic, 0)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	return o.Offset
}

// consume reads topic partition 0 from offset 0 with the given isolation level, control records (transaction
// markers) kept, until it has returned offset last, and returns every record at or below last in order. last must
// be an offset the log holds that the isolation level shows: a data record or a marker, not aborted data under
// read_committed; -1 reads nothing.
func consume(t *testing.T, k *kawatest.Broker, topic string, committed bool, last int64) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := k.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())
	defer cl.Close()
	var out []*kgo.Record
	for next := int64(0); next <= last; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s: %v (at %d, up to %d)", topic, err, next, last)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				out = append(out, r)
			}
			next = r.Offset + 1
		})
	}
	return out
}

// dataOnly drops the control records (transaction markers) of recs.
func dataOnly(recs []*kgo.Record) []*kgo.Record {
	out := recs[:0]
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			out = append(out, r)
		}
	}
	return out
}

// readAll consumes topic partition 0 from offset 0 read_uncommitted up to the high watermark and returns its data
// records in order. It is for topics without transactions, whose high watermark is final once ProduceSync returns
// and whose last offset is a data record; readTxn is for the others.
func readAll(t *testing.T, k *kawatest.Broker, topic string) []*kgo.Record {
	t.Helper()
	return dataOnly(consume(t, k, topic, false, listOffset(t, k, topic, false)-1))
}

// readTxn is readAll for a topic with transactions: end is the high watermark the test's writes make (records
// plus one marker per ended transaction). EndTxn returns before the coordinator has written the markers (KIP-98,
// as in Kafka), so readTxn first waits for the high watermark to reach end: only then are the markers in the log
// and the LSO final. read_uncommitted then reads up to the high watermark; read_committed reads up to the LSO,
// that is up to the last offset below it that the log holds (never aborted data: its abort marker follows it
// below the LSO, and markers are returned). Data records are returned in order.
func readTxn(t *testing.T, k *kawatest.Broker, topic string, committed bool, end int64) []*kgo.Record {
	t.Helper()
	wait.Until(t, time.Minute, fmt.Sprintf("%s's high watermark to reach %d (transaction markers written)", topic, end), func() bool {
		hw := listOffset(t, k, topic, false)
		if hw > end {
			t.Fatalf("%s: high watermark %d past the %d offsets written", topic, hw, end)
		}
		return hw == end
	})
	all := consume(t, k, topic, false, end-1)
	if !committed {
		return dataOnly(all)
	}
	lso, last := listOffset(t, k, topic, true), int64(-1)
	for _, r := range all {
		if r.Offset < lso {
			last = r.Offset
		}
	}
	return dataOnly(consume(t, k, topic, true, last))
}

// latest returns the last value per key of recs (nil value = tombstone, kept as a nil entry).
func latest(recs []*kgo.Record) map[string][]byte {
	m := map[string][]byte{}
	for _, r := range recs {
		m[string(r.Key)] = r.Value
	}
	return m
}

// TestCompactionLatestPerKey: 2,000 keys x 5 versions, then tombstones for every tenth key. After a cleaning
// round every key appears exactly once with its latest value (tombstones included, stamped with their delete
// horizon); after a second round (delete.retention.ms=0) the tombstoned keys are gone; a restart changes
// nothing, and the exact record count is what remains.
func TestCompactionLatestPerKey(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	compactedTopic(k, "c", nil)
	cl := k.Client(kgo.DefaultProduceTopic("c"))
	const keys, versions = 2000, 5
	var recs []*kgo.Record
	want := map[string]string{}
	for v := range versions {
		for i := range keys {
			key, val := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d-%d", i, v)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(val)})
			want[key] = val
		}
	}
	produceAll(t, cl, recs)
	recs = recs[:0]
	for i := 0; i < keys; i += 10 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i)}) // tombstone
	}
	produceAll(t, cl, recs)
	rollPast(t, cl, "c", "roll", 40)
	before := len(readAll(t, k, "c"))
	if before != keys*versions+keys/10+40 {
		t.Fatalf("before cleaning: %d records", before)
	}

	check := func(stage string, wantTombstones bool) {
		t.Helper()
		got := readAll(t, k, "c")
		seen := map[string]int{}
		for _, r := range got {
			seen[string(r.Key)]++
		}
		live, tombs := 0, 0
		for i := range keys {
			key := fmt.Sprintf("k%d", i)
			n := seen[key]
			switch {
			case i%10 == 0 && wantTombstones && n != 1, i%10 == 0 && !wantTombstones && n != 0, i%10 != 0 && n != 1:
				t.Fatalf("%s: key %s appears %d times", stage, key, n)
			}
			if i%10 == 0 {
				tombs += n
			} else {
				live += n
			}
		}
		m := latest(got)
		for key, val := range want {
			var k int
			fmt.Sscanf(key, "k%d", &k)
			if k%10 == 0 {
				if v, ok := m[key]; ok && v != nil {
					t.Fatalf("%s: tombstoned key %s has value %q", stage, key, v)
				}
				continue
			}
			if string(m[key]) != val {
				t.Fatalf("%s: key %s = %q, want %q", stage, key, m[key], val)
			}
		}
		if n := len(got); n != live+tombs+40 {
			t.Fatalf("%s: %d records, want %d live + %d tombstones + 40", stage, n, live, tombs)
		}
	}
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	check("after the first pass", true)
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	check("after the second pass", false)
	st := k.B.CleanerStats()
	if st.RecordsRemoved != int64(keys*versions-keys+2*keys/10) {
		t.Fatalf("cleaner stats %+v: removed %d, want %d", st, st.RecordsRemoved, keys*versions-keys+2*keys/10)
	}
	k = k.Restart()
	check("after restart", false)
}

// txnProduce runs one transaction of cl writing key k<i> = <prefix>-<i> for i in [from, to), committing or
// aborting it; end false leaves it open.
func txnProduce(t *testing.T, cl *kgo.Client, topic, prefix string, from, to int, commit, end bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if !end {
		return
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionTransactions: committed, aborted and open transactions over a compacted topic. Cleaning removes
// aborted data regardless of key (not even read_uncommitted sees it afterwards), never passes the open
// transaction, and read_committed from offset 0 yields exactly the committed latest values before and after
// each pass and after a restart; the LSO ends at the high watermark (no transaction pinned by cleaning).
func TestCompactionTransactions(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	compactedTopic(k, "tx", nil)
	plain := k.Client(kgo.DefaultProduceTopic("tx"))
	a := k.Client(kgo.TransactionalID("a"))
	b := k.Client(kgo.TransactionalID("b"))
	want := map[string]string{}
	set := func(prefix string, from, to int) {
		for i := from; i < to; i++ {
			want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("%s-%d", prefix, i)
		}
	}
	// end counts the offsets written: records, and one marker per ended transaction (one partition).
	end := int64(0)
	txnProduce(t, a, "tx", "c1", 0, 100, true, true)
	set("c1", 0, 100)
	txnProduce(t, a, "tx", "ab", 0, 50, false, true)
	rollPast(t, plain, "tx", "r1", 20)
	txnProduce(t, b, "tx", "open", 50, 60, true, false) // open across the first pass
	txnProduce(t, a, "tx", "c2", 0, 10, true, true)
	rollPast(t, plain, "tx", "r2", 20)
	end += 100 + 1 + 50 + 1 + 20 + 10 + 10 + 1 + 20

	check := func(stage string) {
		t.Helper()
		got := latest(readTxn(t, k, "tx", true, end))
		for key, val := range want {
			if string(got[key]) != val {
				t.Fatalf("%s: read_committed %s = %q, want %q", stage, key, got[key], val)
			}
		}
		for key, val := range got {
			if len(key) > 0 && key[0] == 'k' && want[key] != string(val) {
				t.Fatalf("%s: read_committed %s = %q, want %q", stage, key, val, want[key])
			}
		}
	}
	noAborted := func(stage string) {
		t.Helper()
		for _, r := range readTxn(t, k, "tx", false, end) {
			if len(r.Value) > 2 && string(r.Value[:3]) == "ab-" {
				t.Fatalf("%s: aborted record %s=%s at %d still in the log", stage, r.Key, r.Value, r.Offset)
			}
		}
	}
	check("before cleaning")
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	check("with a transaction open")
	noAborted("with a transaction open")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	set("open", 50, 60)
	set("c2", 0, 10)
	rollPast(t, plain, "tx", "r3", 20)
	end += 1 + 20
	for pass := range 2 {
		if err := k.B.CleanNow(); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("after pass %d", pass+2))
	}
	k = k.Restart()
	check("after restart")
	noAborted("after restart")
	adm := k.Admin()
	lso, err := adm.ListCommittedOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	hw, err := adm.ListEndOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := lso.Lookup("tx", 0)
	h, _ := hw.Lookup("tx", 0)
	if l.Offset != h.Offset {
		t.Fatalf("after restart LSO %d, high watermark %d: a transaction is pinned", l.Offset, h.Offset)
	}
}

// TestCompactionBoundedMapSeveralPasses: with an offset map of 300 entries, 1,500 keys x 3 versions take
// several passes, each continuing where the last one's map ended, and end with every key exactly once at its
// latest value.
func TestCompactionBoundedMapSeveralPasses(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.CleanerMapEntries = 300 })
	compactedTopic(k, "bm", nil)
	cl := k.Client(kgo.DefaultProduceTopic("bm"), kgo.ProducerBatchMaxBytes(2048), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const keys, versions = 1500, 3
	var recs []*kgo.Record
	for v := range versions {
		for i := range keys {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d-%d", i, v)})
		}
	}
	produceAll(t, cl, recs)
	rollPast(t, cl, "bm", "roll", 20)
	passes := int64(0)
	for range 100 {
		if err := k.B.CleanNow(); err != nil {
			t.Fatal(err)
		}
		st := k.B.CleanerStats()
		if st.Passes == passes {
			break
		}
		passes = st.Passes
	}
	if passes < 3 {
		t.Fatalf("%d passes with a 300-entry map over %d keys, want several", passes, keys*versions)
	}
	got := readAll(t, k, "bm")
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Key)]++
	}
	for i := range keys {
		key := fmt.Sprintf("k%d", i)
		if seen[key] != 1 {
			t.Fatalf("after %d passes key %s appears %d times", passes, key, seen[key])
		}
	}
	if m := latest(got); len(got) != keys+20 || string(m["k7"]) != "v7-2" {
		t.Fatalf("after %d passes: %d records (want %d), k7=%q", passes, len(got), keys+20, m["k7"])
	}
	t.Logf("%d passes, %+v", passes, k.B.CleanerStats())
}

// TestCompactionPowerCut: a power cut (crash-clone file system) right after a cleaning round and again after
// more writes and another round recovers the cleaned log: every key once at its latest value. (Cuts at every
// step of a segment swap are TestReplaceSegmentCrashAtEveryStep in internal/log.)
func TestCompactionPowerCut(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBrokerOn(t, vfs.NewMem())
	compactedTopic(k, "pc", nil)
	cl := k.Client(kgo.DefaultProduceTopic("pc"))
	want := map[string]string{}
	write := func(version int) {
		var recs []*kgo.Record
		for i := range 500 {
			key, val := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d-%d", i, version)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(val)})
			want[key] = val
		}
		produceAll(t, cl, recs)
		rollPast(t, cl, "pc", fmt.Sprintf("roll%d", version), 20)
	}
	check := func(stage string, rolls int) {
		t.Helper()
		got := readAll(t, k, "pc")
		m := latest(got)
		for key, val := range want {
			if string(m[key]) != val {
				t.Fatalf("%s: %s = %q, want %q", stage, key, m[key], val)
			}
		}
		if len(got) != len(want)+rolls {
			t.Fatalf("%s: %d records, want %d", stage, len(got), len(want)+rolls)
		}
	}
	for v := range 3 {
		write(v)
	}
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	k = k.PowerCut()
	cl = k.Client(kgo.DefaultProduceTopic("pc"))
	check("after the first cut", 60)
	write(3)
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	k = k.PowerCut()
	check("after the second cut", 80)
}
