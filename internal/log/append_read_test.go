package log

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestAppendReadAcrossRolls is a conformance test: the same workload on both file systems and two segment sizes
// must read back byte for byte, batch by batch and as a whole.
func TestAppendReadAcrossRolls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		fs       func(t *testing.T) (vfs.FS, string)
		segBytes int64
	}{
		{"mem/small", memDir, 1000},
		{"mem/large", memDir, 1 << 20},
		{"os/small", osDir, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs, dir := tc.fs(t)
			l := openLog(t, dir, Options{FS: fs, SegmentBytes: tc.segBytes, IndexIntervalBytes: 300})
			var m model
			for i := range 300 {
				m.appendTo(t, l, mkBatch(int32(i%5), int64(1000+i), 40+(i*37)%360, byte(i)))
			}
			checkHolds(t, l, &m, 0, len(m.batches))
			checkSegments(t, fs, dir, &m, tc.segBytes)
			var size int64
			for _, s := range m.batches {
				size += int64(len(s.b))
			}
			if l.Size() != size {
				t.Fatalf("Size = %d, want %d", l.Size(), size)
			}
			// Every offset, including those inside a batch, reads back exactly the batch holding it.
			for i, s := range m.batches {
				for off := s.base; off <= s.last; off++ {
					res, err := l.Read(off, 1, l.End())
					if err != nil {
						t.Fatal(err)
					}
					got, err := l.ReadBytes(res)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, s.b) || res.FirstOffset != s.base || res.NextOffset != s.last+1 {
						t.Fatalf("Read(%d): first %d next %d, %d bytes; want batch %d [%d,%d]", off,
							res.FirstOffset, res.NextOffset, len(got), i, s.base, s.last)
					}
				}
			}
		})
	}
}

func memDir(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/data/topic-0" }
func osDir(t *testing.T) (vfs.FS, string)  { return vfs.OS, filepath.Join(t.TempDir(), "topic-0") }

// checkSegments asserts the segment files start where a roll was due: each segment is within segBytes unless it
// holds a single batch, and adding the next segment's first batch would have exceeded segBytes.
func checkSegments(t *testing.T, fs vfs.FS, dir string, m *model, segBytes int64) {
	t.Helper()
	var want []int64
	var size int64
	for i, s := range m.batches {
		if i == 0 || size+int64(len(s.b)) > segBytes {
			want = append(want, s.base)
			size = 0
		}
		size += int64(len(s.b))
	}
	got := segmentFiles(t, fs, dir)
	if len(got) != len(want) {
		t.Fatalf("%d segments %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("segment %d base %d, want %d", i, got[i], want[i])
		}
	}
}

// TestReadBoundaries pins upTo, maxBytes, KIP-74 and offset range handling on a four-batch log:
// A = offsets 0-2 (161 bytes), B = 3 (261), C = 4-8 (361), D = 9 (161).
func TestReadBoundaries(t *testing.T) {
	t.Parallel()
	l := openLog(t, "/p", Options{FS: vfs.NewMem()})
	var m model
	for _, b := range [][]byte{mkBatch(2, 1, 100, 'a'), mkBatch(0, 2, 200, 'b'), mkBatch(4, 3, 300, 'c'), mkBatch(0, 4, 100, 'd')} {
		m.appendTo(t, l, b)
	}
	for _, tc := range []struct {
		offset   int64
		maxBytes int
		upTo     int64
		from, to int // batches [from, to) expected; from == to means no chunks
		next     int64
	}{
		{0, 10000, 10, 0, 4, 10},
		{0, 10000, 9, 0, 3, 9}, // D's last offset 9 >= upTo
		{0, 10000, 8, 0, 2, 4}, // C's last offset 8 >= upTo
		{0, 10000, 4, 0, 2, 4},
		{5, 10000, 10, 2, 4, 10},        // offset inside C returns C from its base
		{0, 161 + 261 - 1, 10, 0, 1, 3}, // B would exceed maxBytes
		{0, 161 + 261, 10, 0, 2, 4},     // exactly fits
		{4, 10, 10, 2, 3, 9},            // KIP-74: first batch whole even above maxBytes
		{4, 0, 10, 2, 3, 9},
		{4, 10, 8, 2, 2, 4},       // first batch not below upTo: nothing
		{3, 10000, 3, 1, 1, 3},    // offset >= upTo
		{10, 10000, 99, 4, 4, 10}, // offset == End
	} {
		res, err := l.Read(tc.offset, tc.maxBytes, tc.upTo)
		if err != nil {
			t.Fatalf("Read(%d, %d, %d): %v", tc.offset, tc.maxBytes, tc.upTo, err)
		}
		got, _ := l.ReadBytes(res)
		want := m.bytes(tc.from, tc.to)
		if !bytes.Equal(got, want) || res.NextOffset != tc.next {
			t.Errorf("Read(%d, %d, %d) = %d bytes next %d, want batches [%d,%d) = %d bytes next %d",
				tc.offset, tc.maxBytes, tc.upTo, len(got), res.NextOffset, tc.from, tc.to, len(want), tc.next)
		}
		if tc.from < tc.to && (res.FirstOffset != m.batches[tc.from].base || len(res.Chunks) != 1 ||
			res.Chunks[0].Pos != int64(len(m.bytes(0, tc.from))) || res.Chunks[0].Size != int64(len(want))) {
			t.Errorf("Read(%d, %d, %d) = %+v", tc.offset, tc.maxBytes, tc.upTo, res)
		}
		if tc.from == tc.to && (len(res.Chunks) != 0 || res.FirstOffset != tc.offset) {
			t.Errorf("empty Read(%d, %d, %d) = %+v", tc.offset, tc.maxBytes, tc.upTo, res)
		}
	}
	for _, off := range []int64{-1, 11, 1 << 40} {
		if _, err := l.Read(off, 100, 100); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("Read(%d) = %v, want ErrOffsetOutOfRange", off, err)
		}
	}
}

// TestAppendRejectsMalformed: a bad header is refused without becoming sticky.
func TestAppendRejectsMalformed(t *testing.T) {
	t.Parallel()
	l := openLog(t, "/p", Options{FS: vfs.NewMem()})
	good := mkBatch(0, 1, 10, 'x')
	for name, b := range map[string][]byte{
		"short":     good[:40],
		"length":    append(mkBatch(0, 1, 10, 'x'), 0),
		"magic":     func() []byte { b := mkBatch(0, 1, 10, 'x'); b[16] = 1; return b }(),
		"lastDelta": mkBatch(-1, 1, 10, 'x'),
		"truncated": good[:len(good)-1],
	} {
		if _, err := l.Append(b); err == nil {
			t.Errorf("%s: Append accepted a malformed batch", name)
		}
	}
	if base, err := l.Append(good); err != nil || base != 0 || l.End() != 1 {
		t.Fatalf("Append after rejects = %d, %v; End %d", base, err, l.End())
	}
}

// TestSegmentMsRoll: a segment whose first batch is older than SegmentMs rolls on the next append.
func TestSegmentMsRoll(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/p", Options{FS: fs, SegmentMs: 60_000})
	now := time.Now().UnixMilli()
	var m model
	m.appendTo(t, l, mkBatch(0, now-120_000, 10, 'a')) // old: the next append rolls
	m.appendTo(t, l, mkBatch(0, now, 10, 'b'))
	m.appendTo(t, l, mkBatch(0, now, 10, 'c')) // segment 1 is fresh: no roll
	if got := segmentFiles(t, fs, "/p"); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("segments %v, want [0 1]", got)
	}
	checkHolds(t, l, &m, 0, 3)
}
