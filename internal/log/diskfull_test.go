package log

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestDiskFullAppendIsNotSticky: a write refused with ENOSPC fails that
// Append (errors.Is ENOSPC) and nothing else: the log still reads, its end
// does not move, and once space is back appends resume by themselves with
// nothing lost; a roll whose index write is refused for space is retried
// the same way.
func TestDiskFullAppendIsNotSticky(t *testing.T) {
	t.Parallel()
	var full atomic.Bool
	fs := vfs.NewErrorFS(vfs.OS, func(op, name string) error {
		if op == vfs.OpWrite && full.Load() {
			return syscall.ENOSPC
		}
		return nil
	})
	l := openLog(t, t.TempDir(), Options{FS: fs, SegmentBytes: 500, IndexIntervalBytes: 1})
	var m model
	m.appendTo(t, l, mkBatch(0, 1, 100, 1))
	m.appendTo(t, l, mkBatch(0, 2, 100, 2))
	m.appendTo(t, l, mkBatch(0, 2, 100, 2)) // the segment is full: the next append rolls
	full.Store(true)
	for i := 0; i < 3; i++ {
		_, err := l.Append(mkBatch(0, 3, 100, 3))
		if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, errIndexWrite) {
			t.Fatalf("append on a full disk: %v, want ENOSPC from the roll's index write", err)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("a full disk made the log's error sticky: %v", err)
	}
	checkHolds(t, l, &m, 0, 3)
	full.Store(false)
	for i := 0; i < 4; i++ {
		m.appendTo(t, l, mkBatch(1, int64(4+i), 100, byte(4+i)))
	}
	if err := l.WaitDurable(t.Context(), l.End()); err != nil {
		t.Fatal(err)
	}
	checkHolds(t, l, &m, 0, len(m.batches))
	if len(l.segs) < 2 {
		t.Fatalf("%d segments; the test wants a roll after the disk had space again", len(l.segs))
	}
	// Reopen: the indexes written after the refused flush are whole.
	dir := l.dir
	if err := l.Close(); err != nil && !strings.Contains(err.Error(), "closed") {
		t.Fatal(err)
	}
	checkHolds(t, openLog(t, dir, Options{SegmentBytes: 500, IndexIntervalBytes: 1}), &m, 0, len(m.batches))
}
