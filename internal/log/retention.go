package log

import (
	"errors"
	"fmt"
	"time"
)

// doomedSeg is a deleted segment whose files stay open until closeAt for readers holding its Chunks.
type doomedSeg struct {
	s       *segment
	closeAt time.Time
}

// SetStart raises the log start offset (DeleteRecords), persists it durably, then deletes the whole segments
// below it. Offsets below the new start become unreadable at once. An offset at or below Start() changes
// nothing; an offset above End() returns ErrOffsetOutOfRange.
func (l *Log) SetStart(offset int64) error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if end := l.End(); offset > end {
		return fmt.Errorf("%w: log start %d above log end %d", ErrOffsetOutOfRange, offset, end)
	}
	if offset <= l.Start() {
		return nil
	}
	if err := writeStart(l.fs, l.dir, offset); err != nil {
		return err
	}
	l.mu.Lock()
	l.start.Store(offset)
	n := 0
	for n+1 < len(l.segs) && l.segs[n+1].base <= offset {
		n++
	}
	dead := l.detachLocked(n)
	l.mu.Unlock()
	return l.deleteSegments(dead)
}

// EnforceRetention deletes whole non-active segments from the oldest on while one of these holds: the segment
// is entirely below the log start offset; its newest batch max timestamp is more than retention.ms before now;
// or removing it leaves at least retention.bytes. It stops at the first segment none applies to, then raises
// the log start offset to the first remaining segment's base (persisted before any file is removed). It returns
// how many segments it deleted.
func (l *Log) EnforceRetention(now time.Time) (deleted int, err error) {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	l.closeDoomed(time.Now(), false) // the delay is wall-clock time, whatever now says
	n := l.expiredPrefix(now)
	if n == 0 {
		return 0, nil
	}
	l.mu.RLock()
	newStart := l.segs[n].base
	l.mu.RUnlock()
	if newStart > l.Start() {
		if err := writeStart(l.fs, l.dir, newStart); err != nil {
			return 0, err
		}
	}
	l.mu.Lock()
	if newStart > l.start.Load() {
		l.start.Store(newStart)
	}
	dead := l.detachLocked(n)
	l.mu.Unlock()
	return n, l.deleteSegments(dead)
}

// expiredPrefix counts the leading non-active segments retention deletes. Only adminMu is held: segments are
// removed only under adminMu, and a concurrent roll only makes one more segment non-active.
func (l *Log) expiredPrefix(now time.Time) int {
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs[:len(l.segs)-1]...)
	type stat struct{ size, maxTs, next int64 }
	stats := make([]stat, len(segs))
	for i, s := range segs {
		stats[i] = stat{s.size, s.maxTs, l.segs[i+1].base}
	}
	total, start := l.size, l.start.Load()
	l.mu.RUnlock()

	retMs, retBytes := l.retentionMs.Load(), l.retentionBytes.Load()
	for i, s := range segs {
		st := stats[i]
		switch {
		case st.next <= start:
		case retMs >= 0 && now.UnixMilli()-l.newestMs(s, st.maxTs) > retMs:
		case retBytes >= 0 && total-st.size >= retBytes:
		default:
			return i
		}
		total -= st.size
	}
	return len(segs)
}

// newestMs is the segment's newest batch timestamp, or its file's modification time without timestamps.
func (l *Log) newestMs(s *segment, maxTs int64) int64 {
	if maxTs >= 0 {
		return maxTs
	}
	st, err := s.log.Stat()
	if err != nil {
		return time.Now().UnixMilli() // unknown age: keep it
	}
	return st.ModTime().UnixMilli()
}

// detachLocked removes the first n segments from the log (never the active one) and returns them.
func (l *Log) detachLocked(n int) []*segment {
	n = min(n, len(l.segs)-1)
	if n <= 0 {
		return nil
	}
	dead := append([]*segment(nil), l.segs[:n]...)
	l.segs = append(l.segs[:0:0], l.segs[n:]...)
	for _, s := range dead {
		l.size -= s.size
	}
	return dead
}

// deleteSegments unlinks detached segments and syncs the directory. Their files are closed after
// FileDeleteDelay so readers holding Chunks can finish. A crash before the directory sync leaves segments below
// the persisted log start, which Open deletes.
func (l *Log) deleteSegments(dead []*segment) error {
	if len(dead) == 0 {
		return nil
	}
	var errs []error
	for _, s := range dead {
		errs = append(errs, removeSegmentFiles(l.fs, l.dir, s.base))
		l.logger.Info("log: deleted segment", "dir", l.dir, "base", s.base, "end", s.end)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		errs = append(errs, fmt.Errorf("log: sync dir %s: %w", l.dir, err))
	}
	closeAt := time.Now().Add(l.o.FileDeleteDelay)
	l.mu.Lock()
	for _, s := range dead {
		l.doomed = append(l.doomed, doomedSeg{s: s, closeAt: closeAt})
	}
	l.mu.Unlock()
	if l.o.FileDeleteDelay < 0 {
		l.closeDoomed(time.Now(), true)
	}
	return errors.Join(errs...)
}

// closeDoomed closes the files of deleted segments whose delay has passed (all of them if all is set).
func (l *Log) closeDoomed(now time.Time, all bool) {
	l.mu.Lock()
	var keep []doomedSeg
	var done []*segment
	for _, d := range l.doomed {
		if all || !now.Before(d.closeAt) {
			done = append(done, d.s)
		} else {
			keep = append(keep, d)
		}
	}
	l.doomed = keep
	l.mu.Unlock()
	for _, s := range done {
		_ = s.close()
	}
}
