package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// raftModel is the expected content of a raft log: entries[i] has raft index i+1, with its bytes as stored
// (base offset assigned) and its term.
type raftModel struct {
	entries [][]byte
	end     int64 // Kafka log end offset
}

// raftBatch is a data batch (lastDelta+1 records) or, with lastDelta < 0, an internal batch, at term.
func raftBatch(term int32, lastDelta int32, n int, fill byte) []byte {
	if lastDelta < 0 {
		return batch.NewInternal(term, bytes.Repeat([]byte{fill}, n))
	}
	b := mkBatch(lastDelta, int64(fill), n, fill)
	batch.SetPartitionLeaderEpoch(b, term)
	return b
}

func (m *raftModel) append(t testing.TB, l *Log, b []byte) {
	t.Helper()
	base, err := l.Append(b)
	if err != nil {
		t.Fatalf("Append (raft index %d): %v", len(m.entries)+1, err)
	}
	h, _ := batch.ParseHeader(b)
	if base != m.end {
		t.Fatalf("raft index %d got base offset %d, want %d", len(m.entries)+1, base, m.end)
	}
	m.entries = append(m.entries, bytes.Clone(b))
	m.end = h.LastOffset() + 1
}

// truncate cuts the model to raft indexes below i.
func (m *raftModel) truncate(i uint64) {
	m.entries = m.entries[:i-1]
	m.end = 0
	if n := len(m.entries); n > 0 {
		h, _ := batch.ParseHeader(m.entries[n-1])
		m.end = h.LastOffset() + 1
	}
}

// kafkaBytes is what Read must serve: the data batches only.
func (m *raftModel) kafkaBytes() []byte {
	var out []byte
	for _, b := range m.entries {
		if h, _ := batch.ParseHeader(b); !h.Internal() {
			out = append(out, b...)
		}
	}
	return out
}

// checkRaft asserts that l holds exactly the model: raft indexes, terms, offsets, the bytes by raft index
// (whole and in pieces bounded by maxBytes) and, through Read, the Kafka batches only.
func checkRaft(t testing.TB, l *Log, m *raftModel, rng *rand.Rand) {
	t.Helper()
	n := uint64(len(m.entries))
	if l.RaftStart() != 1 || l.RaftEnd() != n+1 || l.End() != m.end {
		t.Fatalf("RaftStart %d RaftEnd %d End %d; want 1, %d, %d", l.RaftStart(), l.RaftEnd(), l.End(), n+1, m.end)
	}
	for i := uint64(1); i <= n; i++ {
		h, _ := batch.ParseHeader(m.entries[i-1])
		if term, ok := l.RaftTerm(i); !ok || term != h.PartitionLeaderEpoch {
			t.Fatalf("RaftTerm(%d) = %d, %v; want %d", i, term, ok, h.PartitionLeaderEpoch)
		}
		if off, err := l.RaftOffset(i); err != nil || off != h.BaseOffset {
			t.Fatalf("RaftOffset(%d) = %d, %v; want %d", i, off, err, h.BaseOffset)
		}
	}
	if _, ok := l.RaftTerm(n + 1); ok {
		t.Fatalf("RaftTerm(%d) past the end is ok", n+1)
	}
	if off, err := l.RaftOffset(n + 1); err != nil || off != m.end {
		t.Fatalf("RaftOffset(end) = %d, %v; want %d", off, err, m.end)
	}
	if n > 0 {
		got, err := l.ReadRaft(1, n+1, 1<<40)
		if err != nil || len(got) != int(n) {
			t.Fatalf("ReadRaft(1, %d) = %d batches, %v", n+1, len(got), err)
		}
		for i, b := range got {
			if !bytes.Equal(b, m.entries[i]) {
				t.Fatalf("ReadRaft: index %d differs", i+1)
			}
		}
		for range 20 {
			lo := 1 + rng.Uint64N(n)
			hi := lo + 1 + rng.Uint64N(n+1-lo)
			maxBytes := rng.Uint64N(2000)
			got, err := l.ReadRaft(lo, hi, maxBytes)
			if err != nil || len(got) == 0 {
				t.Fatalf("ReadRaft(%d, %d, %d) = %d batches, %v", lo, hi, maxBytes, len(got), err)
			}
			var size uint64
			for j, b := range got {
				size += uint64(len(b))
				if !bytes.Equal(b, m.entries[lo-1+uint64(j)]) {
					t.Fatalf("ReadRaft(%d, %d, %d): index %d differs", lo, hi, maxBytes, lo+uint64(j))
				}
			}
			if len(got) > 1 && size > maxBytes || uint64(len(got)) > hi-lo {
				t.Fatalf("ReadRaft(%d, %d, %d) returned %d batches of %d bytes", lo, hi, maxBytes, len(got), size)
			}
			if next := lo + uint64(len(got)); next < hi && size+uint64(len(m.entries[next-1])) <= maxBytes {
				t.Fatalf("ReadRaft(%d, %d, %d) stopped at %d with room for the next batch", lo, hi, maxBytes, next)
			}
		}
	}
	if got := readAll(t, l); !bytes.Equal(got, m.kafkaBytes()) {
		t.Fatalf("Read serves %d bytes, want the %d of the Kafka batches only", len(got), len(m.kafkaBytes()))
	}
}

