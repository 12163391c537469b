package log

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestCrashCloneFsyncAlways (BL-24 at log level): once WaitDurable returned for batches 1..N, a power loss keeps
// exactly all of them, at their offsets, across segment rolls.
func TestCrashCloneFsyncAlways(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	o := Options{FS: fs, SegmentBytes: 2000, IndexIntervalBytes: 256}
	l := openLog(t, "/data/t-0", o)
	var m model
	for i := range 120 {
		s := m.appendTo(t, l, mkBatch(int32(i%4), int64(i), 50+(i*53)%400, byte(i)))
		if err := l.WaitDurable(context.Background(), s.last+1); err != nil {
			t.Fatal(err)
		}
		if i%17 != 0 {
			continue
		}
		c := openLog(t, "/data/t-0", Options{FS: fs.CrashClone(), SegmentBytes: 2000})
		checkHolds(t, c, &m, 0, len(m.batches))
		if c.Start() != 0 {
			t.Fatalf("Start = %d", c.Start())
		}
		c.Close()
	}
	if l.DurableEnd() != l.End() {
		t.Fatalf("DurableEnd %d != End %d", l.DurableEnd(), l.End())
	}
}

// TestCrashCloneFsyncNever: without per-append fsync a power loss loses the unsynced tail of the active segment
// (rolled segments were fsynced) and never serves a torn batch, even when part of the tail reached the disk.
func TestCrashCloneFsyncNever(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/p", Options{FS: fs, Fsync: FsyncNever, SegmentBytes: 1500})
	var m model
	for i := range 50 {
		m.appendTo(t, l, mkBatch(int32(i%3), int64(i), 100+(i*31)%200, byte(i)))
	}
	if err := l.WaitDurable(context.Background(), l.End()); err != nil || l.DurableEnd() != l.End() {
		t.Fatalf("FsyncNever WaitDurable = %v, DurableEnd %d, End %d", err, l.DurableEnd(), l.End())
	}
	bases := segmentFiles(t, fs, "/p")
	active := m.find(bases[len(bases)-1])
	if active == len(m.batches)-1 || active < 3 {
		t.Fatalf("want several batches in the active segment and rolled segments before it (active at %d)", active)
	}

	// Only synced state survives: the rolled segments, and an empty active segment.
	c := openLog(t, "/p", Options{FS: fs.CrashClone(), Fsync: FsyncNever})
	checkHolds(t, c, &m, 0, active)

	// Torn: each file keeps its synced bytes plus some of what was written after, cutting batches mid-way.
	for _, frac := range []int{1, 3, 5, 7} {
		clone := fs.CrashCloneFunc(func(_ string, synced, cur []byte) []byte {
			if !bytes.HasPrefix(cur, synced) {
				return synced
			}
			return cur[:len(synced)+(len(cur)-len(synced))*frac/8]
		})
		c := openLog(t, "/p", Options{FS: clone, Fsync: FsyncNever})
		n := m.find(c.End()-1) + 1
		if c.End() != m.batches[n-1].last+1 || n < active {
			t.Fatalf("frac %d/8: End %d is not a batch boundary at or after the active segment", frac, c.End())
		}
		checkHolds(t, c, &m, 0, n)
		c.Close()
	}
}

// TestStartAboveRecoveredEnd: a durable log start above what survived a power loss (FsyncNever) restarts the
// log empty at the log start; offsets below it are never reused.
func TestStartAboveRecoveredEnd(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/p", Options{FS: fs, Fsync: FsyncNever})
	for i := range 10 {
		if _, err := l.Append(mkBatch(0, int64(i), 20, 'x')); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetStart(5); err != nil {
		t.Fatal(err)
	}
	c := openLog(t, "/p", Options{FS: fs.CrashClone(), Fsync: FsyncNever})
	if c.Start() != 5 || c.End() != 5 {
		t.Fatalf("Start %d End %d, want 5 5", c.Start(), c.End())
	}
	if base, err := c.Append(mkBatch(0, 1, 20, 'y')); err != nil || base != 5 {
		t.Fatalf("Append = %d, %v; want 5", base, err)
	}
}

// TestCloseDurableEveryPolicy: whatever the policy, Close leaves everything durable, and a reopened log reads
// back the same bytes (one workload, three policies, two segment sizes).
func TestCloseDurableEveryPolicy(t *testing.T) {
	t.Parallel()
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever} {
		for _, segBytes := range []int64{700, 1 << 20} {
			fs := vfs.NewMem()
			o := Options{FS: fs, Fsync: p, SegmentBytes: segBytes, FsyncInterval: time.Hour}
			l := openLog(t, "/p", o)
			var m model
			for i := range 40 {
				m.appendTo(t, l, mkBatch(int32(i%2), int64(i), 60+i*5, byte(i)))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			o.FS = fs.CrashClone()
			checkHolds(t, openLog(t, "/p", o), &m, 0, len(m.batches))
		}
	}
}

// TestFsyncIntervalSyncs: with FsyncInterval the sync goroutine fsyncs on its own; acks do not wait for it.
func TestFsyncIntervalSyncs(t *testing.T) {
	t.Parallel()
	synced := make(chan struct{}, 100)
	mem := vfs.NewMem()
	fs := vfs.NewErrorFS(mem, func(op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, logSuffix) {
			synced <- struct{}{}
		}
		return nil
	})
	l := openLog(t, "/p", Options{FS: fs, Fsync: FsyncInterval, FsyncInterval: time.Millisecond})
	var m model
	m.appendTo(t, l, mkBatch(3, 7, 100, 'i'))
	if err := l.WaitDurable(context.Background(), 4); err != nil || l.DurableEnd() != 4 {
		t.Fatalf("WaitDurable = %v, DurableEnd %d", err, l.DurableEnd())
	}
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("no interval fsync")
	}
	checkHolds(t, openLog(t, "/p", Options{FS: mem.CrashClone()}), &m, 0, 1)
}
