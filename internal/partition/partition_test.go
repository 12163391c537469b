package partition

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/producer"
)

func open(t *testing.T, dir string) *Partition {
	t.Helper()
	p, err := Open("t", 0, dir, Options{Log: log.Options{Fsync: log.FsyncAlways, RetentionMs: -1, RetentionBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// txBatch builds a batch of n records for producer pid at epoch/seq.
func txBatch(pid int64, epoch int16, seq int32, n int, transactional bool) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Value = []byte{byte(i)}
	}
	h := batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: 1, MaxTimestamp: 1}
	if transactional {
		h.Attributes = 0x10
	}
	return batch.Encode(h, recs)
}

func appendBatch(t *testing.T, p *Partition, b []byte) AppendResult {
	t.Helper()
	h, err := batch.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Append(b, h, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitDurable(t.Context(), res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAbortedIndexAndLSOSurviveReopen: an open transaction pins the LSO; an
// ABORT marker releases it and is listed for read_committed fetches, also
// after the partition is closed and reopened, and after an unclean reopen
// whose index entry is re-derived from the log.
func TestAbortedIndexAndLSOSurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := open(t, dir)
	appendBatch(t, p, txBatch(-1, -1, -1, 3, false)) // offsets 0-2
	appendBatch(t, p, txBatch(7, 0, 0, 2, true))     // offsets 3-4, txn open
	if got := p.LastStableOffset(); got != 3 {
		t.Fatalf("LSO with an open transaction at 3: %d", got)
	}
	rc, err := p.Read(0, 1<<20, ReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	if rc.LastStableOffset != 3 || len(rc.Records) == 0 {
		t.Fatalf("read_committed: LSO %d, %d bytes", rc.LastStableOffset, len(rc.Records))
	}
	off, err := p.WriteMarker(producer.MarkerInfo{ProducerID: 7, Epoch: 0, Commit: false}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if off != 5 {
		t.Fatalf("marker at %d, want 5", off)
	}
	if err := p.WaitDurable(t.Context(), off+1); err != nil {
		t.Fatal(err)
	}
	check := func(p *Partition, when string) {
		t.Helper()
		if p.LastStableOffset() != 6 || p.HighWatermark() != 6 {
			t.Fatalf("%s: LSO %d HW %d, want 6/6", when, p.LastStableOffset(), p.HighWatermark())
		}
		rc, err := p.Read(0, 1<<20, ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		if len(rc.Aborted) != 1 || rc.Aborted[0] != (AbortedTxn{ProducerID: 7, FirstOffset: 3, LastOffset: 5}) {
			t.Fatalf("%s: aborted %+v, want [{7 3 5}]", when, rc.Aborted)
		}
		ru, _ := p.Read(0, 1<<20, ReadUncommitted)
		if ru.Aborted != nil {
			t.Fatalf("%s: read_uncommitted got aborted list %+v (BL-28)", when, ru.Aborted)
		}
	}
	check(p, "before reopen")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = open(t, dir)
	check(p, "after clean reopen")
	p.Close()

	// Unclean: no snapshot and no index file; both are rebuilt from the log.
	removeGlob(t, dir, "*.snapshot")
	removeGlob(t, dir, txnIndexName)
	p = open(t, dir)
	check(p, "after rebuild from the log")
	p.Close()
}

// TestProducerStateSurvivesReopen: a retry of the last batch after a reopen
// is a duplicate answered with its original offset (state from the log scan
// when no snapshot exists, and from the snapshot otherwise).
func TestProducerStateSurvivesReopen(t *testing.T) {
	t.Parallel()
	for _, snapshot := range []bool{false, true} {
		dir := t.TempDir()
		p := open(t, dir)
		appendBatch(t, p, txBatch(3, 0, 0, 5, false))
		last := txBatch(3, 0, 5, 5, false)
		first := appendBatch(t, p, append([]byte(nil), last...))
		p.Close()
		if !snapshot {
			removeGlob(t, dir, "*.snapshot")
		}
		p = open(t, dir)
		h, _ := batch.Validate(last)
		res, err := p.Append(last, h, false, time.Now())
		if err != nil || !res.Duplicate || res.BaseOffset != first.BaseOffset {
			t.Fatalf("snapshot=%v: retry after reopen = %+v, %v; want duplicate at %d", snapshot, res, err, first.BaseOffset)
		}
		if p.LogEnd() != 10 {
			t.Fatalf("snapshot=%v: log end %d, want 10", snapshot, p.LogEnd())
		}
		p.Close()
	}
}
