package log

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
)

// cleanedSuffix names the file a segment's cleaned copy is written to before it replaces the .log file
// (Kafka's .cleaned). Open removes leftovers: a crash before the rename leaves the old segment in place.
const cleanedSuffix = ".cleaned"

// ErrSegmentGone is returned by ReplaceSegment when the segment is no longer a closed segment of the log
// (retention or DeleteRecords removed it while it was being cleaned).
var ErrSegmentGone = errors.New("log: segment to replace is gone")

// SegmentInfo describes one segment for the log cleaner.
type SegmentInfo struct {
	Base, End    int64 // offsets [Base, End)
	Size         int64 // bytes of the .log file
	MaxTimestamp int64 // largest batch max timestamp (ms); math.MinInt64 when empty
	Active       bool  // the segment appends go to; never cleaned
}

// Segments returns the segments in offset order, the active one last.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{Base: s.base, End: s.end, Size: s.size, MaxTimestamp: s.maxTs, Active: s == l.active}
	}
	return out
}

// ReplaceSegment replaces the closed segment starting at base with the batches fill passes to add, in order
// (the log cleaner's rewrite). The new contents must cover exactly the same offsets: the first batch starts at
// base, each batch starts where the previous one ended and the last one ends at the segment's end, so offsets
// stay contiguous and recovery's continuity check holds; a batch that breaks this makes ReplaceSegment fail
// and leaves the segment as it was.
//
// Crash safety (write-new-then-swap): the batches are written to <base>.log.cleaned and fsynced, which is then
// renamed over <base>.log and the directory fsynced. A crash before the rename recovers the old segment (Open
// removes the .cleaned file); after it, the new one; the index files are rebuilt by recovery when stale.
// Readers holding Chunks of the old segment keep reading the old file for FileDeleteDelay, as after
// retention. Returns ErrSegmentGone if the segment was removed meanwhile, or ErrClosed.
func (l *Log) ReplaceSegment(base int64, fill func(add func(b []byte) error) error) error {
	if l.o.Raft {
		// Dropping batches would renumber the raft indexes of everything after them.
		return fmt.Errorf("log: ReplaceSegment: %w: compaction of a raft log is not supported yet", ErrNotRaft)
	}
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	old, idx := l.closedSegment(base)
	if old == nil {
		return ErrSegmentGone
	}
	name := segmentName(l.dir, base, logSuffix)
	tmp := name + cleanedSuffix
	ns, err := l.writeCleaned(tmp, base, old.end, fill)
	if err != nil {
		_ = l.fs.Remove(tmp)
		return err
	}
	// The old file stays open from before the rename until noReopen: were its idle descriptor closed by the
	// FileCache in between, a reader reopening it by name would get the cleaned file and read it at the old
	// segment's positions (garbage, sent as is by a zero-copy fetch).
	if _, err := old.log.acquire(); err != nil {
		ns.close()
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("log: swap cleaned segment %d: %w", base, err)
	}
	defer old.log.release()
	l.swapStep(1)
	if err := l.fs.Rename(tmp, name); err != nil {
		ns.close()
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("log: swap cleaned segment %d: %w", base, err)
	}
	l.swapStep(2)
	if err := l.fs.SyncDir(l.dir); err != nil {
		ns.close()
		return l.commit.fail(fmt.Errorf("log: sync dir %s: %w", l.dir, err))
	}
	l.swapStep(3)
	old.log.noReopen() // its name now holds the new file
	// The old segment's indexes stay in memory for its readers; the files get the new ones.
	if err := errors.Join(rewriteFile(ns.index, ns.offIdx), rewriteFile(ns.timeIndex, ns.timeIdx)); err != nil {
		l.logger.Warn("log: writing the cleaned segment's indexes failed; recovery rebuilds them", "dir", l.dir, "base", base, "err", err)
	}
	l.swapStep(4)
	ns.offFlushed, ns.timeFlushed = len(ns.offIdx), len(ns.timeIdx)
	l.mu.Lock()
	if l.segs[idx] == old {
		l.segs[idx] = ns
		l.size += ns.size - old.size
	}
	l.doomed = append(l.doomed, doomedSeg{s: old, closeAt: time.Now().Add(l.o.FileDeleteDelay)})
	l.mu.Unlock()
	if l.o.FileDeleteDelay < 0 {
		l.closeDoomed(time.Now(), true)
	}
	return nil
}

// swapStep reports step i of SwapSteps to Options.OnSwapStep.
func (l *Log) swapStep(i int) {
	if l.o.OnSwapStep != nil {
		l.o.OnSwapStep(SwapSteps[i])
	}
}

// closedSegment finds the non-active segment starting at base. The caller holds adminMu, so the segment list
// changes only by a roll (which appends).
func (l *Log) closedSegment(base int64) (*segment, int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i, s := range l.segs[:len(l.segs)-1] {
		if s.base == base {
			return s, i
		}
	}
	return nil, -1
}

// writeCleaned writes the batches fill adds to tmp, checking their offsets cover [base, end) contiguously, and
// fsyncs it. The returned segment reads the file under its final name.
func (l *Log) writeCleaned(tmp string, base, end int64, fill func(add func(b []byte) error) error) (*segment, error) {
	f, err := l.fs.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: create %s: %w", tmp, err)
	}
	defer f.Close()
	ns := newSegment(base)
	ns.created = time.Now()
	interval := int64(l.o.IndexIntervalBytes)
	err = fill(func(b []byte) error {
		h, err := parseHeader(b)
		if err == nil && h.Size() != len(b) {
			err = fmt.Errorf("buffer of %d bytes holds a batch of %d", len(b), h.Size())
		}
		if err == nil && h.BaseOffset != ns.end {
			err = fmt.Errorf("batch at offset %d does not continue the cleaned segment, which ends at %d", h.BaseOffset, ns.end)
		}
		if err == nil {
			err = batch.CheckCRC(b)
		}
		if err == nil && ns.size+int64(len(b)) > maxSegmentBytes {
			// Decompressed survivors of compressed batches can outgrow the file's int32 index positions.
			err = fmt.Errorf("cleaned segment would exceed %d bytes", int64(maxSegmentBytes))
		}
		if err != nil {
			return fmt.Errorf("log: cleaned segment %d: %w", base, err)
		}
		if _, err := f.WriteAt(b, ns.size); err != nil {
			return fmt.Errorf("log: write %s: %w", tmp, err)
		}
		ns.noteBatch(ns.size, h, interval)
		return nil
	})
	if err == nil && ns.end != end {
		err = fmt.Errorf("log: cleaned segment %d ends at %d, the segment at %d", base, ns.end, end)
	}
	if err == nil {
		l.swapStep(0)
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("log: fsync %s: %w", tmp, err)
		}
	}
	if err != nil {
		return nil, err
	}
	s, err := openSegmentFiles(l.fs, l.files, l.dir, base, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	// The name is still the old file until the rename; the lazy descriptor is opened on tmp's inode after it.
	s.log.Close()
	s.log = nil
	if s.log, err = l.files.openLazy(l.fs, tmp, os.O_RDWR); err != nil {
		s.close()
		return nil, err
	}
	s.log.name = strings.TrimSuffix(tmp, cleanedSuffix)
	s.adopt(ns)
	return s, nil
}