var raftOpts = Options{Raft: true, SegmentBytes: 1500, IndexIntervalBytes: 200, Fsync: FsyncNever, RetentionMs: -1}

func raftOptsOn(fs vfs.FS) Options {
	o := raftOpts
	o.FS = fs
	return o
}

// fillRaft appends n entries: about one in four internal, terms rising now and then, sizes varied so that
// segments roll with internal batches at their ends and starts.
func fillRaft(t testing.TB, l *Log, m *raftModel, rng *rand.Rand, term *int32, n int) {
	t.Helper()
	for range n {
		if rng.IntN(8) == 0 {
			*term++
		}
		delta := int32(rng.IntN(4))
		if rng.IntN(4) == 0 {
			delta = -1
		}
		m.append(t, l, raftBatch(*term, delta, 10+rng.IntN(300), byte(rng.IntN(256))))
	}
}

// TestRaftLogIndexes: raft indexes, terms (the leader-epoch cache), offsets and raft reads over many segments
// with internal batches among the Kafka ones, before and after recovery; Read serves only Kafka batches and
// Kafka offsets stay contiguous (internal batches take none).
func TestRaftLogIndexes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	fs := vfs.NewMem()
	l := openLog(t, "/p", raftOptsOn(fs))
	var m raftModel
	term := int32(1)
	checkRaft(t, l, &m, rng)
	fillRaft(t, l, &m, rng, &term, 200)
	if len(l.Segments()) < 5 {
		t.Fatalf("%d segments, want several", len(l.Segments()))
	}
	checkRaft(t, l, &m, rng)
	epochs := l.Epochs()
	if len(epochs) < 5 || epochs[0].FirstIndex != 1 || epochs[0].FirstOffset != 0 {
		t.Fatalf("leader-epoch cache %v", epochs)
	}
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	c := openLog(t, "/p", raftOptsOn(fs.CrashClone()))
	checkRaft(t, c, &m, rng)
	if got := c.Epochs(); fmt.Sprint(got) != fmt.Sprint(epochs) {
		t.Fatalf("recovered leader-epoch cache %v, want %v", got, epochs)
	}
	// Appends continue the recovered indexes.
	fillRaft(t, c, &m, rng, &term, 30)
	checkRaft(t, c, &m, rng)
}

