package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// File name suffixes, as in Kafka: <20-digit base offset><suffix>.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	raftSuffix      = ".raft" // Options.Raft only: the raft index of the segment's first batch (startfile.go)
)

func segmentName(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// parseSegmentName returns the base offset of a "<20 digits><suffix>" name.
func parseSegmentName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil && base >= 0
}

// segment is one .log file and its two sparse indexes, holding the batches with offsets [base, end).
//
// Fields marked (mu) are written only by the writer (Append, roll, recovery) while holding Log.mu and may be
// read under Log.mu.RLock. Fields marked (w) belong to the writer alone.
type segment struct {
	base                  int64
	log, index, timeIndex *lazyFile // descriptors opened on demand through the Log's FileCache
	created               time.Time // when this process created or opened the segment

	size    int64  // (mu) bytes of whole batches in log
	end     int64  // (mu) offset after the last batch
	offIdx  []byte // (mu) .index entries
	timeIdx []byte // (mu) .timeindex entries
	maxTs   int64  // (mu) largest batch max timestamp; math.MinInt64 when empty
	maxTsAt int64  // (mu) last offset of the first batch carrying maxTs
	firstTs int64  // (mu) max timestamp of the first batch (for SegmentMs)

	sinceIndex    int64 // (w) bytes appended since the last offset index entry
	lastIndexedTs int64 // (w) timestamp of the last time index entry
	offFlushed    int   // (w) bytes of offIdx written to the .index file
	alloc         int64 // (w) size of the .log file: size, or more when preallocated (Options.Preallocate)
	noPrealloc    bool  // (w) a reservation failed (no space): append without preallocating from now on
	timeFlushed   int   // (w) bytes of timeIdx written to the .timeindex file

	r *raftSeg // raft indexes (Options.Raft), nil otherwise
}

func newSegment(base int64) *segment {
	return &segment{
		base: base, end: base, created: time.Now(),
		maxTs: math.MinInt64, maxTsAt: -1, firstTs: math.MinInt64, lastIndexedTs: math.MinInt64,
	}
}

// createSegment creates (or empties) the three files of a segment starting at base. The caller syncs the
// directory.
func createSegment(fs vfs.FS, fc *FileCache, dir string, base int64) (*segment, error) {
	return openSegmentFiles(fs, fc, dir, base, os.O_CREATE|os.O_RDWR|os.O_TRUNC)
}

// openSegmentFiles opens a segment's files through fc; the index files are created if missing (recovery
// rebuilds them). Their descriptors may be closed while idle and reopened on use (FileCache).
func openSegmentFiles(fs vfs.FS, fc *FileCache, dir string, base int64, logFlag int) (*segment, error) {
	s := newSegment(base)
	var err error
	if s.log, err = fc.openLazy(fs, segmentName(dir, base, logSuffix), logFlag); err != nil {
		return nil, fmt.Errorf("log: open segment %d: %w", base, err)
	}
	if s.index, err = fc.openLazy(fs, segmentName(dir, base, indexSuffix), os.O_CREATE|os.O_RDWR); err != nil {
		s.close()
		return nil, fmt.Errorf("log: open segment %d index: %w", base, err)
	}
	if s.timeIndex, err = fc.openLazy(fs, segmentName(dir, base, timeIndexSuffix), os.O_CREATE|os.O_RDWR); err != nil {
		s.close()
		return nil, fmt.Errorf("log: open segment %d time index: %w", base, err)
	}
	return s, nil
}

// noteBatch records a batch written at pos: size, end offset, timestamps and (every interval bytes) index entries.
// It is the only place index entries are decided, so recovery rebuilds exactly what Append wrote.
// The caller holds Log.mu (or owns the segment exclusively, during recovery).
func (s *segment) noteBatch(pos int64, h batch.Header, interval int64) {
	if s.r != nil {
		s.r.note(pos, h, interval)
		if h.Internal() {
			// No Kafka offset and no timestamp: kept out of the offset and time indexes and the segment's
			// timestamps; its bytes still count towards the next offset index entry.
			s.sinceIndex += int64(h.Size())
			s.size = pos + int64(h.Size())
			return
		}
	}
	if s.sinceIndex >= interval {
		rel := uint32(h.BaseOffset - s.base)
		s.offIdx = appendOffEntry(s.offIdx, rel, uint32(pos))
		if s.maxTs > s.lastIndexedTs {
			s.timeIdx = appendTimeEntry(s.timeIdx, s.maxTs, rel)
			s.lastIndexedTs = s.maxTs
		}
		s.sinceIndex = 0
	}
	s.sinceIndex += int64(h.Size())
	if s.size == 0 {
		s.firstTs = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsAt = h.MaxTimestamp, h.LastOffset()
	}
	s.size = pos + int64(h.Size())
	s.end = h.LastOffset() + 1
}

