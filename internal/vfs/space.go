package vfs

import (
	"errors"
	"os"
	"syscall"
)

// ErrNoSpaceInfo is returned by Space for a file system that cannot report its size (MemFS, ErrorFS).
var ErrNoSpaceInfo = errors.New("vfs: file system does not report its size")

// Space reports the size of the volume holding dir and the bytes an unprivileged writer may still use on
// it, both in bytes (statfs(2): f_blocks and f_bavail times f_frsize; what Kafka's DescribeLogDirs v4
// reports as TotalBytes and UsableBytes, KIP-827). Only OS answers: other file systems give
// ErrNoSpaceInfo; a statfs failure is an *os.PathError.
func Space(fsys FS, dir string) (total, usable int64, err error) {
	if _, ok := fsys.(osFS); !ok {
		return 0, 0, ErrNoSpaceInfo
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Blocks) * st.Frsize, int64(st.Bavail) * st.Frsize, nil
}
