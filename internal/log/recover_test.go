package log

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// fillSegments appends n batches of 161-261 bytes with 1000-byte segments and closes the log.
func fillSegments(t *testing.T, fs vfs.FS, dir string, n int) *model {
	t.Helper()
	l, err := Open(dir, Options{FS: fs, SegmentBytes: 1000, IndexIntervalBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	var m model
	for i := range n {
		m.appendTo(t, l, mkBatch(int32(i%3), int64(100+i), 100+(i%2)*100, byte(i)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestReopenRebuildsIndexes(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	m := fillSegments(t, fs, "/p", 40)
	bases := segmentFiles(t, fs, "/p")
	want := map[string][]byte{}
	for _, b := range bases {
		for _, suf := range []string{indexSuffix, timeIndexSuffix} {
			want[segPath("/p", b, suf)] = fileBytes(t, fs, segPath("/p", b, suf))
		}
	}
	if len(want[segPath("/p", bases[0], indexSuffix)]) == 0 || len(want[segPath("/p", bases[0], timeIndexSuffix)]) == 0 {
		t.Fatal("expected non-empty indexes with a 200-byte interval")
	}
	// Damage every kind of way: delete, truncate, garble.
	for i, b := range bases {
		name := segPath("/p", b, indexSuffix)
		switch i % 3 {
		case 0:
			if err := fs.Remove(name); err != nil {
				t.Fatal(err)
			}
			if err := fs.Remove(segPath("/p", b, timeIndexSuffix)); err != nil {
				t.Fatal(err)
			}
		case 1:
			writeFileAt(t, fs, name, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 0)
		case 2:
			writeFileAt(t, fs, segPath("/p", b, timeIndexSuffix), make([]byte, 30), 100)
		}
	}
	l := openLog(t, "/p", Options{FS: fs, SegmentBytes: 1000, IndexIntervalBytes: 200})
	checkHolds(t, l, m, 0, len(m.batches))
	for i, s := range m.batches {
		res, err := l.Read(s.last, 1, l.End())
		if err != nil || res.FirstOffset != s.base || res.NextOffset != s.last+1 {
			t.Fatalf("Read(%d) = %+v, %v; want batch %d", s.last, res, err, i)
		}
	}
	for name, b := range want {
		if got := fileBytes(t, fs, name); !bytes.Equal(got, b) {
			t.Errorf("%s rebuilt as %x, want %x", name, got, b)
		}
	}
}

// TestTornTailTruncated: garbage after the last whole batch (half a batch) is cut off exactly.
func TestTornTailTruncated(t *testing.T) {
	t.Parallel()
	for name, garbage := range map[string][]byte{
		"half-batch": mkBatch(0, 9, 300, 'z')[:180],
		"junk":       bytes.Repeat([]byte{0xab}, 150),
		"few-bytes":  {0, 0, 7},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs := vfs.NewMem()
			l := openLog(t, "/p", Options{FS: fs})
			var m model
			for i := range 3 {
				m.appendTo(t, l, mkBatch(1, int64(i), 200, byte(i)))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			logName := segPath("/p", 0, logSuffix)
			size := int64(len(m.bytes(0, 3)))
			writeFileAt(t, fs, logName, garbage, size)
			var logBuf bytes.Buffer
			l = openLog(t, "/p", Options{FS: fs, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
			if w := fmt.Sprintf("offset=6 pos=%d", size); !strings.Contains(logBuf.String(), w) {
				t.Errorf("warning %q does not name %q", logBuf.String(), w)
			}
			if l.End() != 6 {
				t.Fatalf("End = %d, want 6 (after batch 3)", l.End())
			}
			if got := int64(len(fileBytes(t, fs, logName))); got != size {
				t.Fatalf("file is %d bytes, want %d", got, size)
			}
			checkHolds(t, l, &m, 0, 3)
			if base, err := l.Append(mkBatch(0, 9, 10, 'n')); err != nil || base != 6 {
				t.Fatalf("Append after recovery = %d, %v", base, err)
			}
		})
	}
}

// TestCorruptionInMiddleSegmentReported: a flipped bit anywhere but the last segment fails Open with a
// CorruptionError naming the file and the batch position, and no file is changed.
func TestCorruptionInMiddleSegmentReported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		seg    int // index into the segment list
		batch  int // index of the batch inside the segment
		offset int // byte inside the batch
	}{
		{"payload", 3, 1, 100},
		{"crc-field", 3, 0, 18},
		{"base-offset-not-covered-by-crc", 2, 1, 7},
		{"length", 1, 0, 11},
		{"first-segment", 0, 0, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := vfs.NewMem()
			m := fillSegments(t, fs, "/p", 40)
			bases := segmentFiles(t, fs, "/p")
			if len(bases) < 5 {
				t.Fatalf("only %d segments", len(bases))
			}
			name := segPath("/p", bases[tc.seg], logSuffix)
			first := m.find(bases[tc.seg])
			pos := int64(len(m.bytes(first, first+tc.batch)))
			orig := fileBytes(t, fs, name)
			damaged := bytes.Clone(orig)
			damaged[pos+int64(tc.offset)] ^= 0x10
			writeFileAt(t, fs, name, damaged, 0)

			_, err := Open("/p", Options{FS: fs, SegmentBytes: 1000})
			var ce *CorruptionError
			if !errors.Is(err, ErrCorruption) || !errors.As(err, &ce) {
				t.Fatalf("Open = %v, want ErrCorruption", err)
			}
			if ce.File != name || ce.Pos != pos {
				t.Fatalf("corruption reported in %s at %d, want %s at %d (%v)", ce.File, ce.Pos, name, pos, err)
			}
			if got := fileBytes(t, fs, name); !bytes.Equal(got, damaged) {
				t.Fatal("Open changed the damaged segment")
			}
			if got := segmentFiles(t, fs, "/p"); len(got) != len(bases) {
				t.Fatalf("segments %v after failed Open, want %v", got, bases)
			}
		})
	}
}

// TestCorruptLastBatchTruncated: a flipped bit in the last batch of the last segment truncates at that batch.
func TestCorruptLastBatchTruncated(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	m := fillSegments(t, fs, "/p", 40)
	bases := segmentFiles(t, fs, "/p")
	lastBase := bases[len(bases)-1]
	name := segPath("/p", lastBase, logSuffix)
	n := len(m.batches)
	pos := int64(len(m.bytes(m.find(lastBase), n-1)))
	writeFileAt(t, fs, name, []byte{0xee}, pos+80)

	l := openLog(t, "/p", Options{FS: fs, SegmentBytes: 1000})
	if l.End() != m.batches[n-1].base {
		t.Fatalf("End = %d, want %d (the corrupt batch's base)", l.End(), m.batches[n-1].base)
	}
	if got := int64(len(fileBytes(t, fs, name))); got != pos {
		t.Fatalf("last segment is %d bytes, want %d", got, pos)
	}
	checkHolds(t, l, m, 0, n-1)
}

// TestSegmentGapReported: offsets that do not continue across segments are corruption, even at the last one.
func TestSegmentGapReported(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"middle", "last"} {
		t.Run(which, func(t *testing.T) {
			t.Parallel()
			fs := vfs.NewMem()
			fillSegments(t, fs, "/p", 40)
			bases := segmentFiles(t, fs, "/p")
			gone := bases[2]
			if which == "last" {
				gone = bases[len(bases)-2]
			}
			if err := removeSegmentFiles(fs, "/p", gone); err != nil {
				t.Fatal(err)
			}
			if _, err := Open("/p", Options{FS: fs}); !errors.Is(err, ErrCorruption) {
				t.Fatalf("Open with segment %d missing = %v, want ErrCorruption", gone, err)
			}
		})
	}
}

func TestCorruptStartFileReported(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/p", Options{FS: fs})
	for i := range 3 {
		if _, err := l.Append(mkBatch(0, int64(i), 10, 'x')); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetStart(2); err != nil {
		t.Fatal(err)
	}
	l.Close()
	writeFileAt(t, fs, "/p/"+startFile, []byte{0x40}, 5)
	if _, err := Open("/p", Options{FS: fs}); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Open = %v, want ErrCorruption", err)
	}
}
