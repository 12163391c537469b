// Package vfs is the narrow file-system interface Kawa's storage (log, meta) is written against.
//
// Three implementations:
//   - OS: real files. Its File values are *os.File, so a fetch path can type-assert a File and use sendfile.
//   - MemFS (NewMem): in memory, with CrashClone, which keeps only what was made durable: a file's contents as of
//     its last Sync, and a directory's entries as of its last SyncDir. Tests use it to check fsync discipline.
//   - ErrorFS (NewErrorFS): wraps another FS and lets a test fail (or just count) chosen operations.
//
// Durability model (the same for every implementation): File.Sync makes a file's contents durable; SyncDir makes
// the set of names in one directory durable (creations, removals, renames). A new file needs both to survive a
// crash, and a new directory needs SyncDir on its parent.
package vfs

import (
	"io"
	"os"
)

// FS is the subset of file-system operations Kawa's storage needs. Names use the host's path syntax.
type FS interface {
	// OpenFile opens name with os.O_* flags, as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces new with old.
	Rename(oldname, newname string) error
	// MkdirAll creates name and any missing parents. It does not make them durable: see SyncDir.
	MkdirAll(name string, perm os.FileMode) error
	// ReadDir lists a directory sorted by name.
	ReadDir(name string) ([]os.DirEntry, error)
	// Stat describes a file or directory.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries durable (fsync on the directory).
	SyncDir(name string) error
}

// File is an open file. ReadAt and WriteAt may be called concurrently with each other; Write uses and advances
// the file offset (or appends, with os.O_APPEND).
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	// Name is the name the file was opened with.
	Name() string
}

// OS is the real file system. Every File it returns is an *os.File.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		// NB: return a nil interface, not a typed nil *os.File.
		return nil, err
	}
	return f, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}
