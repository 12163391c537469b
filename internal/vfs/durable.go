package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The durable-write helpers below are the one way Kawa writes a file or
// creates a directory outside the segment files (which the log writes through
// its own Files): producer snapshots, the aborted-transaction index, the topic
// catalog, the producer-ID block, the cluster ID and the log start offset all
// go through them, on any FS, so the crash-clone FS can check them.

// TempSuffix names the temporary file WriteFileAtomic renames into place. A
// leftover one (a crash before the rename) is overwritten by the next write.
const TempSuffix = ".tmp"

// WriteFileAtomic durably replaces name with b: it writes name+".tmp", fsyncs
// it, renames it over name and fsyncs the directory, so after a crash name
// holds either its old contents or b, never a mix, and once it returns nil b
// survives a power loss. The directory must exist (see MkdirAllDurable).
// Errors name the step and wrap the FS error.
func WriteFileAtomic(fsys FS, name string, b []byte) error {
	tmp := name + TempSuffix
	if err := writeSynced(fsys, tmp, os.O_TRUNC, b); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("vfs: rename %s: %w", tmp, err)
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("vfs: fsync directory of %s: %w", name, err)
	}
	return nil
}

// AppendFile durably appends b to name, creating it if missing: it writes at
// the end, fsyncs the file and, when it created the file, fsyncs the
// directory. Once it returns nil, the file holds b at its end across a power
// loss; after a crash during the call the file may end with a prefix of b, so
// formats written this way must detect a torn last record (a CRC per record).
func AppendFile(fsys FS, name string, b []byte) error {
	_, statErr := fsys.Stat(name)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := writeSynced(fsys, name, os.O_APPEND, b); err != nil {
		return err
	}
	if created {
		if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
			return fmt.Errorf("vfs: fsync directory of %s: %w", name, err)
		}
	}
	return nil
}

// writeSynced opens name for writing with O_CREATE and mode (O_TRUNC or
// O_APPEND), writes b, fsyncs and closes it; the first error wins.
func writeSynced(fsys FS, name string, mode int, b []byte) error {
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		return fmt.Errorf("vfs: open %s: %w", name, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("vfs: write %s: %w", name, err)
	}
	return nil
}

// ReadFile returns the whole contents of name. A missing file is an error
// wrapping os.ErrNotExist.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b[:n], nil
}

// MkdirAllDurable creates dir and any missing parents, fsyncing the parent of
// each directory it creates, so the whole path survives a power loss (a new
// directory's entry is durable only once its parent is fsynced). An existing
// dir is left as it is.
func MkdirAllDurable(fsys FS, dir string) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vfs: stat %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAllDurable(fsys, parent); err != nil {
			return err
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("vfs: mkdir %s: %w", dir, err)
	}
	if err := fsys.SyncDir(parent); err != nil {
		return fmt.Errorf("vfs: fsync directory %s: %w", parent, err)
	}
	return nil
}

// RemoveAllDurable removes dir and everything below it, then fsyncs dir's
// parent so the removal survives a power loss. A missing dir is not an error.
func RemoveAllDurable(fsys FS, dir string) error {
	if err := removeTree(fsys, dir); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("vfs: fsync directory of %s: %w", dir, err)
	}
	return nil
}

func removeTree(fsys FS, name string) error {
	st, err := fsys.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vfs: stat %s: %w", name, err)
	}
	if st.IsDir() {
		ents, err := fsys.ReadDir(name)
		if err != nil {
			return fmt.Errorf("vfs: read directory %s: %w", name, err)
		}
		for _, e := range ents {
			if err := removeTree(fsys, filepath.Join(name, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := fsys.Remove(name); err != nil {
		return fmt.Errorf("vfs: remove %s: %w", name, err)
	}
	return nil
}
