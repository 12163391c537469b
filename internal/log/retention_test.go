package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// fiveSegments appends 23 one-record batches of exactly 200 bytes into 1000-byte segments:
// [0-4] [5-9] [10-14] [15-19] and the active [20-22]. Batch i has max timestamp ts(i).
func fiveSegments(t *testing.T, fs vfs.FS, o Options, ts func(i int) int64) (*Log, *model) {
	t.Helper()
	o.FS, o.SegmentBytes = fs, 1000
	l := openLog(t, "/p", o)
	var m model
	for i := range 23 {
		m.appendTo(t, l, mkBatch(0, ts(i), 200-batch.HeaderSize, byte(i)))
	}
	if got := segmentFiles(t, fs, "/p"); len(got) != 5 || got[4] != 20 {
		t.Fatalf("segments %v", got)
	}
	return l, &m
}

func checkRetained(t *testing.T, fs vfs.FS, l *Log, m *model, start int64, bases ...int64) {
	t.Helper()
	if l.Start() != start {
		t.Fatalf("Start = %d, want %d", l.Start(), start)
	}
	got := segmentFiles(t, fs, "/p")
	if len(got) != len(bases) {
		t.Fatalf("segments %v, want %v", got, bases)
	}
	for i := range got {
		if got[i] != bases[i] {
			t.Fatalf("segments %v, want %v", got, bases)
		}
	}
	if l.Size() != int64(200*(23-bases[0])) {
		t.Fatalf("Size = %d, want %d", l.Size(), 200*(23-bases[0]))
	}
	checkHolds(t, l, m, int(start), 23)
	if _, err := l.Read(start-1, 100, l.End()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(%d) = %v, want ErrOffsetOutOfRange", start-1, err)
	}
}

func TestRetentionBytes(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l, m := fiveSegments(t, fs, Options{RetentionBytes: 2000, RetentionMs: -1}, func(int) int64 { return 0 })
	// Total 4600: dropping [0-4] leaves 3600, dropping [5-9] leaves 2600, dropping [10-14] would leave 1600.
	n, err := l.EnforceRetention(time.Now())
	if err != nil || n != 2 {
		t.Fatalf("EnforceRetention = %d, %v; want 2", n, err)
	}
	checkRetained(t, fs, l, m, 10, 10, 15, 20)
	if n, err := l.EnforceRetention(time.Now()); n != 0 || err != nil {
		t.Fatalf("second pass = %d, %v", n, err)
	}
	l.SetConfig(-1, 1, 0) // the active segment is never deleted
	if n, err := l.EnforceRetention(time.Now()); n != 2 || err != nil {
		t.Fatalf("pass with 1 byte = %d, %v", n, err)
	}
	checkRetained(t, fs, l, m, 20, 20)
	l.Close()
	r := openLog(t, "/p", Options{FS: fs.CrashClone()})
	checkRetained(t, fs, r, m, 20, 20)
}

func TestRetentionTime(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	// Segment k holds timestamps 100k..100k+4, except segment 2, which is older than segment 1.
	ts := func(i int) int64 {
		if i/5 == 2 {
			return int64(i)
		}
		return int64(100*(i/5) + i%5)
	}
	l, m := fiveSegments(t, fs, Options{RetentionMs: 1000}, ts)
	n, err := l.EnforceRetention(time.UnixMilli(1000 + 50)) // segments with newest < 50 expire: [0-4] and [10-14]
	if err != nil || n != 1 {
		t.Fatalf("EnforceRetention = %d, %v; want 1", n, err)
	}
	checkRetained(t, fs, l, m, 5, 5, 10, 15, 20)
	// Segment [10-14] is old but [5-9] is not: deletion only takes a prefix.
	if n, _ := l.EnforceRetention(time.UnixMilli(1000 + 100)); n != 0 {
		t.Fatalf("deleted %d behind a live segment", n)
	}
	n, err = l.EnforceRetention(time.UnixMilli(1 << 40))
	if err != nil || n != 3 {
		t.Fatalf("EnforceRetention(far future) = %d, %v; want 3 (never the active segment)", n, err)
	}
	checkRetained(t, fs, l, m, 20, 20)
	unlimited, _ := fiveSegments(t, vfs.NewMem(), Options{RetentionMs: -1}, ts)
	if n, _ := unlimited.EnforceRetention(time.UnixMilli(1 << 40)); n != 0 {
		t.Fatalf("unlimited retention deleted %d", n)
	}
}

