package partition

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/producer"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestLSOHoldsWhileTxnDataBecomesDurable: the first batch of a transaction
// must pin the LSO at its base offset from the moment the log holds it. The
// log's notifier publishes the HW on its own goroutine, without the partition
// lock, so the transaction's first offset has to be known to it before the
// data can be fsynced. Here the appending goroutine is held inside Append, in
// its producer-state snapshot (after the data is written and fsynced, before
// Append returns), while the notifier publishes the new HW. The LSO used to
// follow the HW there (the first offset was published only at the end of
// Append): read_committed fetches were served the open transaction's records
// with an LSO past them (kawa-powercut's read-past-lso and aborted-read).
func TestLSOHoldsWhileTxnDataBecomesDurable(t *testing.T) {
	t.Parallel()
	var armed, readArmed atomic.Bool
	entered, release, reading := make(chan struct{}), make(chan struct{}), make(chan struct{})
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op, name string) error {
		switch {
		case op == vfs.OpOpen && strings.HasSuffix(name, ".snapshot"+vfs.TempSuffix) && armed.CompareAndSwap(true, false):
			close(entered)
			<-release
		case op == vfs.OpRead && strings.HasSuffix(name, ".log") && readArmed.CompareAndSwap(true, false):
			close(reading) // the fetch has taken its {HW, LSO} and reads the range it bounds
		}
		return nil
	})
	p, err := Open("t", 0, "/p", Options{
		Log:           log.Options{FS: fs, Fsync: log.FsyncAlways, RetentionMs: -1, RetentionBytes: -1},
		SnapshotBytes: 1, // every append snapshots
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	appendBatch(t, p, txBatch(-1, -1, -1, 3, false)) // offsets 0-2, no transaction open

	armed.Store(true)
	b := txBatch(7, 0, 0, 2, true) // offsets 3-4 open a transaction
	h, err := batch.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Append(b, h, false, time.Now())
		done <- err
	}()
	<-entered // Append is inside its snapshot; the snapshot's log.Sync has made 3-4 durable
	for {
		wake := p.Wake()
		if p.HighWatermark() >= 5 {
			break
		}
		<-wake // the notifier publishes the durable end 5
	}
	if lso := p.LastStableOffset(); lso != 3 {
		t.Errorf("LSO %d with HW %d while the transaction starting at 3 is open; want 3", lso, p.HighWatermark())
	}
	// A fetch now picks its range from the published LSO; it then waits for
	// the partition lock (the aborted list), which Append holds, so Append is
	// released only once the fetch reads the log.
	type read struct {
		rc  ReadResult
		err error
	}
	fetched := make(chan read, 1)
	readArmed.Store(true)
	go func() {
		rc, err := p.Read(0, 1<<20, ReadCommitted)
		fetched <- read{rc, err}
	}()
	<-reading
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r := <-fetched
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rc.LastStableOffset > 3 {
		t.Errorf("read_committed fetch reports LSO %d past the open transaction at 3", r.rc.LastStableOffset)
	}
	checkServedBelow(t, r.rc, 3)
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO after the append %d, want 3", lso)
	}
	off, err := p.WriteMarker(producer.MarkerInfo{ProducerID: 7, Epoch: 0, Commit: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitDurable(t.Context(), off+1); err != nil {
		t.Fatal(err)
	}
	if lso := p.LastStableOffset(); lso != off+1 {
		t.Fatalf("LSO after the COMMIT marker at %d: %d, want %d", off, lso, off+1)
	}
}

// checkServedBelow fails if a read_committed result holds an offset at or
// past open, the first offset of a transaction still open.
func checkServedBelow(t *testing.T, rc ReadResult, open int64) {
	t.Helper()
	if _, err := batch.Iterate(rc.Records, func(h batch.Header, _ []byte) bool {
		if last := h.BaseOffset + int64(h.LastOffsetDelta); last >= open {
			t.Errorf("read_committed served offsets %d-%d of the transaction open at %d (LSO %d)", h.BaseOffset, last, open, rc.LastStableOffset)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
}