// TestRaftReadSplitsAroundInternal: a Read over internal batches returns the Kafka batches around them, in
// separate chunks, and a Read starting at an internal batch's offset starts at the next Kafka batch.
func TestRaftReadSplitsAroundInternal(t *testing.T) {
	t.Parallel()
	l := openLog(t, "/p", raftOptsOn(vfs.NewMem()))
	var m raftModel
	a, in1, in2, b := raftBatch(1, 2, 50, 'a'), raftBatch(1, -1, 20, 'i'), raftBatch(2, -1, 20, 'j'), raftBatch(2, 0, 50, 'b')
	for _, x := range [][]byte{a, in1, in2, b} {
		m.append(t, l, x)
	}
	res, err := l.Read(0, 1<<20, l.End())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := l.ReadBytes(res)
	if len(res.Chunks) != 2 || !bytes.Equal(got, append(bytes.Clone(m.entries[0]), m.entries[3]...)) || res.NextOffset != 4 {
		t.Fatalf("Read = %d chunks, %d bytes, next %d; want the two Kafka batches in two chunks, next 4", len(res.Chunks), len(got), res.NextOffset)
	}
	res, err = l.Read(3, 1<<20, l.End())
	if got, _ := l.ReadBytes(res); err != nil || !bytes.Equal(got, m.entries[3]) || res.FirstOffset != 3 {
		t.Fatalf("Read(3) = %d bytes from %d, %v; want batch b", len(got), res.FirstOffset, err)
	}
	// The high watermark at 3 serves a, never the internal batches after it.
	res, _ = l.Read(0, 1<<20, 3)
	if got, _ := l.ReadBytes(res); !bytes.Equal(got, m.entries[0]) {
		t.Fatalf("Read up to 3 = %d bytes, want batch a", len(got))
	}
	if off, ok := l.OffsetForTime(0); !ok || off != 0 {
		t.Fatalf("OffsetForTime(0) = %d, %v", off, ok)
	}
	// TruncateTo(3) removes the internal batches at offset 3 with b: End() is 3 again.
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	m.truncate(2)
	checkRaft(t, l, &m, rand.New(rand.NewPCG(5, 5)))
}

// TestRaftTruncateToOffset: in a raft log over many segments, TruncateTo(offset) for batch-boundary offsets
// keeps exactly the entries whose base offset is below offset, wherever internal batches at that offset sit
// (before it in the same segment, at the end of the previous one); appends then continue.
func TestRaftTruncateToOffset(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	fs := vfs.NewMem()
	l := openLog(t, "/p", raftOptsOn(fs))
	var m raftModel
	term := int32(1)
	fillRaft(t, l, &m, rng, &term, 150)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for range 15 {
		i := rng.IntN(len(m.entries))
		h, _ := batch.ParseHeader(m.entries[i])
		offset := h.BaseOffset
		keep := 0
		for keep < len(m.entries) {
			if hh, _ := batch.ParseHeader(m.entries[keep]); hh.BaseOffset >= offset {
				break
			}
			keep++
		}
		c := openLog(t, "/p", raftOptsOn(fs.CrashClone()))
		if err := c.TruncateTo(offset); err != nil {
			t.Fatalf("TruncateTo(%d): %v", offset, err)
		}
		want := m
		want.entries = append([][]byte(nil), m.entries...)
		want.truncate(uint64(keep) + 1)
		checkRaft(t, c, &want, rng)
		t2 := term + 1
		fillRaft(t, c, &want, rng, &t2, 5)
		checkRaft(t, c, &want, rng)
		c.Close()
	}
}