// adopt takes the contents (sizes, indexes, timestamps, raft indexes) of ns, a rescan or rewrite of the same
// segment; the files stay s's. The caller holds Log.mu.
func (s *segment) adopt(ns *segment) {
	s.created, s.size, s.end, s.offIdx, s.timeIdx = ns.created, ns.size, ns.end, ns.offIdx, ns.timeIdx
	s.maxTs, s.maxTsAt, s.firstTs, s.sinceIndex, s.lastIndexedTs = ns.maxTs, ns.maxTsAt, ns.firstTs, ns.sinceIndex, ns.lastIndexedTs
	s.offFlushed, s.timeFlushed, s.alloc, s.r = ns.offFlushed, ns.timeFlushed, ns.alloc, ns.r
}

// preallocate makes sure the .log file reaches at least need bytes, reserving the next step ahead of it when
// it does not (see Options.Preallocate): the step doubles with the segment's size, from minPreallocStep to
// maxPreallocStep, and never takes the file past limit (the roll size). A failed reservation is not an error:
// the file is cut back to its batches and the segment appends without preallocation, as before (a full disk
// then fails the write itself, which Append handles). zeros writes the step as zeros (at most maxZeroStep)
// instead of reserving it with fallocate. Writer only.
func (s *segment) preallocate(need, limit int64, zeros bool) {
	if s.noPrealloc || need <= s.alloc {
		return
	}
	step := min(max(s.size, minPreallocStep), maxPreallocStep)
	if zeros {
		step = min(step, maxZeroStep)
	}
	target := min(need+step, limit)
	if target <= need {
		return // the batch fills the segment: nothing to reserve beyond it
	}
	reserve := s.log.Preallocate
	if zeros {
		reserve = s.log.PreallocateZeros
	}
	if err := reserve(target); err != nil {
		s.noPrealloc = true
		if s.log.Truncate(s.size) == nil {
			s.alloc = s.size
		}
		return
	}
	s.alloc = target
}

// trim cuts the .log file back to its batches, removing preallocated space (before a roll's fsync and on
// Close, so only the active segment ever has a zero tail on disk). Writer only.
func (s *segment) trim() error {
	if s.alloc <= s.size {
		return nil
	}
	if err := s.log.Truncate(s.size); err != nil {
		return fmt.Errorf("log: trim %s to %d: %w", s.log.Name(), s.size, err)
	}
	s.alloc = s.size
	return nil
}

// errIndexWrite marks a failed write of index entries (before any fsync of the segment).
var errIndexWrite = errors.New("log: write index")

// flushIndexes writes index entries not yet in the index files. Writer only.
func (s *segment) flushIndexes() error {
	if s.offFlushed < len(s.offIdx) {
		if _, err := s.index.WriteAt(s.offIdx[s.offFlushed:], int64(s.offFlushed)); err != nil {
			return fmt.Errorf("%w of segment %d: %w", errIndexWrite, s.base, err)
		}
		s.offFlushed = len(s.offIdx)
	}
	if s.timeFlushed < len(s.timeIdx) {
		if _, err := s.timeIndex.WriteAt(s.timeIdx[s.timeFlushed:], int64(s.timeFlushed)); err != nil {
			return fmt.Errorf("%w (time index) of segment %d: %w", errIndexWrite, s.base, err)
		}
		s.timeFlushed = len(s.timeIdx)
	}
	return nil
}

// syncAll flushes the indexes and fsyncs the three files. Writer only.
func (s *segment) syncAll() error {
	if err := s.flushIndexes(); err != nil {
		return err
	}
	for _, f := range []*lazyFile{s.log, s.index, s.timeIndex} {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("log: fsync %s: %w", f.Name(), err)
		}
	}
	return nil
}

func (s *segment) close() error {
	var errs []error
	for _, f := range []*lazyFile{s.log, s.index, s.timeIndex} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// removeSegmentFiles unlinks a segment's files; open handles stay readable. The caller syncs the directory.
func removeSegmentFiles(fs vfs.FS, dir string, base int64) error {
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, raftSuffix} {
		if err := fs.Remove(segmentName(dir, base, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rollBaseMs is the time SegmentMs counts from: the first batch's max timestamp, else the creation time.
func (s *segment) rollBaseMs() int64 {
	if s.firstTs >= 0 {
		return s.firstTs
	}
	return s.created.UnixMilli()
}