func TestSetStartPersisted(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l, m := fiveSegments(t, fs, Options{}, func(i int) int64 { return int64(i) })
	if err := l.SetStart(12); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(context.Background(), l.End()); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, fs, "/p"); len(got) != 3 || got[0] != 10 {
		t.Fatalf("segments %v, want [10 15 20]", got)
	}
	res, err := l.Read(12, 1, l.End())
	if err != nil || res.FirstOffset != 12 {
		t.Fatalf("Read(12) = %+v, %v", res, err)
	}
	if err := l.SetStart(5); err != nil || l.Start() != 12 {
		t.Fatalf("lowering SetStart = %v, Start %d", err, l.Start())
	}
	if err := l.SetStart(24); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("SetStart above End = %v", err)
	}
	for _, r := range []*Log{openLog(t, "/p", Options{FS: fs.CrashClone()})} {
		if r.Start() != 12 || r.End() != 23 {
			t.Fatalf("after crash Start %d End %d, want 12 23", r.Start(), r.End())
		}
		if got := readAll(t, r); !bytes.Equal(got, m.bytes(12, 23)) {
			t.Fatal("data after SetStart and crash differs")
		}
	}
	if err := l.SetStart(23); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Read(23, 100, 100); err != nil || len(res.Chunks) != 0 {
		t.Fatalf("Read(End) = %+v, %v", res, err)
	}
	l.Close()
	r := openLog(t, "/p", Options{FS: fs})
	if r.Start() != 23 || r.End() != 23 {
		t.Fatalf("reopened Start %d End %d, want 23 23", r.Start(), r.End())
	}
}

// TestReadHeldAcrossRetention: a Chunk read before its segment is deleted stays readable for FileDeleteDelay;
// with no delay the reader gets an error it can retry.
func TestReadHeldAcrossRetention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fs    func(*testing.T) (vfs.FS, string)
		delay time.Duration
	}{{"mem", memDir, 0}, {"os", osDir, 0}, {"mem/no-delay", memDir, -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs, dir := tc.fs(t)
			l := openLog(t, dir, Options{FS: fs, SegmentBytes: 1000, FileDeleteDelay: tc.delay})
			var m model
			for i := range 12 {
				m.appendTo(t, l, mkBatch(0, int64(i), 200-batch.HeaderSize, byte(i)))
			}
			res, err := l.Read(0, 800, l.End())
			if err != nil {
				t.Fatal(err)
			}
			if err := l.SetStart(10); err != nil {
				t.Fatal(err)
			}
			if got := segmentFiles(t, fs, dir); len(got) != 1 || got[0] != 10 {
				t.Fatalf("segments %v, want [10]", got)
			}
			got, err := l.ReadBytes(res)
			if tc.delay < 0 {
				if err == nil {
					t.Fatal("read of a closed deleted segment succeeded")
				}
				return
			}
			if err != nil || !bytes.Equal(got, m.bytes(0, 4)) {
				t.Fatalf("ReadBytes after deletion = %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestConcurrentReadDuringRetention: readers chasing the log start while a writer appends and retention deletes
// either get ErrOffsetOutOfRange or exactly the right bytes.
func TestConcurrentReadDuringRetention(t *testing.T) {
	t.Parallel()
	const n = 1500
	want := make([][]byte, n)
	for i := range want {
		want[i] = mkBatch(0, int64(i), 100+i%100, byte(i))
	}
	l := openLog(t, "/p", Options{FS: vfs.NewMem(), SegmentBytes: 1000, RetentionBytes: 3000, RetentionMs: -1})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range n {
			if _, err := l.Append(bytes.Clone(want[i])); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		for {
			if _, err := l.EnforceRetention(time.Now()); err != nil {
				t.Error(err)
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	reads := make([]int, 2)
	for r := range reads {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := l.Read(l.Start(), 2000, l.End())
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue
				}
				got, err2 := l.ReadBytes(res)
				if err != nil || err2 != nil {
					t.Errorf("Read = %v, ReadBytes = %v", err, err2)
					return
				}
				for off := res.FirstOffset; off < res.NextOffset; off++ {
					w := want[off]
					if binary.BigEndian.Uint64(got) != uint64(off) || !bytes.Equal(got[8:len(w)], w[8:]) {
						t.Errorf("batch at offset %d differs", off)
						return
					}
					got = got[len(w):]
				}
				reads[r]++
			}
		})
	}
	wg.Wait()
	if l.Start() == 0 || l.End() != n {
		t.Fatalf("Start %d End %d: retention did not run", l.Start(), l.End())
	}
	t.Logf("reads: %v, start %d", reads, l.Start())
}
