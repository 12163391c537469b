package vfs

import (
	"errors"
	"os"
	"syscall"
)

// Preallocate extends f to size bytes (it never shrinks it), so that later writes inside [0, size) change
// neither the file's size nor, on OS files, its block allocation, and an fdatasync after them has only data
// to flush, not a size change for the journal (Kafka's log.preallocate). The new bytes read as zeros.
//
// For OS files it is fallocate(2) with mode 0 (blocks reserved as unwritten extents, size extended); where
// the file system does not support fallocate (EOPNOTSUPP, ENOSYS: FUSE, tmpfs before 2.6.38) it falls back
// to ftruncate, a sparse extension. Other files are extended with Truncate. Errors: ENOSPC/EDQUOT when the
// space cannot be reserved (the file may have been partly extended; the caller truncates back), or the
// Truncate/fallocate error wrapped in *os.PathError.
func Preallocate(f File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= size {
		return nil
	}
	if of, ok := f.(*os.File); ok {
		for {
			err = syscall.Fallocate(int(of.Fd()), 0, st.Size(), size-st.Size())
			if err != syscall.EINTR {
				break
			}
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.ENOSYS) {
			return &os.PathError{Op: "fallocate", Path: of.Name(), Err: err}
		}
	}
	return f.Truncate(size)
}
