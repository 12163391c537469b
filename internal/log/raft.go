package log

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/kawa-broker/kawa/internal/batch"
)

// A raft log (Options.Raft) is a partition log that is also one raft group's log (internal/replica): every
// batch is one raft entry, raft indexes are contiguous and count every batch, and the raft term is the
// batch's partitionLeaderEpoch (outside the CRC). Entries that are not Kafka data are internal batches
// (batch.NewInternal, attribute bit 14): their base offset is the next offset to assign and they take none
// (lastOffsetDelta -1), so Kafka offsets stay contiguous; they are kept out of the offset and time indexes
// and Read never returns them.
//
// On disk a raft log differs from a Kafka log only by the internal batches and one file per segment,
// <base>.raft (the checked-number format of startfile.go), holding the raft index of the segment's first
// batch, written durably before the segment's .log file is created. Everything else is rebuilt by the
// recovery scan: the per-segment sparse raft index (relative raft index uint32, position uint32, one entry per
// IndexIntervalBytes, in memory only) and the leader-epoch cache (Epochs).

// Errors of the raft methods.
var (
	// ErrNotRaft: a raft method on a log opened without Options.Raft.
	ErrNotRaft = errors.New("log: not a raft log (Options.Raft)")
	// ErrIndexOutOfRange: a raft index outside [RaftStart(), RaftEnd()] (or RaftEnd() where a batch is needed).
	ErrIndexOutOfRange = errors.New("log: raft index out of range")
	// ErrTerm: a batch whose partitionLeaderEpoch (its raft term) is negative or below the log's last term.
	ErrTerm = errors.New("log: raft term out of order")
)

// raftSeg holds a segment's raft indexes.
type raftSeg struct {
	base  uint64 // raft index of the segment's first batch (its .raft file); fixed at creation
	end   uint64 // (mu) raft index after the segment's last batch
	idx   []byte // (mu) sparse raft index, entries as the offset index's: (index-base uint32, position uint32)
	since int64  // (w) bytes since the last idx entry
}

// note records the batch at pos as raft index r.end. Like segment.noteBatch, it is the only place entries
// are decided, so recovery rebuilds what Append built.
func (r *raftSeg) note(pos int64, h batch.Header, interval int64) {
	if r.since >= interval {
		r.idx = appendOffEntry(r.idx, uint32(r.end-r.base), uint32(pos))
		r.since = 0
	}
	r.since += int64(h.Size())
	r.end++
}

// EpochRun is one entry of a raft log's leader-epoch cache, Kafka's leader-epoch-checkpoint shape plus the
// raft index: the batches from raft index FirstIndex (and Kafka offset FirstOffset) on carry
// partitionLeaderEpoch Term, up to the next run.
type EpochRun struct {
	Term        int32
	FirstIndex  uint64
	FirstOffset int64
}

// noteEpochLocked extends the leader-epoch cache with the batch h at raft index i (Append and recovery, with
// mu held or the log not yet shared).
func (l *Log) noteEpochLocked(h batch.Header, i uint64) {
	if n := len(l.epochs); n == 0 || l.epochs[n-1].Term != h.PartitionLeaderEpoch {
		l.epochs = append(l.epochs, EpochRun{Term: h.PartitionLeaderEpoch, FirstIndex: i, FirstOffset: h.BaseOffset})
	}
}

// checkTerm refuses a batch whose term is negative or below the log's last term (raft terms never decrease
// along a log). The writer holds wmu, which every change of epochs holds too.
func (l *Log) checkTerm(h batch.Header) error {
	last := int32(0)
	if n := len(l.epochs); n > 0 {
		last = l.epochs[n-1].Term
	}
	if h.PartitionLeaderEpoch < 0 || h.PartitionLeaderEpoch < last {
		return fmt.Errorf("%w: batch term %d after term %d", ErrTerm, h.PartitionLeaderEpoch, last)
	}
	return nil
}

// parseHeaderFor is parseHeader with the raft log's rules (batch.Header.CheckRaft) when raft (the log's
// Options.Raft) is set.
func parseHeaderFor(b []byte, raft bool) (batch.Header, error) {
	if !raft {
		return parseHeader(b)
	}
	h, err := batch.ParseHeader(b)
	if err == nil {
		err = h.CheckRaft()
	}
	return h, err
}

// RaftStart is the raft index of the log's first batch (raft's FirstIndex); 0 without Options.Raft.
func (l *Log) RaftStart() uint64 {
	if !l.o.Raft {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return 0
	}
	return l.segs[0].r.base
}

