package vfs

import (
	"os"
)

// Operation names passed to an ErrorFS inject function.
const (
	OpOpen     = "open"
	OpRemove   = "remove"
	OpRename   = "rename" // name is the old name
	OpMkdirAll = "mkdirall"
	OpReadDir  = "readdir"
	OpStat     = "stat" // FS.Stat and File.Stat
	OpSyncDir  = "syncdir"
	OpRead     = "read" // File.ReadAt
	OpWrite    = "write"
	OpSync     = "sync" // File.Sync
	OpTruncate = "truncate"
	OpClose    = "close"
)

// ErrorFS wraps an FS and calls inject before every operation; a non-nil result is returned instead of running
// the operation. Tests use it to fail a chosen write or fsync, or (returning nil) to count operations.
// Its Files are wrappers, so they are never *os.File.
type ErrorFS struct {
	fs     FS
	inject func(op, name string) error
}

// NewErrorFS wraps fs. inject gets one of the Op* names and the file or directory name; it may be called
// concurrently.
func NewErrorFS(fs FS, inject func(op, name string) error) *ErrorFS {
	return &ErrorFS{fs: fs, inject: inject}
}

func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := e.inject(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, inject: e.inject}, nil
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.inject(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.inject(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *ErrorFS) MkdirAll(name string, perm os.FileMode) error {
	if err := e.inject(OpMkdirAll, name); err != nil {
		return err
	}
	return e.fs.MkdirAll(name, perm)
}

func (e *ErrorFS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := e.inject(OpReadDir, name); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(name)
}

func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.inject(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *ErrorFS) SyncDir(name string) error {
	if err := e.inject(OpSyncDir, name); err != nil {
		return err
	}
	return e.fs.SyncDir(name)
}

type errorFile struct {
	f      File
	inject func(op, name string) error
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inject(OpRead, f.f.Name()); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inject(OpWrite, f.f.Name()); err != nil {
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.inject(OpWrite, f.f.Name()); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *errorFile) Close() error {
	if err := f.inject(OpClose, f.f.Name()); err != nil {
		return err
	}
	return f.f.Close()
}

func (f *errorFile) Sync() error {
	if err := f.inject(OpSync, f.f.Name()); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.inject(OpTruncate, f.f.Name()); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Stat() (os.FileInfo, error) {
	if err := f.inject(OpStat, f.f.Name()); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *errorFile) Name() string { return f.f.Name() }
