package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// Log is one partition's durable log. See the package documentation for ownership, locking and durability.
type Log struct {
	dir    string
	fs     vfs.FS
	files  *FileCache // bounds the descriptors of the segment files
	o      Options    // with defaults applied; the three runtime-tunable fields below override it
	logger *slog.Logger

	segmentBytes   atomic.Int64
	retentionMs    atomic.Int64
	retentionBytes atomic.Int64

	adminMu sync.Mutex // serialises SetStart, EnforceRetention, Close, Delete
	wmu     sync.Mutex // the writer: Append (and roll), Sync, Close

	mu     sync.RWMutex // guards segs, size, doomed and the (mu) fields of segments
	segs   []*segment   // ascending base offsets; the last one is active
	active *segment     // == segs[len(segs)-1]; changed only by the writer (under wmu and mu)
	size   int64        // bytes of all segments' .log files
	doomed []doomedSeg  // deleted segments whose files stay open for readers until the delay passes

	unflushed int64 // records appended since the last FlushMessages fsync (under wmu)
	// The commit counters at the last preallocation step, and whether it was written zeros (zeroStep;
	// under wmu).
	stepFsyncs, stepFsynced int64
	smallFsyncs             bool

	epochs []EpochRun // (mu) Options.Raft: the leader-epoch cache; changed by the writer only

	start  atomic.Int64 // log start offset; changed under mu
	end    atomic.Int64 // log end offset; changed under mu by the writer
	closed atomic.Bool

	commit commitState
}

// Open opens the log in dir, creating dir (durably) if needed, and recovers it: every batch of every segment is
// checked (length chain, magic, CRC-32C, offsets continuing from segment to segment), index files are rebuilt
// when they do not match, and a torn or corrupt tail of the last segment is truncated (logged as a warning with
// offset and byte position). Damage anywhere else returns a *CorruptionError (errors.Is ErrCorruption): the
// caller must not serve the partition, and nothing is dropped or renumbered.
//
// NB: recovery reads every segment in full, so Open costs one sequential read of the partition.
func Open(dir string, o Options) (*Log, error) {
	o = o.withDefaults()
	// No fsync history yet: the first step (64 KiB) is written zeros.
	l := &Log{dir: dir, fs: o.FS, files: o.Files, o: o, logger: o.Logger, smallFsyncs: true}
	l.segmentBytes.Store(o.SegmentBytes)
	l.retentionMs.Store(o.RetentionMs)
	l.retentionBytes.Store(o.RetentionBytes)
	if err := vfs.MkdirAllDurable(l.fs, dir); err != nil {
		return nil, fmt.Errorf("log: create %s: %w", dir, err)
	}
	if err := l.load(); err != nil {
		for _, s := range l.segs {
			s.close()
		}
		return nil, err
	}
	for _, s := range l.segs {
		l.size += s.size
	}
	l.commit.init(l.end.Load(), o.OnDurable != nil)
	go l.syncLoop()
	if o.OnDurable != nil {
		go l.notifyLoop()
	}
	return l, nil
}

// zeroStep reports whether the next preallocation step should be written zeros (see smallFsyncBytes): with
// FsyncAlways, when the fsyncs since the previous step averaged fewer than smallFsyncBytes, or, with none
// since (no history, or a step consumed within one fsync), as the previous step decided. Writer only.
func (l *Log) zeroStep() bool {
	if l.o.Fsync != FsyncAlways {
		return false
	}
	c := &l.commit
	fsyncs, fsynced := c.fsyncs.Load(), c.fsyncedSize.Load()
	if n := fsyncs - l.stepFsyncs; n > 0 {
		l.smallFsyncs = (fsynced-l.stepFsynced)/n < smallFsyncBytes
	}
	l.stepFsyncs, l.stepFsynced = fsyncs, fsynced
	return l.smallFsyncs
}

