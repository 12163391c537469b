package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// load reads the directory and recovers every segment; it runs inside Open before the Log is shared.
func (l *Log) load() error {
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	start, haveStart, err := readStart(l.fs, l.dir)
	if err != nil {
		return err
	}
	bases, err = l.dropBelowStart(bases, start)
	if err != nil {
		return err
	}
	for i, base := range bases {
		s, err := l.recoverSegment(base, i == len(bases)-1)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	if len(l.segs) == 0 {
		return l.startFresh(start)
	}
	first, last := l.segs[0], l.segs[len(l.segs)-1]
	if haveStart && start > last.end {
		// Data above the persisted log start was lost (it was never fsynced). As Kafka does, drop what is left
		// and continue at the log start, so no offset below it is ever reused.
		l.logger.Warn("log: log start offset is beyond the recovered log end; starting empty at the log start",
			"dir", l.dir, "logStart", start, "end", last.end)
		return l.truncateFullyAndStartAt(start)
	}
	l.start.Store(max(start, first.base))
	l.end.Store(last.end)
	l.active = last
	// Make the recovered state durable: data read back from the page cache after a process crash may not be.
	// After a clean shutdown it is: Close fsynced it.
	if l.o.CleanShutdown {
		return nil
	}
	if err := last.syncAll(); err != nil {
		return err
	}
	return nil
}

// listSegments returns the base offsets of the .log files, sorted, and removes files of ours that cannot be
// used: index files without a .log and a leftover temporary log-start-offset file. Other files are left alone.
func (l *Log) listSegments() ([]int64, error) {
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("log: read dir %s: %w", l.dir, err)
	}
	logs := map[int64]bool{}
	for _, e := range ents {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok {
			logs[base] = true
		}
	}
	var bases []int64
	for _, e := range ents {
		name := e.Name()
		if base, ok := parseSegmentName(name, logSuffix); ok {
			bases = append(bases, base)
			continue
		}
		if stray, err := l.raftFile(name, logs); err != nil || stray {
			if err == nil {
				err = l.fs.Remove(filepath.Join(l.dir, name))
			}
			if err != nil {
				return nil, fmt.Errorf("log: %s: %w", name, err)
			}
			continue
		}
		base, isIdx := parseSegmentName(name, indexSuffix)
		if !isIdx {
			base, isIdx = parseSegmentName(name, timeIndexSuffix)
		}
		_, cleaned := parseSegmentName(strings.TrimSuffix(name, cleanedSuffix), logSuffix)
		cleaned = cleaned && strings.HasSuffix(name, cleanedSuffix) // a cleaning interrupted before its swap
		if isIdx && !logs[base] || cleaned || name == startFile+vfs.TempSuffix {
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("log: remove stray %s: %w", name, err)
			}
		}
	}
	slices.Sort(bases)
	return bases, nil
}

// raftFile reports whether name is a raft file to remove: a <base>.raft without its .log (a roll interrupted
// between the two) or a leftover temporary one. Without Options.Raft any <base>.raft is an error: the
// directory holds a raft log, whose internal batches a Kafka log would take for a torn tail.
func (l *Log) raftFile(name string, logs map[int64]bool) (stray bool, err error) {
	tmp := strings.HasSuffix(name, raftSuffix+vfs.TempSuffix)
	base, ok := parseSegmentName(strings.TrimSuffix(name, vfs.TempSuffix), raftSuffix)
	switch {
	case !ok:
		return false, nil
	case !l.o.Raft:
		return false, fmt.Errorf("%w: %s holds a raft log; open it with Options.Raft", ErrNotRaft, l.dir)
	}
	return tmp || !logs[base], nil
}

