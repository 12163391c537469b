package vfs

import (
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// memFile is an open handle on a MemFS file.
type memFile struct {
	n      *memNode
	name   string
	flag   int
	closed atomic.Bool

	offMu sync.Mutex // guards off (the Write offset)
	off   int64
}

func (f *memFile) writable() bool { return f.flag&(os.O_WRONLY|os.O_RDWR) != 0 }
func (f *memFile) readable() bool { return f.flag&os.O_WRONLY == 0 }

func (f *memFile) check(op string, write bool) error {
	if f.closed.Load() {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	if write && !f.writable() || !write && !f.readable() {
		return &os.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid} // as os.File does
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.writeLocked(p, off)
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.offMu.Lock()
	defer f.offMu.Unlock()
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		f.off = int64(len(f.n.data))
	}
	f.n.writeLocked(p, f.off)
	f.off += int64(len(p))
	return len(p), nil
}

// writeLocked writes p at off, zero-filling any gap; n.mu must be held.
func (n *memNode) writeLocked(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		old := len(n.data)
		n.data = slices.Grow(n.data, int(end)-old)[:end]
		clear(n.data[old:]) // the array may hold bytes from before a Truncate
	}
	copy(n.data[off:], p)
	n.modTime = time.Now()
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	f.n.modTime = time.Now()
	return nil
}

// Sync records the current bytes as the durable ones.
func (f *memFile) Sync() error {
	if f.closed.Load() {
		return &os.PathError{Op: "sync", Path: f.name, Err: os.ErrClosed}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	if f.closed.Load() {
		return nil, &os.PathError{Op: "stat", Path: f.name, Err: os.ErrClosed}
	}
	return f.n.info(filepathBase(f.name)), nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Close() error {
	if f.closed.Swap(true) {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	return nil
}

// info describes the node under the given base name.
func (n *memNode) info(name string) os.FileInfo {
	if n.dir {
		return memInfo{name: name, mode: fs.ModeDir | 0o755, modTime: n.modTime}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return memInfo{name: name, size: int64(len(n.data)), mode: 0o644, modTime: n.modTime}
}

func filepathBase(name string) string {
	els := split(name)
	if len(els) == 0 {
		return "/"
	}
	return els[len(els)-1]
}

type memInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.modTime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }
