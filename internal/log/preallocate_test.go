package log

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// fileSize is the size of name on fs.
func fileSize(t testing.TB, fs vfs.FS, name string) int64 {
	t.Helper()
	st, err := fs.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPreallocateRealFile: on real files the active segment is reserved ahead of the writes with written zeros
// (the file is larger than its batches, the extra bytes are zeros and have blocks), in steps that grow with the
// segment, never past segment.bytes; a rolled segment and, on Close, the active one are trimmed to exactly
// their batches; a reopened log holds everything.
func TestPreallocateRealFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const segBytes = 200 << 10
	o := Options{Preallocate: true, SegmentBytes: segBytes}
	l := openLog(t, dir, o)
	var m model
	m.appendTo(t, l, mkBatch(0, 1, 1000, 1))
	name := filepath.Join(dir, "00000000000000000000.log")
	n := int64(len(m.bytes(0, 1)))
	if got, want := fileSize(t, vfs.OS, name), n+minPreallocStep; got != want {
		t.Fatalf("after one batch of %d bytes the file is %d bytes, want %d (batch + first step)", n, got, want)
	}
	if b := fileBytes(t, vfs.OS, name); !bytes.Equal(b[:n], m.bytes(0, 1)) || !allZero(b[n:]) {
		t.Fatal("the file is not the batch followed by zeros")
	}
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	// The zeros were written, so they have blocks (a sparse ftruncate would leave them unallocated).
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blocks*512 < st.Size() {
		var sfs syscall.Statfs_t
		if syscall.Statfs(dir, &sfs) == nil && sfs.Type == 0xef53 { // EXT4_SUPER_MAGIC
			t.Fatalf("%d bytes of blocks for a %d-byte preallocated file on ext4", sys.Blocks*512, st.Size())
		}
	}
	for i := 1; len(segmentFiles(t, vfs.OS, dir)) < 2; i++ {
		m.appendTo(t, l, mkBatch(0, int64(i), 1000, byte(i)))
		if got := fileSize(t, vfs.OS, name); got > segBytes {
			t.Fatalf("active segment file of %d bytes, past segment.bytes %d", got, segBytes)
		}
	}
	segs := l.Segments()
	if got := fileSize(t, vfs.OS, name); got != segs[0].Size {
		t.Fatalf("rolled segment file is %d bytes, its batches %d: not trimmed", got, segs[0].Size)
	}
	if l.Size() != int64(len(m.bytes(0, len(m.batches)))) {
		t.Fatalf("Size = %d counts preallocated space, batches are %d bytes", l.Size(), len(m.bytes(0, len(m.batches))))
	}
	active := filepath.Join(dir, filepath.Base(segmentName(dir, segs[1].Base, logSuffix)))
	if fileSize(t, vfs.OS, active) <= segs[1].Size {
		t.Fatal("the new active segment is not preallocated")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, vfs.OS, active); got != segs[1].Size {
		t.Fatalf("after Close the active segment file is %d bytes, its batches %d: not trimmed", got, segs[1].Size)
	}
	checkHolds(t, openLog(t, dir, o), &m, 0, len(m.batches))
}

// TestPreallocatedPowerCut: a power loss with the active segment preallocated (its zero tail fsynced with the
// data) recovers exactly the acknowledged batches, cuts the zeros without treating them as a torn batch, and
// appends continue at the recovered end. With pages written back out of order (a later page of unsynced
// batches on disk, an earlier one still zeros), recovery stops at the first zeroed batch header and never
// serves what follows it.
func TestPreallocatedPowerCut(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	o := Options{FS: fs, Preallocate: true, SegmentBytes: 1 << 20}
	l := openLog(t, "/p", o)
	var m model
	for i := range 40 {
		s := m.appendTo(t, l, mkBatch(int32(i%3), int64(i), 200+(i*37)%300, byte(i)))
		if err := l.WaitDurable(t.Context(), s.last+1); err != nil {
			t.Fatal(err)
		}
	}
	name := segPath("/p", 0, logSuffix)
	acked := len(m.batches)
	durable := fs.CrashClone()
	if got, data := fileSize(t, durable, name), int64(len(m.bytes(0, acked))); got <= data {
		t.Fatalf("the durable file is %d bytes for %d bytes of batches: no preallocated tail to recover from", got, data)
	}
	var logBuf bytes.Buffer
	c := openLog(t, "/p", Options{FS: durable, Preallocate: true, Logger: newTextLogger(&logBuf)})
	checkHolds(t, c, &m, 0, acked)
	if bytes.Contains(logBuf.Bytes(), []byte("level=WARN")) {
		t.Fatalf("recovery of a preallocated tail warned: %s", logBuf.String())
	}
	if got := fileSize(t, durable, name); got != int64(len(m.bytes(0, acked))) {
		t.Fatalf("recovered file is %d bytes, want its %d bytes of batches", got, len(m.bytes(0, acked)))
	}
	if base, err := c.Append(mkBatch(0, 99, 100, 99)); err != nil || base != m.batches[acked-1].last+1 {
		t.Fatalf("append after recovery at %d (%v), want %d", base, err, m.batches[acked-1].last+1)
	}
	c.Close()

	// Out-of-order writeback: sync the preallocated tail as zeros, write more batches (never synced), then keep
	// only every other 4 KiB page of what they wrote.
	l2 := openLog(t, "/q", Options{FS: fs, Preallocate: true, Fsync: FsyncNever, SegmentBytes: 1 << 20})
	var m2 model
	for i := range 5 {
		m2.appendTo(t, l2, mkBatch(0, int64(i), 300, byte(i)))
	}
	if err := l2.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := len(m2.batches)
	for i := range 60 {
		m2.appendTo(t, l2, mkBatch(1, int64(i), 500, byte(i)))
	}
	const page = 4096
	torn := fs.CrashCloneFunc(func(_ string, syncedB, cur []byte) []byte {
		out := bytes.Clone(syncedB)
		for off := 0; off+page <= min(len(out), len(cur)); off += page {
			if (off/page)%2 == 1 {
				copy(out[off:off+page], cur[off:off+page])
			}
		}
		return out
	})
	name2 := segPath("/q", 0, logSuffix)
	before := fileBytes(t, torn, name2)
	c2 := openLog(t, "/q", Options{FS: torn, Preallocate: true})
	n := m2.find(c2.End()-1) + 1
	if n < synced || c2.End() != m2.batches[n-1].last+1 {
		t.Fatalf("recovered End %d: not a batch boundary at or after the %d synced batches", c2.End(), synced)
	}
	if n == len(m2.batches) {
		t.Fatal("every batch survived: the torn clone did not drop a page")
	}
	checkHolds(t, c2, &m2, 0, n)
	after := int64(len(m2.bytes(0, n)))
	if allZero(before[after:]) {
		t.Fatal("the clone had no data after the recovered end: the test did not exercise zeros followed by data")
	}
}