// dropBelowStart deletes segments whose successor starts at or below the log start offset: they hold only
// offsets DeleteRecords or retention already removed (a crash interrupted their deletion).
func (l *Log) dropBelowStart(bases []int64, start int64) ([]int64, error) {
	n := 0
	for n+1 < len(bases) && bases[n+1] <= start {
		n++
	}
	if n == 0 {
		return bases, nil
	}
	for _, b := range bases[:n] {
		if err := removeSegmentFiles(l.fs, l.dir, b); err != nil {
			return nil, fmt.Errorf("log: remove segment %d below log start %d: %w", b, start, err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return nil, fmt.Errorf("log: sync dir %s: %w", l.dir, err)
	}
	return bases[n:], nil
}

// recoverSegment opens a segment, verifies every batch (length chain, magic, CRC-32C, offsets continuing the
// previous segment) and rebuilds its indexes. A bad batch in the last segment is a torn tail: the file is cut
// there. Anywhere else it is a *CorruptionError. In any segment, zeros from the end of the last batch to the end
// of the file are preallocated space (Options.Preallocate) that a crash kept from being trimmed: they are cut
// without a warning.
func (l *Log) recoverSegment(base int64, last bool) (*segment, error) {
	s, err := openSegmentFiles(l.fs, l.files, l.dir, base, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	if n := len(l.segs); n > 0 && l.segs[n-1].end != base {
		s.close()
		return nil, &CorruptionError{File: s.log.Name(), Pos: 0, Offset: l.segs[n-1].end,
			Reason: fmt.Sprintf("segment base offset %d does not continue the previous segment, which ends at %d", base, l.segs[n-1].end)}
	}
	if l.o.Raft {
		if err := l.recoverRaftBase(s); err != nil {
			s.close()
			return nil, err
		}
	}
	bad, zeroTail, err := l.scanSegment(s, l.o.Raft)
	switch {
	case err != nil:
	case zeroTail:
		err = l.trimZeroTail(s)
	case bad != nil && !last:
		err = bad
	case bad != nil:
		err = l.truncateTail(s, bad)
	}
	s.alloc = s.size
	if err == nil {
		err = l.rewriteIndexes(s)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// recoverRaftBase reads the raft index of s's first batch from its .raft file; it must continue the previous
// segment's raft indexes.
func (l *Log) recoverRaftBase(s *segment) error {
	name := segmentName(l.dir, s.base, raftSuffix)
	v, found, err := readChecked(l.fs, name, "raft index")
	switch {
	case err != nil:
		return err
	case !found:
		return &CorruptionError{File: name, Pos: -1, Offset: s.base, Reason: "missing: every segment of a raft log has one"}
	case v < 1:
		return &CorruptionError{File: name, Pos: 0, Offset: s.base, Reason: fmt.Sprintf("raft index %d, the first is 1", v)}
	}
	s.r = &raftSeg{base: uint64(v), end: uint64(v)}
	if n := len(l.segs); n > 0 && l.segs[n-1].r.end != s.r.base {
		return &CorruptionError{File: name, Pos: 0, Offset: s.base,
			Reason: fmt.Sprintf("segment's first raft index %d does not continue the previous segment, which ends at %d", s.r.base, l.segs[n-1].r.end)}
	}
	return nil
}

// scanSegment reads the segment's batches in order, feeding noteBatch (and, with epochs, the leader-epoch
// cache, checking that terms never decrease). It returns the first bad batch (nil if the whole file is valid)
// or an I/O error; zeroTail reports instead that the file ends, from the first position that is not a valid
// batch, in zeros only (preallocated space: an all-zero batch header is never a batch, since its magic is 0).
func (l *Log) scanSegment(s *segment, epochs bool) (bad *CorruptionError, zeroTail bool, err error) {
	st, err := s.log.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("log: stat %s: %w", s.log.Name(), err)
	}
	fileSize := st.Size()
	// Small segments get small buffers: recovery may open thousands of them.
	r := bufio.NewReaderSize(io.NewSectionReader(s.log, 0, fileSize), int(max(min(fileSize, 1<<20), 4096)))
	interval := int64(l.o.IndexIntervalBytes)
	var big []byte
	for pos := int64(0); pos < fileSize; {
		bad := func(reason string) (*CorruptionError, bool, error) {
			return &CorruptionError{File: s.log.Name(), Pos: pos, Offset: s.end, Reason: reason}, false, nil
		}
		hb, err := r.Peek(int(min(fileSize-pos, batch.HeaderSize)))
		if err != nil {
			return nil, false, fmt.Errorf("log: read %s at %d: %w", s.log.Name(), pos, err)
		}
		if allZero(hb) {
			zeros, err := restIsZero(r)
			if err != nil {
				return nil, false, fmt.Errorf("log: read %s after %d: %w", s.log.Name(), pos, err)
			}
			if zeros {
				return nil, true, nil
			}
			return bad("an all-zero batch header followed by data")
		}
		if fileSize-pos < batch.HeaderSize {
			return bad(fmt.Sprintf("%d trailing bytes, less than a batch header", fileSize-pos))
		}
		h, herr := parseHeaderFor(hb, l.o.Raft)
		if herr == nil && epochs {
			herr = l.checkTerm(h)
		}
		switch {
		case herr != nil:
			return bad(herr.Error())
		case pos+int64(h.Size()) > fileSize:
			return bad(fmt.Sprintf("batch of %d bytes runs past the end of the file (%d bytes)", int64(h.Size()), fileSize))
		case h.BaseOffset != s.end:
			return bad(fmt.Sprintf("batch base offset %d, want %d", h.BaseOffset, s.end))
		case h.LastOffset()-s.base > math.MaxInt32 || pos > math.MaxInt32:
			return bad("segment exceeds the int32 range of its index")
		}
		var b []byte
		if int64(h.Size()) <= int64(r.Size()) {
			b, err = r.Peek(int(int64(h.Size())))
		} else {
			big = slices.Grow(big[:0], int(int64(h.Size())))[:int64(h.Size())]
			b = big
			_, err = io.ReadFull(r, b)
		}
		if err != nil {
			return nil, false, fmt.Errorf("log: read %s at %d: %w", s.log.Name(), pos, err)
		}
		if err := batch.CheckCRC(b[:h.Size()]); err != nil {
			return bad(err.Error())
		}
		if int64(h.Size()) <= int64(r.Size()) {
			r.Discard(int(int64(h.Size())))
		}
		if epochs {
			l.noteEpochLocked(h, s.r.end)
		}
		s.noteBatch(pos, h, interval)
		pos += int64(h.Size())
	}
	return nil, false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// restIsZero reads r to its end and reports whether every byte left is zero.
func restIsZero(r *bufio.Reader) (bool, error) {
	for {
		b, err := r.Peek(r.Size())
		if !allZero(b) {
			return false, nil
		}
		r.Discard(len(b))
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return false, err
		}
	}
}

// trimZeroTail cuts the preallocated zeros after a segment's last batch and makes the cut durable.
func (l *Log) trimZeroTail(s *segment) error {
	l.logger.Debug("log: trimming preallocated space after the last batch", "file", s.log.Name(), "pos", s.size)
	if err := s.log.Truncate(s.size); err != nil {
		return fmt.Errorf("log: trim %s to %d: %w", s.log.Name(), s.size, err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("log: fsync %s: %w", s.log.Name(), err)
	}
	return nil
}

// truncateTail cuts the last segment at its first bad batch and makes the cut durable.
func (l *Log) truncateTail(s *segment, bad *CorruptionError) error {
	l.logger.Warn("log: truncating torn or corrupt tail of the last segment",
		"file", bad.File, "offset", bad.Offset, "pos", bad.Pos, "reason", bad.Reason)
	if err := s.log.Truncate(bad.Pos); err != nil {
		return fmt.Errorf("log: truncate %s to %d: %w", bad.File, bad.Pos, err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("log: fsync %s: %w", bad.File, err)
	}
	return nil
}

// rewriteIndexes makes the index files equal to the indexes rebuilt by the scan, rewriting a file that is
// missing, short, stale or damaged.
func (l *Log) rewriteIndexes(s *segment) error {
	for _, ix := range []struct {
		f       vfs.File
		want    []byte
		flushed *int
	}{{s.index, s.offIdx, &s.offFlushed}, {s.timeIndex, s.timeIdx, &s.timeFlushed}} {
		same, err := fileEquals(ix.f, ix.want)
		if err != nil {
			return err
		}
		if !same {
			l.logger.Info("log: rebuilding index file", "file", ix.f.Name())
			if err := rewriteFile(ix.f, ix.want); err != nil {
				return err
			}
		}
		*ix.flushed = len(ix.want)
	}
	return nil
}

func fileEquals(f vfs.File, want []byte) (bool, error) {
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("log: stat %s: %w", f.Name(), err)
	}
	if st.Size() != int64(len(want)) {
		return false, nil
	}
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("log: read %s: %w", f.Name(), err)
	}
	return bytes.Equal(got, want), nil
}

func rewriteFile(f vfs.File, data []byte) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("log: truncate %s: %w", f.Name(), err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("log: write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("log: fsync %s: %w", f.Name(), err)
	}
	return nil
}

// startFresh creates the first segment of an empty log at offset start.
func (l *Log) startFresh(start int64) error {
	s, err := l.newSegmentFiles(start, nil)
	if err != nil {
		return err
	}
	l.segs = []*segment{s}
	l.active = s
	l.start.Store(start)
	l.end.Store(start)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("log: sync dir %s: %w", l.dir, err)
	}
	return nil
}

// truncateFullyAndStartAt removes every segment and starts an empty log at start.
func (l *Log) truncateFullyAndStartAt(start int64) error {
	if l.o.Raft {
		// The raft index to start at is not known: retention and DeleteRecords on raft logs wait for snapshots.
		return &CorruptionError{File: filepath.Join(l.dir, startFile), Pos: 0, Offset: start,
			Reason: "raft log: log start offset beyond the recovered log end"}
	}
	for _, s := range l.segs {
		s.close()
		if err := removeSegmentFiles(l.fs, l.dir, s.base); err != nil {
			return err
		}
	}
	l.segs = nil
	return l.startFresh(start)
}