// RaftEnd is the raft index the next Append gets (raft's LastIndex + 1); 0 without Options.Raft.
func (l *Log) RaftEnd() uint64 {
	if !l.o.Raft {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.active == nil {
		return 0
	}
	return l.active.r.end
}

// RaftTerm returns the term (partitionLeaderEpoch) of the batch at raft index i from the leader-epoch cache,
// in O(log runs); ok is false when i is outside [RaftStart(), RaftEnd()).
func (l *Log) RaftTerm(i uint64) (term int32, ok bool) {
	if !l.o.Raft {
		return 0, false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 || i < l.segs[0].r.base || i >= l.active.r.end {
		return 0, false
	}
	k := sort.Search(len(l.epochs), func(k int) bool { return l.epochs[k].FirstIndex > i }) - 1
	if k < 0 {
		return 0, false
	}
	return l.epochs[k].Term, true
}

// Epochs returns a copy of the leader-epoch cache, in raft index order (nil without Options.Raft).
func (l *Log) Epochs() []EpochRun {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochRun(nil), l.epochs...)
}

// raftAt is a located batch: segment segs[k] holds it at byte pos, with header h and raft index index.
type raftAt struct {
	k     int
	s     *segment
	pos   int64
	h     batch.Header
	index uint64
}

// locateIndex finds the batch with raft index i (RaftStart() <= i < RaftEnd()): the sparse raft index gives a
// position at or before it, and the headers from there are walked.
func (l *Log) locateIndex(i uint64) (raftAt, error) {
	l.mu.RLock()
	if l.closed.Load() {
		l.mu.RUnlock()
		return raftAt{}, ErrClosed
	}
	if len(l.segs) == 0 {
		l.mu.RUnlock()
		return raftAt{}, ErrClosed
	}
	if i < l.segs[0].r.base || i >= l.active.r.end {
		start, end := l.segs[0].r.base, l.active.r.end
		l.mu.RUnlock()
		return raftAt{}, fmt.Errorf("%w: index %d, log holds [%d, %d)", ErrIndexOutOfRange, i, start, end)
	}
	k := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].r.base > i }) - 1
	s := l.segs[k]
	rel, pos := lookupEntry(s.r.idx, uint32(i-s.r.base))
	size := s.size
	l.mu.RUnlock()
	sc := scanner{buf: make([]byte, 4096), raft: true}
	sc.reset(s.log, size)
	for at := s.r.base + uint64(rel); ; at++ {
		h, err := sc.header(pos)
		if err != nil {
			return raftAt{}, err
		}
		if at == i {
			return raftAt{k: k, s: s, pos: pos, h: h, index: at}, nil
		}
		pos += int64(h.Size())
	}
}

// locateOffset finds the first batch whose base offset is >= offset (an internal batch at offset included):
// the cut of TruncateTo(offset). found is false when there is none (offset is End() with no internal batch
// there). An offset inside a batch is an error: it is not a batch boundary.
func (l *Log) locateOffset(offset int64) (at raftAt, found bool, err error) {
	l.mu.RLock()
	// The last segment starting below offset may end with internal batches at offset; the one after it
	// starts at offset or above.
	k := max(sort.Search(len(l.segs), func(k int) bool { return l.segs[k].base >= offset })-1, 0)
	type view struct {
		s         *segment
		size, pos int64
		index     uint64
	}
	var views []view
	for j, s := range l.segs[k:] {
		v := view{s: s, size: s.size}
		if j == 0 && offset > s.base {
			v.pos = lookupPos(s.offIdx, uint32(offset-1-s.base))
		}
		if s.r != nil {
			rel, pos := lookupAtPos(s.r.idx, v.pos)
			v.index, v.pos = s.r.base+uint64(rel), pos
		}
		views = append(views, v)
		if j == 1 {
			break // the cut is in segs[k] or at the start of segs[k+1]
		}
	}
	l.mu.RUnlock()
	sc := scanner{buf: make([]byte, 4096), raft: l.o.Raft}
	for j, v := range views {
		sc.reset(v.s.log, v.size)
		for pos, index := v.pos, v.index; pos < v.size; index++ {
			h, err := sc.header(pos)
			if err != nil {
				return raftAt{}, false, err
			}
			switch {
			case h.BaseOffset >= offset:
				return raftAt{k: k + j, s: v.s, pos: pos, h: h, index: index}, true, nil
			case h.LastOffset() >= offset:
				return raftAt{}, false, fmt.Errorf("log: truncate to offset %d: inside the batch [%d, %d], not a batch boundary", offset, h.BaseOffset, h.LastOffset())
			}
			pos += int64(h.Size())
		}
	}
	return raftAt{}, false, nil
}