// TestRaftLogRefusals: terms never decrease and a Kafka batch carrying the internal bit is refused, without
// harm; a raft log and a Kafka log cannot be opened as each other; compaction is refused.
func TestRaftLogRefusals(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/p", raftOptsOn(fs))
	var m raftModel
	m.append(t, l, raftBatch(3, 0, 30, 'a'))
	if _, err := l.Append(raftBatch(2, 0, 30, 'b')); !errors.Is(err, ErrTerm) {
		t.Fatalf("Append at a lower term: %v, want ErrTerm", err)
	}
	if _, err := l.Append(raftBatch(-1, 0, 30, 'b')); !errors.Is(err, ErrTerm) {
		t.Fatalf("Append at term -1: %v, want ErrTerm", err)
	}
	bad := raftBatch(3, 0, 30, 'c')
	bad[21] |= 0x40 // attribute bit 14 on a batch with a record
	bad[17], bad[18], bad[19], bad[20] = 0, 0, 0, 0
	if _, err := l.Append(bad); err == nil {
		t.Fatal("a Kafka batch with the internal bit was appended")
	}
	m.append(t, l, raftBatch(3, -1, 5, 'i'))
	checkRaft(t, l, &m, rand.New(rand.NewPCG(3, 3)))
	if err := l.ReplaceSegment(0, func(func([]byte) error) error { return nil }); !errors.Is(err, ErrNotRaft) {
		t.Fatalf("ReplaceSegment on a raft log: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("/p", Options{FS: fs}); !errors.Is(err, ErrNotRaft) {
		t.Fatalf("raft log opened as a Kafka log: %v, want ErrNotRaft", err)
	}
	k := openLog(t, "/k", Options{FS: fs})
	if _, err := k.Append(mkBatch(0, 1, 10, 'k')); err != nil {
		t.Fatal(err)
	}
	k.Close()
	if _, err := Open("/k", raftOptsOn(fs)); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Kafka log opened as a raft log: %v, want ErrCorruption", err)
	}
	if _, err := k.ReadRaft(1, 2, 100); !errors.Is(err, ErrNotRaft) {
		t.Fatalf("ReadRaft on a Kafka log: %v", err)
	}
}

// TestTruncateTo on a Kafka log: inside the active segment, at a segment boundary, deep in an older segment;
// appends then reuse the offsets; an offset inside a batch or out of range is refused.
func TestTruncateTo(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	o := Options{FS: fs, SegmentBytes: 1000, IndexIntervalBytes: 128}
	l := openLog(t, "/p", o)
	var m model
	for i := range 60 {
		m.appendTo(t, l, mkBatch(int32(i%3), int64(i), 50+(i*37)%200, byte(i)))
	}
	if err := l.TruncateTo(m.batches[10].base + 1); err == nil || m.batches[10].last == m.batches[10].base {
		t.Fatalf("TruncateTo inside a batch: %v", err)
	}
	if err := l.TruncateTo(l.End() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("TruncateTo past the end: %v", err)
	}
	segs := l.Segments()
	boundary := m.find(segs[2].Base)
	for _, cut := range []int{55, boundary, 7} {
		if err := l.TruncateTo(m.batches[cut].base); err != nil {
			t.Fatalf("TruncateTo(%d): %v", m.batches[cut].base, err)
		}
		m.batches = m.batches[:cut]
		checkHolds(t, l, &m, 0, cut)
		for i := range 5 {
			m.appendTo(t, l, mkBatch(1, 100, 80+i*10, byte(200+i)))
		}
		checkHolds(t, l, &m, 0, len(m.batches))
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		checkHolds(t, openLog(t, "/p", Options{FS: fs.CrashClone(), SegmentBytes: 1000}), &m, 0, len(m.batches))
	}
	if err := l.TruncateTo(l.End()); err != nil {
		t.Fatalf("TruncateTo(End): %v", err)
	}
}

