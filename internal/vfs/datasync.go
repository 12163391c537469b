package vfs

import (
	"os"
	"syscall"
)

// DataSync flushes f's data (and the metadata needed to read it back, such
// as its size) to stable storage: fdatasync(2) for OS files, which skips
// timestamp updates and measured ~20% more syncs/s than fsync on this
// project's machines (shared/bench-protocol.md); Sync for other files.
func DataSync(f File) error {
	if of, ok := f.(*os.File); ok {
		for {
			err := syscall.Fdatasync(int(of.Fd()))
			if err != syscall.EINTR {
				if err != nil {
					return &os.PathError{Op: "fdatasync", Path: of.Name(), Err: err}
				}
				return nil
			}
		}
	}
	return f.Sync()
}
