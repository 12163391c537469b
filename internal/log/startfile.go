package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// The log-start-offset file holds the log start offset raised by DeleteRecords or retention, and a raft log's
// <base>.raft file the raft index of its segment's first batch (Options.Raft), both as one checked number:
//
//	version uint16 (1) | value int64 | CRC-32C of the preceding 10 bytes uint32   (big-endian)
//
// Both are written by vfs.WriteFileAtomic (write-temp, fsync, rename, fsync-dir), so they are always whole; a
// bad checksum is corruption.
const (
	startFile        = "log-start-offset"
	startFileVersion = 1
	startFileLen     = 14
)

// readStart returns the persisted log start offset; found is false when there is no file.
func readStart(fs vfs.FS, dir string) (start int64, found bool, err error) {
	return readChecked(fs, filepath.Join(dir, startFile), "log start offset")
}

// readChecked reads a checked-number file (above); found is false when there is no file. what names the
// number in errors.
func readChecked(fs vfs.FS, name, what string) (v int64, found bool, err error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("log: open %s: %w", name, err)
	}
	defer f.Close()
	buf := make([]byte, startFileLen+1)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("log: read %s: %w", name, err)
	}
	bad := func(reason string) (int64, bool, error) {
		return 0, false, &CorruptionError{File: name, Pos: 0, Offset: -1, Reason: reason}
	}
	if n != startFileLen {
		return bad(fmt.Sprintf("%d bytes, want %d", n, startFileLen))
	}
	if v := binary.BigEndian.Uint16(buf); v != startFileVersion {
		return bad(fmt.Sprintf("unknown version %d", v))
	}
	if batch.Checksum(buf[:10]) != binary.BigEndian.Uint32(buf[10:]) {
		return bad("checksum mismatch")
	}
	v = int64(binary.BigEndian.Uint64(buf[2:]))
	if v < 0 {
		return bad(fmt.Sprintf("negative %s %d", what, v))
	}
	return v, true, nil
}

// writeStart durably replaces the log-start-offset file.
func writeStart(fs vfs.FS, dir string, start int64) error {
	return writeChecked(fs, filepath.Join(dir, startFile), "log start offset", start)
}

// writeChecked durably replaces a checked-number file (above) with v.
func writeChecked(fs vfs.FS, name, what string, v int64) error {
	buf := binary.BigEndian.AppendUint16(nil, startFileVersion)
	buf = binary.BigEndian.AppendUint64(buf, uint64(v))
	buf = binary.BigEndian.AppendUint32(buf, batch.Checksum(buf))
	if err := vfs.WriteFileAtomic(fs, name, buf); err != nil {
		return fmt.Errorf("log: persist %s %d: %w", what, v, err)
	}
	return nil
}