// TestTruncateLowersDurable: after TruncateTo the durable end is the cut, and WaitDurable for re-appended
// offsets waits for their own fsync: when that fsync fails, it returns the error, never nil.
func TestTruncateLowersDurable(t *testing.T) {
	t.Parallel()
	failSync := false
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op, name string) error {
		if failSync && op == vfs.OpSync && strings.HasSuffix(name, logSuffix) {
			return errors.New("injected fsync failure")
		}
		return nil
	})
	l := openLog(t, "/p", Options{FS: fs})
	for i := range 10 {
		if _, err := l.Append(mkBatch(0, int64(i), 40, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitDurable(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if l.DurableEnd() != 4 || l.End() != 4 {
		t.Fatalf("after TruncateTo(4): DurableEnd %d End %d", l.DurableEnd(), l.End())
	}
	failSync = true
	if _, err := l.Append(mkBatch(2, 50, 40, 'z')); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(context.Background(), 7); err == nil {
		t.Fatal("WaitDurable for re-appended offsets returned nil although their fsync failed")
	}
	if err := l.Close(); err == nil {
		t.Fatal("Close after a failed fsync returned nil")
	}
}

// TestTruncateCrashAtEveryStep: a power loss before each file-system operation of TruncateToIndex (and after
// it returns, with new entries appended and SyncData called) recovers a raft log that holds a prefix of the
// old log at least up to the cut — or, once the new entries were synced, exactly the cut prefix plus them.
// Cuts inside the active segment, at a segment's first batch and deep in an older segment.
func TestTruncateCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	for _, cutAt := range []string{"active", "segment start", "old segment"} {
		var sawOld, sawCut bool
		for step := 1; ; step++ {
			mem := vfs.NewMem()
			cp := &crashPoint{mem: mem, step: step}
			efs := cp.fs()
			rng := rand.New(rand.NewPCG(7, 7))
			l := openLog(t, "/p", raftOptsOn(efs))
			var m raftModel
			term := int32(1)
			fillRaft(t, l, &m, rng, &term, 80)
			if err := l.SyncData(); err != nil {
				t.Fatal(err)
			}
			old := m
			old.entries = append([][]byte(nil), m.entries...)
			segs := l.Segments()
			var cut uint64
			switch cutAt {
			case "active":
				cut = l.RaftEnd() - 3
			case "segment start":
				cut = l.segs[len(segs)-2].r.base
			default:
				cut = l.segs[1].r.base + 2
			}
			cp.count(true)
			if err := l.TruncateToIndex(cut); err != nil {
				t.Fatalf("%s: TruncateToIndex(%d): %v", cutAt, cut, err)
			}
			m.truncate(cut)
			term++
			fillRaft(t, l, &m, rng, &term, 12)
			if err := l.SyncData(); err != nil {
				t.Fatal(err)
			}
			cp.count(false)
			checkRaft(t, l, &m, rng)
			clone := cp.taken()
			done := clone == nil
			if done {
				clone = mem.CrashClone()
			}
			c := openLog(t, "/p", raftOptsOn(clone))
			end := c.RaftEnd() - 1
			// What may survive: a prefix of the old log, or (once a roll or SyncData fsynced some new
			// entries) the cut log plus a prefix of the new entries; always at least the entries below the cut.
			var want raftModel
			for _, cand := range []raftModel{old, m} {
				if end >= cut-1 && end <= uint64(len(cand.entries)) {
					got, err := c.ReadRaft(1, end+1, 1<<40)
					if err == nil && len(got) == int(end) && bytes.Equal(bytes.Join(got, nil), bytes.Join(cand.entries[:end], nil)) {
						want = cand
						want.entries = append([][]byte(nil), cand.entries...)
						want.truncate(end + 1)
						break
					}
				}
			}
			switch {
			case want.entries == nil:
				t.Fatalf("%s: crash before operation %d: recovered raft log of %d entries is neither a prefix of the old log (%d entries) nor of the truncated one, from %d on", cutAt, step, end, len(old.entries), cut-1)
			case done && end != uint64(len(m.entries)):
				t.Fatalf("%s: after SyncData returned, a crash recovers %d entries, want %d", cutAt, end, len(m.entries))
			}
			checkRaft(t, c, &want, rng)
			sawOld = sawOld || end == uint64(len(old.entries)) && !done
			sawCut = sawCut || done
			c.Close()
			l.Close()
			if done {
				break
			}
		}
		if !sawOld || !sawCut {
			t.Fatalf("%s: crash points covered the old log %v, the cut log %v; want both", cutAt, sawOld, sawCut)
		}
	}
}

// TestTruncateKeepsHeldChunks: a reader holding a Chunk of a segment removed by truncation keeps reading its
// old bytes, and a segment later created under the same name is not what it reads.
func TestTruncateKeepsHeldChunks(t *testing.T) {
	t.Parallel()
	l := openLog(t, "/p", Options{FS: vfs.NewMem(), SegmentBytes: 600})
	var m model
	for i := range 20 {
		m.appendTo(t, l, mkBatch(0, int64(i), 150, byte(i)))
	}
	last := l.Segments()[len(l.Segments())-2]
	held, err := l.Read(last.Base, 1<<20, last.End)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := l.ReadBytes(held)
	if err := l.TruncateTo(last.Base - 1); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := l.Append(mkBatch(0, 99, 150, byte(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := l.ReadBytes(held); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("held chunk reads %d bytes, %v; want the %d old ones", len(got), err, len(want))
	}
}

// FuzzRecoverRaft feeds arbitrary bytes to a raft log's recovery as its only segment (raft index 1 on): Open
// must never panic and either fail with ErrCorruption or recover whole valid batches (Kafka and internal,
// terms never decreasing) numbered without gaps, one raft index each, of which Read serves the Kafka ones;
// a second recovery gives the same log.
func FuzzRecoverRaft(f *testing.F) {
	var whole []byte
	var end int64
	for i, x := range [][]byte{raftBatch(1, 2, 20, 'a'), raftBatch(1, -1, 5, 'i'), raftBatch(2, -1, 0, 'j'), raftBatch(2, 0, 30, 'b')} {
		batch.SetBaseOffset(x, end)
		h, _ := batch.ParseHeader(x)
		end = h.LastOffset() + 1
		whole = append(whole, x...)
		f.Add(bytes.Clone(whole))
		f.Add(bytes.Clone(whole[:len(whole)-3]))
		if i == 2 {
			down := bytes.Clone(whole)
			batch.SetPartitionLeaderEpoch(down[len(down)-len(x):], 0)
			f.Add(down)
		}
	}
	f.Fuzz(func(t *testing.T, seg []byte) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/p", 0o755); err != nil {
			t.Fatal(err)
		}
		writeFileAt(t, fs, createFile(t, fs, segPath("/p", 0, logSuffix)), seg, 0)
		if err := writeChecked(fs, segPath("/p", 0, raftSuffix), "raft index", 1); err != nil {
			t.Fatal(err)
		}
		l, err := Open("/p", raftOptsOn(fs))
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("Open: %v, want nil or ErrCorruption", err)
			}
			return
		}
		n := l.RaftEnd() - 1
		var m raftModel
		if n > 0 {
			got, err := l.ReadRaft(1, n+1, 1<<40)
			if err != nil || uint64(len(got)) != n {
				t.Fatalf("ReadRaft: %d of %d batches, %v", len(got), n, err)
			}
			if !bytes.HasPrefix(seg, bytes.Join(got, nil)) {
				t.Fatal("recovered batches are not a prefix of the segment")
			}
			for _, b := range got {
				h, err := batch.ParseHeader(b)
				if err != nil || h.CheckRaft() != nil || batch.CheckCRC(b) != nil || h.BaseOffset != m.end {
					t.Fatalf("recovered batch at %d: %v", h.BaseOffset, err)
				}
				m.entries = append(m.entries, b)
				m.end = h.LastOffset() + 1
			}
		}
		checkRaft(t, l, &m, rand.New(rand.NewPCG(uint64(len(seg)), 1)))
		l.Close()
		checkRaft(t, openLog(t, "/p", raftOptsOn(fs)), &m, rand.New(rand.NewPCG(1, 1)))
	})
}
