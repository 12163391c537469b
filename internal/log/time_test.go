package log

import (
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestOffsetForTime compares the index-assisted lookup with a brute-force scan of the model, for every target
// timestamp, on a log with non-monotonic timestamps over many segments and a dense sparse index.
func TestOffsetForTime(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/p", Options{FS: fs, SegmentBytes: 1500, IndexIntervalBytes: 250})
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("empty MaxTimestamp = %d, %d", ts, off)
	}
	if _, ok := l.OffsetForTime(0); ok {
		t.Fatal("OffsetForTime on an empty log found something")
	}
	var m model
	var tss []int64
	for i := range 80 {
		ts := int64(1000 + 10*i - 25*(i%4)) // wobbles down within each group of four
		if i == 50 || i == 63 {
			ts = 2000 // the maximum, twice: the first one counts
		}
		tss = append(tss, ts)
		m.appendTo(t, l, mkBatch(int32(i%3), ts, 100+(i*7)%150, byte(i)))
	}
	if len(segmentFiles(t, fs, "/p")) < 8 {
		t.Fatal("want many segments")
	}
	check := func(start int64) {
		t.Helper()
		for ts := int64(900); ts <= 2001; ts++ {
			wantOff, wantOK := int64(-1), false
			for i, s := range m.batches {
				if tss[i] >= ts && s.last >= start {
					wantOff, wantOK = max(s.base, start), true
					break
				}
			}
			off, ok := l.OffsetForTime(ts)
			if off != wantOff || ok != wantOK {
				t.Fatalf("start %d: OffsetForTime(%d) = %d, %v; want %d, %v", start, ts, off, ok, wantOff, wantOK)
			}
		}
	}
	check(0)
	if ts, off := l.MaxTimestamp(); ts != 2000 || off != m.batches[50].last {
		t.Fatalf("MaxTimestamp = %d, %d; want 2000, %d", ts, off, m.batches[50].last)
	}
	if err := l.SetStart(m.batches[30].base + 1); err != nil {
		t.Fatal(err)
	}
	check(l.Start())
}