// TestZeroTailOfClosedSegment: zeros after the last batch of a segment that is not the last (preallocated space
// a crash kept from being trimmed) are cut, not reported as corruption; zeros followed by data there still are.
func TestZeroTailOfClosedSegment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		tail    []byte
		corrupt bool
	}{
		{"zeros", make([]byte, 5000), false},
		{"zeros-then-data", append(make([]byte, 200), 0xab), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := vfs.NewMem()
			o := Options{FS: fs, SegmentBytes: 1500}
			l := openLog(t, "/p", o)
			var m model
			for i := range 12 {
				m.appendTo(t, l, mkBatch(0, int64(i), 300, byte(i)))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			first := segPath("/p", 0, logSuffix)
			size := fileSize(t, fs, first)
			writeFileAt(t, fs, first, tc.tail, size)
			l2, err := Open("/p", o)
			if tc.corrupt {
				if !errors.Is(err, ErrCorruption) {
					t.Fatalf("Open = %v, want ErrCorruption", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			checkHolds(t, l2, &m, 0, len(m.batches))
			if got := fileSize(t, fs, first); got != size {
				t.Fatalf("segment file is %d bytes after recovery, want %d", got, size)
			}
		})
	}
}

// TestReplaceSegmentNotPreallocated: the log cleaner's output segment holds its batches only, even when the
// log preallocates its active segment.
func TestReplaceSegmentNotPreallocated(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/p", Options{FS: fs, Preallocate: true, SegmentBytes: 1500})
	var m model
	for i := range 12 {
		m.appendTo(t, l, mkBatch(int32(i%2), int64(i), 300, byte(i)))
	}
	s := l.Segments()[0]
	want := cleanedCopy(t, &m, s)
	if err := replaceWith(l, s.Base, want); err != nil {
		t.Fatal(err)
	}
	if got := fileBytes(t, fs, segPath("/p", s.Base, logSuffix)); !bytes.Equal(got, want) {
		t.Fatalf("cleaned segment file is %d bytes, want exactly its %d bytes of batches", len(got), len(want))
	}
}

func newTextLogger(w *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestZeroStepFollowsFsyncSize: with FsyncAlways a preallocation step is written zeros while the fsyncs since
// the previous step averaged under smallFsyncBytes (and at first, with no history), fallocate once they are
// larger, unchanged when no fsync ran since; with the other policies it is always fallocate.
func TestZeroStepFollowsFsyncSize(t *testing.T) {
	t.Parallel()
	l := openLog(t, "/p", Options{FS: vfs.NewMem(), Preallocate: true})
	c := &l.commit
	// The counters as the sync goroutine leaves them; no append runs here, so it never fsyncs.
	fsyncs := func(n, bytesEach int64) { c.fsyncs.Add(n); c.fsyncedSize.Add(n * bytesEach) }
	steps := []struct {
		n, bytesEach int64
		want         bool
	}{
		{0, 0, true},                    // no history yet
		{900, 1100, true},               // W1: one 1.1 KB batch per fsync
		{3, 4 << 20, false},             // group commit of 4 MiB per fsync
		{0, 0, false},                   // a step consumed within one fsync: as before
		{20, smallFsyncBytes - 1, true}, // just under the threshold
		{20, smallFsyncBytes, false},
	}
	for i, s := range steps {
		fsyncs(s.n, s.bytesEach)
		if got := l.zeroStep(); got != s.want {
			t.Errorf("step %d after %d fsyncs of %d bytes: zeros %v, want %v", i, s.n, s.bytesEach, got, s.want)
		}
	}
	never := openLog(t, "/q", Options{FS: vfs.NewMem(), Preallocate: true, Fsync: FsyncNever})
	if never.zeroStep() {
		t.Error("FsyncNever preallocates with zeros")
	}
}
