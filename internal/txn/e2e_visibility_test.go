package txn_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

const (
	readUncommitted int8 = 0
	readCommitted   int8 = 1
)

// An aborted transaction across 3 partitions is invisible to read_committed
// and visible to read_uncommitted; the next committed transaction is
// visible.
func TestAbortAcrossPartitionsThenCommit(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("abort3")
	k.CreateTopic(topic, 3, nil)
	cl := txnClient(t, k, name("tx"))
	produceTxn(t, cl, topic, 3, false, "a0", "a1", "a2", "a3")
	produceTxn(t, cl, topic, 3, true, "c0", "c1", "c2")
	waitVisible(t, k, topic, []string{"c0", "c1", "c2"})
	if got := readAll(t, k, topic, false, 7); !slices.Equal(got, []string{"a0", "a1", "a2", "a3", "c0", "c1", "c2"}) {
		t.Fatalf("read_uncommitted: %q", got)
	}
	r := newRaw(t, k, nil)
	for p := int32(0); p < 3; p++ {
		// Each partition: its records of both transactions plus two markers.
		n := int64(map[int32]int{0: 2, 1: 1, 2: 1}[p] + 1 + 2)
		if c, u := r.settled(topic, p, n); c != n || u != n {
			t.Errorf("partition %d: latest read_committed %d read_uncommitted %d, want %d", p, c, u, n)
		}
	}
}

// BL-26: read_committed stops at the LSO of an open transaction, even for
// the transaction's own client; ListOffsets latest read_committed is the
// LSO; after the abort the records come with an AbortedTransactions entry
// (or not at all). Edge cases: an empty partition, and LSO == log start.
func TestReadCommittedStopsAtLSO(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("lso")
	k.CreateTopic(topic, 2, nil)
	r := newRaw(t, k, nil)
	plain := &pid{id: -1, epoch: -1}
	if code, _ := r.produce(nil, plain, topic, 0, -1, "0", "1", "2", "3", "4"); code != 0 {
		t.Fatalf("plain produce: %s", codeName(code))
	}
	id := name("tx")
	p := r.mustInit(id, 60000, nil)
	r.addPartitions(id, p, topic, 0)
	if code, off := r.produce(&id, p, topic, 0, 0, "A"); code != 0 || off != 5 {
		t.Fatalf("txn produce: %s at %d", codeName(code), off)
	}
	r.waitHW(topic, 0, 6)
	f := r.fetch(topic, 0, 0, readCommitted)
	got := decode(t, f)
	if f.ErrorCode != 0 || f.LastStableOffset != 5 || f.HighWatermark != 6 || !slices.Equal(got.values, []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("read_committed while open: err %s LSO %d HW %d values %q", codeName(f.ErrorCode), f.LastStableOffset, f.HighWatermark, got.values)
	}
	if f := r.fetch(topic, 0, 5, readCommitted); f.ErrorCode != 0 || len(f.RecordBatches) != 0 {
		t.Fatalf("read_committed at the LSO: %s, %d bytes", codeName(f.ErrorCode), len(f.RecordBatches))
	}
	if lso, hw := r.latest(topic, 0, readCommitted), r.latest(topic, 0, readUncommitted); lso != 5 || hw != 6 {
		t.Fatalf("ListOffsets latest: read_committed %d read_uncommitted %d, want 5 and 6", lso, hw)
	}
	if e := r.endTxn(id, p, false); e.ErrorCode != 0 {
		t.Fatalf("abort: %s", codeName(e.ErrorCode))
	}
	r.waitState(id, "CompleteAbort")
	f = r.fetch(topic, 0, 5, readCommitted)
	got = decode(t, f)
	if f.LastStableOffset != 7 || got.controls != 1 {
		t.Fatalf("after abort: LSO %d controls %d", f.LastStableOffset, got.controls)
	}
	if len(got.values) > 0 && (len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].ProducerID != p.id || f.AbortedTransactions[0].FirstOffset != 5) {
		t.Fatalf("aborted record returned without its AbortedTransactions entry: %+v", f.AbortedTransactions)
	}
	// Empty partition: zero records, no error, LSO 0.
	if f := r.fetch(topic, 1, 0, readCommitted); f.ErrorCode != 0 || len(f.RecordBatches) != 0 || f.LastStableOffset != 0 {
		t.Fatalf("empty partition: %s LSO %d", codeName(f.ErrorCode), f.LastStableOffset)
	}
	if lso := r.latest(topic, 1, readCommitted); lso != 0 {
		t.Fatalf("empty partition latest read_committed %d", lso)
	}
	// LSO == log start: an open transaction as the first record.
	p2 := r.mustInit(id, 60000, nil)
	r.addPartitions(id, p2, topic, 1)
	r.produce(&id, p2, topic, 1, 0, "B")
	if f := r.fetch(topic, 1, 0, readCommitted); f.ErrorCode != 0 || len(f.RecordBatches) != 0 || f.LastStableOffset != 0 || f.LogStartOffset != 0 {
		t.Fatalf("LSO at log start: %s LSO %d", codeName(f.ErrorCode), f.LastStableOffset)
	}
	if e := r.endTxn(id, p2, true); e.ErrorCode != 0 {
		t.Fatal(codeName(e.ErrorCode))
	}
	r.waitState(id, "CompleteCommit")
	if got := decode(t, r.fetch(topic, 1, 0, readCommitted)); !slices.Equal(got.values, []string{"B"}) {
		t.Fatalf("after commit: %q", got.values)
	}
}

