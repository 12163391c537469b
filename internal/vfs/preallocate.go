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

// PreallocateZeros is Preallocate done by writing zeros after f's end instead of fallocate(2): on ext4,
// fallocate leaves unwritten extents, and the first write into one converts it, a metadata change that the
// following fdatasync commits to the journal just as an appending write's size change would. Written zeros
// are ordinary blocks, so an fdatasync after an overwrite inside them has only data to flush. Measured on
// this project's ext4 VMs (1.1 KB write + fdatasync each, five interleaved 1.5 s rounds): fallocate ahead
// p50 116-157 µs, p90 0.4-2.5 ms; zeros written ahead in 1 MiB steps p50 102-121 µs, p90 0.22-0.67 ms. The
// price is that every preallocated byte is written twice (zeros, then data) and reaches the disk with the
// next fsync, so it pays off when fsyncs are small. Errors: the first failed write (ENOSPC/EDQUOT when the
// space runs out; the file may have been partly extended, the caller truncates back), or Stat's.
func PreallocateZeros(f File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	for off := st.Size(); off < size; {
		n := int(min(int64(len(zeroChunk)), size-off))
		if _, err := f.WriteAt(zeroChunk[:n], off); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// zeroChunk is the source of PreallocateZeros's writes; never written to.
var zeroChunk = make([]byte, 64<<10)
