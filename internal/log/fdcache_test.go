package log

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestFileCacheBoundsDescriptors: 20 logs of several segments each share a
// cache of 6 descriptors; appends, reads, a close and a reopen (recovery)
// never hold more than 6 (with FsyncNever the test is the only user of the
// files, so the soft bound is exact) and every log holds what was appended.
func TestFileCacheBoundsDescriptors(t *testing.T) {
	t.Parallel()
	fc := NewFileCache(6)
	root := t.TempDir()
	const logs = 20
	models := make([]model, logs)
	open := func() []*Log {
		ls := make([]*Log, logs)
		for i := range ls {
			ls[i] = openLog(t, filepath.Join(root, fmt.Sprint(i)), Options{Files: fc, SegmentBytes: 400, Fsync: FsyncNever})
			if n := fc.Open(); n > fc.Max() {
				t.Fatalf("%d descriptors open after opening %d logs, bound %d", n, i+1, fc.Max())
			}
		}
		return ls
	}
	ls := open()
	for round := 0; round < 8; round++ {
		for i, l := range ls {
			models[i].appendTo(t, l, mkBatch(2, int64(round), 100, byte(i)))
			if n := fc.Open(); n > fc.Max() {
				t.Fatalf("%d descriptors open after an append, bound %d", n, fc.Max())
			}
		}
	}
	for i, l := range ls {
		if segs := len(l.segs); segs < 3 {
			t.Fatalf("log %d has %d segments, want several", i, segs)
		}
		checkHolds(t, l, &models[i], 0, len(models[i].batches))
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fc.Open(); n != 0 {
		t.Fatalf("%d descriptors open after every log closed", n)
	}
	for i, l := range open() {
		checkHolds(t, l, &models[i], 0, len(models[i].batches))
	}
}

// TestOutOfDescriptorsFailsOnlyThatAppend: when the segment file cannot be
// reopened because the process is out of descriptors, that Append (and a
// Read) fails with EMFILE and nothing is written; the error is not sticky,
// and once descriptors are available the log appends and reads again with
// nothing lost.
func TestOutOfDescriptorsFailsOnlyThatAppend(t *testing.T) {
	t.Parallel()
	var emfile atomic.Bool
	fs := vfs.NewErrorFS(vfs.OS, func(op, name string) error {
		if op == vfs.OpOpen && emfile.Load() && strings.HasSuffix(name, logSuffix) {
			return syscall.EMFILE
		}
		return nil
	})
	fc := NewFileCache(2)
	l := openLog(t, t.TempDir(), Options{FS: fs, Files: fc})
	var m model
	m.appendTo(t, l, mkBatch(0, 1, 50, 1))
	if err := l.WaitDurable(t.Context(), l.End()); err != nil { // the sync goroutine is done with the file
		t.Fatal(err)
	}
	// Another log's files push this log's idle descriptors out of the cache.
	openLog(t, t.TempDir(), Options{Files: fc})
	fc.mu.Lock()
	cached := l.active.log.f != nil
	fc.mu.Unlock()
	if cached {
		t.Fatal("the active segment's descriptor is still cached; the test needs it closed")
	}
	emfile.Store(true)
	if _, err := l.Append(mkBatch(0, 2, 50, 2)); err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Fatalf("Append out of descriptors: %v, want EMFILE", err)
	}
	if _, err := l.Read(0, 1<<20, l.End()); err == nil {
		// The header scan needs the file too.
		t.Fatal("Read out of descriptors succeeded without the file")
	}
	if l.End() != m.batches[0].last+1 {
		t.Fatalf("End moved to %d by a failed append", l.End())
	}
	emfile.Store(false)
	m.appendTo(t, l, mkBatch(0, 3, 50, 3))
	checkHolds(t, l, &m, 0, 2)
	if err := l.WaitDurable(t.Context(), l.End()); err != nil {
		t.Fatalf("WaitDurable after descriptors came back: %v", err)
	}
}