// BL-28: read_uncommitted gets an aborted record without AbortedTransactions;
// read_committed gets nothing or the record with its entry.
func TestAbortedRecordIsolation(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("foo")
	k.CreateTopic(topic, 1, nil)
	produceTxn(t, txnClient(t, k, name("tx")), topic, 1, false, "20")
	r := newRaw(t, k, nil)
	r.waitLSO(topic, 0, 2)
	f := r.fetch(topic, 0, 0, readUncommitted)
	got := decode(t, f)
	if !slices.Equal(got.values, []string{"20"}) || got.controls != 1 || len(f.AbortedTransactions) != 0 {
		t.Fatalf("read_uncommitted: values %q controls %d aborted %+v", got.values, got.controls, f.AbortedTransactions)
	}
	f = r.fetch(topic, 0, 0, readCommitted)
	got = decode(t, f)
	if len(got.values) > 0 && len(f.AbortedTransactions) != 1 {
		t.Fatalf("read_committed returned %q without AbortedTransactions", got.values)
	}
	if v := readAll(t, k, topic, true, -1); len(v) != 0 {
		t.Fatalf("franz-go read_committed saw %q", v)
	}
	if v := readAll(t, k, topic, false, 1); !slices.Equal(v, []string{"20"}) {
		t.Fatalf("franz-go read_uncommitted saw %q", v)
	}
}

// waitLSO waits until the read_committed latest offset reaches want.
func (r *raw) waitLSO(topic string, part int32, want int64) {
	r.t.Helper()
	wait.Until(r.t, 10*time.Second, fmt.Sprintf("%s-%d's LSO to reach %d", topic, part, want), func() bool {
		return r.latest(topic, part, readCommitted) >= want
	})
}

// BL-29: 3 aborted records leave log end 4 (N+1); latest is 4 for both
// isolation levels; a read_committed consumer ends at 4 with lag 0; a
// partition holding only a marker is consumed without error.
func TestAbortedOffsetsCountOnce(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("bl29")
	k.CreateTopic(topic, 2, nil)
	cl := txnClient(t, k, name("tx"))
	produceTxn(t, cl, topic, 1, false, "x", "y", "z")
	r := newRaw(t, k, nil)
	if c, u := r.settled(topic, 0, 4); c != 4 || u != 4 {
		t.Fatalf("latest: read_committed %d read_uncommitted %d, want 4 and 4", c, u)
	}
	// The consumer's position after draining is 4, past the marker: the
	// next record it gets is at 4; after committing it the lag is 0.
	if next, committed := drainThenNext(t, k, topic, 0); next != 4 || committed != 5 || r.latest(topic, 0, readCommitted) != 5 {
		t.Fatalf("position after drain %d, committed %d; want 4 and 5 (lag 0)", next, committed)
	}
	// Marker-only partition: added to a transaction that wrote nothing there.
	id := name("tx")
	p := r.mustInit(id, 60000, nil)
	if code := r.addPartitions(id, p, topic, 1); code != 0 {
		t.Fatal(codeName(code))
	}
	if e := r.endTxn(id, p, false); e.ErrorCode != 0 {
		t.Fatal(codeName(e.ErrorCode))
	}
	r.waitLSO(topic, 1, 1)
	f := r.fetch(topic, 1, 0, readCommitted)
	if got := decode(t, f); f.ErrorCode != 0 || got.controls != 1 || len(got.values) != 0 || f.HighWatermark != 1 {
		t.Fatalf("marker-only partition: %s %+v HW %d", codeName(f.ErrorCode), got, f.HighWatermark)
	}
	if next, committed := drainThenNext(t, k, topic, 1); next != 1 || committed != 2 {
		t.Fatalf("marker-only partition: position %d, committed %d; want 1 and 2", next, committed)
	}
}