// Append writes one whole record batch (v2, already validated by the caller) at the end of the log and returns
// its base offset. It assigns offsets by writing End() into b[0:8] (the caller's buffer is modified), rolls to a
// new segment first when the active one is full or old enough, and updates the indexes. It does not fsync
// (except the old segment on a roll). Calls must be serialised by the caller; Read, Sync and WaitDurable may run
// concurrently. A write or fsync error is sticky: every later Append returns it. A malformed header is
// rejected without harm, and so is a failure to open the segment file when the process is out of descriptors
// (see FileCache): that Append fails alone, nothing is written, and the next one may succeed. So is a write
// that fails because the disk is full (ENOSPC, EDQUOT), once the partial write is truncated away: the
// error (errors.Is syscall.ENOSPC) goes to that Append and appends resume by themselves when space is freed.
// NB: this is not the fsync-failure case (fsyncgate): no fsync failed and the bytes that did land were cut
// from the file, so nothing the log reports as written or durable was dropped by the kernel.
//
// With Options.Raft, b is one raft entry: a Kafka batch or an internal batch (batch.NewInternal, which takes
// no offset), at raft index RaftEnd(), whose partitionLeaderEpoch is its raft term; a term below the last
// batch's is refused (ErrTerm) without harm.
func (l *Log) Append(b []byte) (base int64, err error) {
	h, err := parseHeaderFor(b, l.o.Raft)
	if err == nil && int64(len(b)) != int64(h.Size()) {
		err = fmt.Errorf("buffer of %d bytes holds a batch of %d", len(b), int64(h.Size()))
	}
	if err != nil {
		return 0, fmt.Errorf("log: append: %w", err)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if err := l.commit.sticky(); err != nil {
		return 0, err
	}
	if l.o.Raft {
		if err := l.checkTerm(h); err != nil {
			return 0, err
		}
	}
	s := l.active
	if l.shouldRoll(s, h, len(b)) {
		if err := l.roll(); err != nil {
			return 0, err
		}
		s = l.active
	}
	h.BaseOffset = l.end.Load()
	batch.SetBaseOffset(b, h.BaseOffset)
	pos := s.size
	if need := pos + int64(len(b)); l.o.Preallocate && need > s.alloc {
		s.preallocate(need, min(l.segmentBytes.Load(), maxSegmentBytes), l.zeroStep())
	}
	if _, err := s.log.WriteAt(b, pos); isOpenError(err) {
		return 0, err // nothing was written
	} else if isDiskFull(err) && s.log.Truncate(pos) == nil {
		s.alloc = pos
		return 0, fmt.Errorf("log: write %s at %d: %w", s.log.Name(), pos, err)
	} else if err != nil {
		_ = s.log.Truncate(pos) // best effort; recovery cuts a torn tail anyway
		return 0, l.commit.fail(fmt.Errorf("log: write %s at %d: %w", s.log.Name(), pos, err))
	}
	s.alloc = max(s.alloc, pos+int64(len(b)))
	l.mu.Lock()
	if s.r != nil {
		l.noteEpochLocked(h, s.r.end)
	}
	s.noteBatch(pos, h, int64(l.o.IndexIntervalBytes))
	l.size += int64(h.Size())
	l.commit.appended.Add(int64(h.Size()))
	l.end.Store(s.end)
	l.mu.Unlock()
	if l.o.Fsync == FsyncAlways {
		l.commit.kickSync()
		return h.BaseOffset, nil
	}
	l.commit.kickNotify() // the durable end is End()
	if l.o.FlushMessages > 0 {
		if l.unflushed += int64(h.NumRecords); l.unflushed >= l.o.FlushMessages {
			l.unflushed = 0
			// The batch is written and counted; a failed fsync is sticky for the log (its later writes fail),
			// as any fsync failure is, and this append reports it.
			if err := l.syncActive(); err != nil && !isOpenError(err) {
				return 0, err
			}
		}
	}
	return h.BaseOffset, nil
}

// shouldRoll reports whether the next batch must start a new segment. An empty segment always takes it, and
// so does one holding only internal batches (the next segment's name, its base offset, would be the same).
func (l *Log) shouldRoll(s *segment, h batch.Header, n int) bool {
	if s.size == 0 || s.end == s.base {
		return false
	}
	segBytes := l.segmentBytes.Load()
	switch {
	case s.size+int64(n) > segBytes || s.size+int64(n) > maxSegmentBytes:
		return true
	case l.end.Load()+int64(h.LastOffsetDelta)-s.base > math.MaxInt32: // relative offsets are int32 in the indexes
		return true
	case l.o.SegmentMs > 0 && time.Now().UnixMilli()-s.rollBaseMs() > l.o.SegmentMs:
		return true
	}
	return false
}

// roll trims and fsyncs the active segment and its indexes (so recovery only ever truncates the last segment), creates
// the next segment at End() and makes its directory entry durable. Writer only.
func (l *Log) roll() error {
	old := l.active
	if err := old.trim(); err != nil {
		return l.failUnlessOpen(err)
	}
	if err := old.syncAll(); err != nil {
		return l.failUnlessOpen(err)
	}
	l.commit.noteFsynced(old.end, l.commit.appended.Load(), l.o.Fsync)
	s, err := l.newSegmentFiles(l.end.Load(), old.r)
	if err != nil {
		return l.failUnlessOpen(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		s.close()
		return l.commit.fail(fmt.Errorf("log: sync dir %s: %w", l.dir, err))
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.active = s
	l.mu.Unlock()
	l.logger.Debug("log: rolled segment", "dir", l.dir, "base", s.base)
	return nil
}

// newSegmentFiles creates the files of a new segment at base; in a raft log, first its .raft file (durably:
// the .log file must never exist without it), holding the raft index after prev (or 1 for the first segment).
// The caller syncs the directory.
func (l *Log) newSegmentFiles(base int64, prev *raftSeg) (*segment, error) {
	var r *raftSeg
	if l.o.Raft {
		r = &raftSeg{base: 1}
		if prev != nil {
			r.base = prev.end
		}
		r.end = r.base
		if err := writeChecked(l.fs, segmentName(l.dir, base, raftSuffix), "raft index", int64(r.base)); err != nil {
			return nil, err
		}
	}
	s, err := createSegment(l.fs, l.files, l.dir, base)
	if err != nil {
		return nil, err
	}
	s.r = r
	return s, nil
}

// failUnlessOpen makes err sticky unless it leaves data and state as they were, so the operation can simply
// be tried again: a failure to open a file (out of descriptors), or an index write refused for lack of space
// (the index entries stay in memory and are written again from the same position next time).
func (l *Log) failUnlessOpen(err error) error {
	if isOpenError(err) || isDiskFull(err) && errors.Is(err, errIndexWrite) {
		return err
	}
	return l.commit.fail(err)
}

// isDiskFull reports whether err is a write refused for lack of space.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// End is the log end offset: the offset the next Append assigns.
func (l *Log) End() int64 { return l.end.Load() }

// Start is the log start offset: the lowest offset Read accepts.
func (l *Log) Start() int64 { return l.start.Load() }

// Size is the total size in bytes of the segments' .log files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.size
}

// SetConfig applies changed topic configs (retention.ms, retention.bytes, segment.bytes) at runtime, with the
// same meaning and defaults as the Options fields. A new segment size applies from the next Append.
func (l *Log) SetConfig(retentionMs, retentionBytes, segmentBytes int64) {
	l.retentionMs.Store(retentionMsOrDefault(retentionMs))
	if retentionBytes == 0 {
		retentionBytes = -1
	}
	l.retentionBytes.Store(retentionBytes)
	l.segmentBytes.Store(segmentBytesOrDefault(segmentBytes))
}

// Stats are counters for metrics (bench protocol: fsyncs and bytes per fsync).
type Stats struct {
	Fsyncs      int64 // fsyncs of .log files (group commits, rolls, Sync, Close)
	FsyncedSize int64 // bytes those fsyncs made durable
}

// Stats returns the counters since Open.
func (l *Log) Stats() Stats {
	return Stats{Fsyncs: l.commit.fsyncs.Load(), FsyncedSize: l.commit.fsyncedSize.Load()}
}