// RaftOffset returns the Kafka offset raft index i maps to: the base offset of batch i (for an internal batch,
// the next offset to assign at that point), or End() for i == RaftEnd(). Errors: ErrNotRaft,
// ErrIndexOutOfRange, ErrClosed, an I/O error.
func (l *Log) RaftOffset(i uint64) (int64, error) {
	if !l.o.Raft {
		return 0, ErrNotRaft
	}
	l.mu.RLock()
	atEnd := l.active != nil && i == l.active.r.end
	end := l.end.Load()
	l.mu.RUnlock()
	if atEnd {
		return end, nil
	}
	at, err := l.locateIndex(i)
	if err != nil {
		return 0, err
	}
	return at.h.BaseOffset, nil
}

// ReadRaft returns copies of the batches with raft indexes [lo, hi), internal ones included, in order: at
// least one (when lo < hi), then more while their total size stays within maxBytes (raft.Storage.Entries'
// rule). lo < RaftStart() or hi > RaftEnd() is ErrIndexOutOfRange. Errors: ErrNotRaft, ErrClosed, a
// *CorruptionError or I/O error from the files.
func (l *Log) ReadRaft(lo, hi uint64, maxBytes uint64) ([][]byte, error) {
	if !l.o.Raft {
		return nil, ErrNotRaft
	}
	if lo >= hi {
		return nil, nil
	}
	if end := l.RaftEnd(); hi > end {
		return nil, fmt.Errorf("%w: read [%d, %d), log ends at %d", ErrIndexOutOfRange, lo, hi, end)
	}
	at, err := l.locateIndex(lo)
	if err != nil {
		return nil, err
	}
	l.mu.RLock()
	type view struct {
		s    *segment
		size int64
	}
	var views []view
	if at.k < len(l.segs) && l.segs[at.k] == at.s {
		for _, s := range l.segs[at.k:] {
			views = append(views, view{s, s.size})
		}
	}
	l.mu.RUnlock()
	if len(views) == 0 {
		return nil, fmt.Errorf("log: raft read at %d: the log changed under the read", lo)
	}
	var out [][]byte
	var total uint64
	sc := scanner{buf: make([]byte, 4096), raft: true}
	pos := at.pos
	for i := lo; i < hi; {
		if len(views) == 0 {
			return nil, fmt.Errorf("log: raft read: index %d missing", i)
		}
		v := views[0]
		if pos >= v.size {
			views, pos = views[1:], 0
			continue
		}
		sc.reset(v.s.log, v.size)
		h, err := sc.header(pos)
		if err != nil {
			return nil, err
		}
		total += uint64(h.Size())
		if len(out) > 0 && total > maxBytes {
			break
		}
		b := make([]byte, h.Size())
		if n, err := v.s.log.ReadAt(b, pos); n < len(b) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("log: read %s at %d: %w", v.s.log.Name(), pos, err)
		}
		out = append(out, b)
		pos += int64(h.Size())
		i++
	}
	return out, nil
}

// TruncateToIndex removes every batch with raft index >= i (raft's conflicting, uncommitted suffix), as
// TruncateTo does; i == RaftEnd() changes nothing. Errors: ErrNotRaft, ErrIndexOutOfRange, ErrClosed, the
// sticky error, or a write or fsync error (then sticky).
func (l *Log) TruncateToIndex(i uint64) error {
	if !l.o.Raft {
		return ErrNotRaft
	}
	return l.truncate(func() (raftAt, bool, error) {
		if i == l.RaftEnd() {
			return raftAt{}, false, nil
		}
		at, err := l.locateIndex(i)
		return at, err == nil, err
	})
}

