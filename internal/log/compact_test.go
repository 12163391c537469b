package log

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// cleanedCopy is what a cleaner could make of segment s: one empty batch covering all its offsets but the last
// batch's, then that last batch as it was.
func cleanedCopy(t *testing.T, m *model, s SegmentInfo) []byte {
	t.Helper()
	last := m.batches[m.find(s.End-1)]
	empty := batch.EncodeRetained(batch.Header{BaseOffset: s.Base, LastOffsetDelta: int32(last.base - 1 - s.Base),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, nil)
	return append(empty, last.b...)
}

func replaceWith(l *Log, base int64, b []byte) error {
	return l.ReplaceSegment(base, func(add func([]byte) error) error {
		_, err := batch.Iterate(b, func(_ batch.Header, one []byte) bool { return add(one) == nil })
		return err
	})
}

// readRange returns the bytes of the batches with last offsets in [from, to).
func readRange(t *testing.T, l *Log, from, to int64) []byte {
	t.Helper()
	res, err := l.Read(from, 1<<30, to)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.ReadBytes(res)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplaceSegmentCrashAtEveryStep: a power loss before each file-system operation of ReplaceSegment (and
// after it returns) recovers segment 0 to exactly its old or its new contents, the rest of the log intact,
// with no .cleaned file left behind; once ReplaceSegment returned, always the new one. A reader holding a
// Chunk of the old segment keeps reading the old bytes.
func TestReplaceSegmentCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	var sawOld, sawNew bool
	for step := 1; ; step++ {
		mem := vfs.NewMem()
		cp := &crashPoint{mem: mem, step: step}
		efs := cp.fs()
		l := openLog(t, "/d/t-0", Options{FS: efs, SegmentBytes: 2000, IndexIntervalBytes: 256})
		var m model
		for i := range 30 {
			m.appendTo(t, l, mkBatch(1, int64(i), 200, byte(i)))
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		segs := l.Segments()
		s0 := segs[0]
		old, rest := readRange(t, l, 0, s0.End), readRange(t, l, s0.End, l.End())
		neu := cleanedCopy(t, &m, s0)
		held, _ := l.Read(0, 1<<30, s0.End)
		cp.count(true)
		if err := replaceWith(l, s0.Base, neu); err != nil {
			t.Fatal(err)
		}
		cp.count(false)
		clone := cp.taken()
		done := clone == nil // every operation passed: crash after the return
		if done {
			clone = mem.CrashClone()
		}
		if got := readRange(t, l, 0, s0.End); !bytes.Equal(got, neu) {
			t.Fatalf("step %d: live log reads %d bytes for segment 0, want the %d new ones", step, len(got), len(neu))
		}
		if step == 1 {
			if b, err := l.ReadBytes(held); err != nil || !bytes.Equal(b, old) {
				t.Fatalf("a Chunk held across the swap read %d bytes, %v; want the old %d", len(b), err, len(old))
			}
		}
		c := openLog(t, "/d/t-0", Options{FS: clone, SegmentBytes: 2000, IndexIntervalBytes: 256})
		got := readRange(t, c, 0, s0.End)
		switch {
		case bytes.Equal(got, old):
			sawOld = true
			if done {
				t.Fatalf("after ReplaceSegment returned, a power cut recovers the old segment")
			}
		case bytes.Equal(got, neu):
			sawNew = true
		default:
			t.Fatalf("crash before operation %d: segment 0 recovers to %d bytes, neither old (%d) nor new (%d)", step, len(got), len(old), len(neu))
		}
		if r := readRange(t, c, s0.End, c.End()); !bytes.Equal(r, rest) || c.End() != l.End() {
			t.Fatalf("crash before operation %d: the other segments changed (end %d, want %d)", step, c.End(), l.End())
		}
		ents, _ := clone.ReadDir("/d/t-0")
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), cleanedSuffix) {
				t.Fatalf("crash before operation %d: %s left after recovery", step, e.Name())
			}
		}
		c.Close()
		l.Close()
		if done {
			break
		}
	}
	if !sawOld || !sawNew {
		t.Fatalf("crash points covered old %v, new %v; want both", sawOld, sawNew)
	}
}

// TestReplaceSegmentRefusesGaps: contents that do not cover the segment's offsets contiguously are refused and
// the segment is left as it was; the active segment cannot be replaced.
func TestReplaceSegmentRefusesGaps(t *testing.T) {
	t.Parallel()
	l := openLog(t, "/d/t-0", Options{FS: vfs.NewMem(), SegmentBytes: 2000})
	var m model
	for i := range 30 {
		m.appendTo(t, l, mkBatch(1, int64(i), 200, byte(i)))
	}
	segs := l.Segments()
	s0 := segs[0]
	old := readRange(t, l, 0, s0.End)
	last := m.batches[m.find(s0.End-1)]
	if err := replaceWith(l, s0.Base, last.b); err == nil { // starts at the last batch: a gap from the base
		t.Fatal("a replacement with a gap was accepted")
	}
	if err := replaceWith(l, s0.Base, m.batches[0].b); err == nil { // ends early
		t.Fatal("a replacement ending early was accepted")
	}
	if got := readRange(t, l, 0, s0.End); !bytes.Equal(got, old) {
		t.Fatal("a refused replacement changed the segment")
	}
	if err := replaceWith(l, segs[len(segs)-1].Base, nil); err != ErrSegmentGone {
		t.Fatalf("replacing the active segment: %v, want ErrSegmentGone", err)
	}
}