// TruncateTo removes every batch at or above offset (and, in a raft log, every internal batch written after
// offset-1), so End() becomes offset: the uncommitted suffix a raft follower must drop, Kafka's
// Log.truncateTo. offset must be a batch boundary in [Start(), End()]; End() changes nothing (but removes
// internal batches there). Readers holding Chunks of removed segments keep them for FileDeleteDelay, as after
// retention; bytes cut from the segment holding offset are gone at once, which is safe only because they are
// above every high watermark. Then:
//
//  1. the later segments are detached and unlinked, the directory fsynced (so they can never reappear after
//     the cut segment grows again);
//  2. the segment holding offset is cut at that batch and fsynced, and its indexes rebuilt by the recovery
//     scan and rewritten;
//  3. the group-commit state's durable and fsynced ends become offset (all that is left is fsynced), so
//     WaitDurable waits for the fsync of re-appended offsets. OnDurable stays strictly increasing: it is
//     called again once the durable end passes the highest end it reported before.
//
// A crash at any step leaves a prefix of the log as it was, at least up to offset. Errors:
// ErrOffsetOutOfRange, ErrClosed, the sticky error, an offset inside a batch, or a write or fsync error (then
// sticky, as any failed fsync).
func (l *Log) TruncateTo(offset int64) error {
	return l.truncate(func() (raftAt, bool, error) {
		if start, end := l.Start(), l.End(); offset < start || offset > end {
			return raftAt{}, false, fmt.Errorf("%w: truncate to %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, end)
		}
		return l.locateOffset(offset)
	})
}

// truncate takes the locks of a truncation (adminMu, then wmu), finds the cut with locate and makes it.
func (l *Log) truncate(locate func() (at raftAt, found bool, err error)) error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.commit.sticky(); err != nil {
		return err
	}
	at, found, err := locate()
	if err != nil || !found {
		return err
	}
	return l.truncateAt(at)
}

// truncateAt cuts the log before the batch at: see TruncateTo. The caller holds adminMu and wmu.
func (l *Log) truncateAt(at raftAt) error {
	newEnd := at.h.BaseOffset
	l.mu.Lock()
	s := at.s
	if at.k >= len(l.segs) || l.segs[at.k] != s {
		l.mu.Unlock()
		return fmt.Errorf("log: truncate: segment %d changed under the truncation", s.base)
	}
	dead := append([]*segment(nil), l.segs[at.k+1:]...)
	l.segs = l.segs[: at.k+1 : at.k+1]
	for _, d := range dead {
		l.size -= d.size
	}
	// Readers stop at the cut at once; the indexes are rebuilt below.
	l.size -= s.size - at.pos
	s.size = at.pos
	l.active = s
	l.end.Store(newEnd)
	if s.r != nil {
		s.r.end = at.index
		k := sort.Search(len(l.epochs), func(k int) bool { return l.epochs[k].FirstIndex >= at.index })
		l.epochs = l.epochs[:k:k]
	}
	l.mu.Unlock()
	l.logger.Info("log: truncating", "dir", l.dir, "offset", newEnd, "segment", s.base, "pos", at.pos, "segmentsRemoved", len(dead))

	for _, d := range dead {
		// A later roll may create a segment with the same name: the old descriptors must never reopen it.
		d.log.noReopen()
		d.index.noReopen()
		d.timeIndex.noReopen()
	}
	if err := l.deleteSegments(dead); err != nil {
		return l.commit.fail(fmt.Errorf("log: truncate: %w", err))
	}
	if err := s.log.Truncate(at.pos); err != nil {
		return l.commit.fail(fmt.Errorf("log: truncate %s to %d: %w", s.log.Name(), at.pos, err))
	}
	s.alloc = at.pos
	if err := s.log.Sync(); err != nil {
		return l.commit.fail(fmt.Errorf("log: fsync %s: %w", s.log.Name(), err))
	}
	ns := newSegment(s.base)
	ns.log, ns.index, ns.timeIndex, ns.created = s.log, s.index, s.timeIndex, s.created
	if s.r != nil {
		ns.r = &raftSeg{base: s.r.base, end: s.r.base}
	}
	bad, _, err := l.scanSegment(ns, false)
	switch {
	case err == nil && bad != nil:
		err = bad
	case err == nil && (ns.size != at.pos || ns.end != newEnd):
		err = fmt.Errorf("log: truncate: rescan of segment %d ends at byte %d offset %d, want %d and %d", s.base, ns.size, ns.end, at.pos, newEnd)
	}
	if err == nil {
		err = l.rewriteIndexes(ns)
	}
	if err != nil {
		return l.commit.fail(err)
	}
	ns.alloc = at.pos
	l.mu.Lock()
	s.adopt(ns)
	l.mu.Unlock()

	c := &l.commit
	c.mu.Lock()
	c.fsynced = newEnd
	if l.o.Fsync == FsyncAlways {
		c.durable.Store(newEnd)
	}
	c.syncedLen = c.appended.Load()
	c.mu.Unlock()
	l.unflushed = 0
	return nil
}

// SyncData fsyncs the active segment's .log file now if anything appended (internal batches included) is not
// yet fsynced, whatever the policy: raft's Sync before the messages that depend on the entries leave the
// node. Index files are not fsynced (recovery rebuilds them). A failure is sticky. Errors: ErrClosed, the
// sticky error, an fsync error, or a failure to open the file for lack of descriptors (not sticky).
func (l *Log) SyncData() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.syncActive()
}
