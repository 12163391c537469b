package log

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// FileCache bounds the file descriptors that segment files (.log, .index, .timeindex) hold, over every Log that
// shares it. A segment's files are opened on demand and kept open while used; idle ones are closed, least
// recently used first, once more than Max are open. So a broker with many partitions, or many old segments,
// needs about Max descriptors for its logs rather than three per segment.
//
// Max is a soft bound: files in use (an Append's write, a Read's scan, an fsync) are never closed under their
// user, so a burst of concurrent users may hold more for its duration. When opening fails because the process is
// out of descriptors (EMFILE, ENFILE), the cache closes an idle file and tries again; with none idle the error
// (wrapping syscall.EMFILE) goes to the operation that needed the file, which fails alone and leaves the log
// healthy (it is not a sticky error): a produce gets KAFKA_STORAGE_ERROR and can be retried.
//
// NB: closing a file with unsynced writes does not lose them (they are in the page cache, and a later fsync
// through a new descriptor flushes the same inode), and since Linux 4.16 a descriptor opened after a writeback
// error still reports it on fsync, so the durability promise holds across a close and reopen.
type FileCache struct {
	mu   sync.Mutex
	max  int
	open int       // descriptors held, idle or in use
	idle list.List // of *lazyFile open with no user; least recently used at the front
}

// NewFileCache returns a cache keeping at most max segment files open (soft bound, see FileCache). max <= 0
// means DefaultMaxOpenFiles().
func NewFileCache(max int) *FileCache {
	if max <= 0 {
		max = DefaultMaxOpenFiles()
	}
	return &FileCache{max: max}
}

// DefaultMaxOpenFiles is half the process's soft open-file limit (RLIMIT_NOFILE), at least 16, leaving the other
// half for connections and other files; 4096 if the limit cannot be read.
func DefaultMaxOpenFiles() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return 4096
	}
	return int(max(min(r.Cur/2, 1<<20), 16))
}

// Max is the cache's bound on open files.
func (c *FileCache) Max() int { return c.max }

// Open is the number of descriptors the cache's files hold now.
func (c *FileCache) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

var (
	defaultCacheOnce sync.Once
	defaultCache     *FileCache
)

// sharedDefaultCache is the cache of Logs opened without Options.Files.
func sharedDefaultCache() *FileCache {
	defaultCacheOnce.Do(func() { defaultCache = NewFileCache(0) })
	return defaultCache
}

// openError is a failure to open a segment file that leaves the log's data and state untouched (the process is
// out of descriptors): the operation fails alone and nothing becomes sticky.
type openError struct{ err error }

func (e *openError) Error() string { return e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

// isOpenError reports whether err is an openError.
func isOpenError(err error) bool {
	var oe *openError
	return errors.As(err, &oe)
}

// lazyFile is a vfs.File whose descriptor the FileCache may close while it is idle and that reopens on the next
// use. Its state is guarded by the cache's mutex.
type lazyFile struct {
	c    *FileCache
	fs   vfs.FS
	name string

	f      vfs.File      // nil while closed by the cache
	refs   int           // users of f
	elem   *list.Element // in c.idle when f != nil and refs == 0
	closed bool          // Close was called
	gone   bool          // the name now holds another file (a cleaned segment replaced it): never reopen
}

// noReopen makes a later reopen fail: the open descriptor (if any) stays usable, but once the cache closes it the
// name would open the segment that replaced this one.
func (lf *lazyFile) noReopen() {
	lf.c.mu.Lock()
	lf.gone = true
	lf.c.mu.Unlock()
}

// openLazy opens name with flag now (so creation, truncation and a missing file happen and are reported here)
// and returns it as a lazyFile; later reopens use O_RDWR only.
func (c *FileCache) openLazy(fs vfs.FS, name string, flag int) (*lazyFile, error) {
	lf := &lazyFile{c: c, fs: fs, name: name}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.openLocked(fs, name, flag)
	if err != nil {
		return nil, err
	}
	lf.f = f
	lf.elem = c.idle.PushBack(lf)
	c.trimLocked()
	return lf, nil
}

// openLocked opens a file, making room first and closing idle files to retry when out of descriptors.
func (c *FileCache) openLocked(fs vfs.FS, name string, flag int) (vfs.File, error) {
	c.trimTo(c.max - 1)
	for {
		f, err := fs.OpenFile(name, flag, 0o644)
		if err == nil {
			c.open++
			return f, nil
		}
		if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
			return nil, err
		}
		if !c.evictOneLocked() {
			return nil, &openError{fmt.Errorf("log: open %s: %w (%d segment files open, cache bound %d)", name, err, c.open, c.max)}
		}
	}
}

// trimLocked closes idle files while more than max are open.
func (c *FileCache) trimLocked() { c.trimTo(c.max) }

func (c *FileCache) trimTo(n int) {
	for c.open > n && c.evictOneLocked() {
	}
}

// evictOneLocked closes the least recently used idle file; false if none is idle.
func (c *FileCache) evictOneLocked() bool {
	e := c.idle.Front()
	if e == nil {
		return false
	}
	lf := c.idle.Remove(e).(*lazyFile)
	lf.elem = nil
	_ = lf.f.Close() // idle, and unsynced writes stay in the page cache (see FileCache)
	lf.f = nil
	c.open--
	return true
}

func (lf *lazyFile) acquire() (vfs.File, error) {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if lf.closed {
		return nil, fmt.Errorf("log: %s: %w", lf.name, os.ErrClosed)
	}
	if lf.f == nil && lf.gone {
		return nil, fmt.Errorf("log: %s was replaced by its cleaned copy: %w", lf.name, os.ErrClosed)
	}
	if lf.f == nil {
		f, err := c.openLocked(lf.fs, lf.name, os.O_RDWR)
		if err != nil {
			return nil, err
		}
		lf.f = f
	}
	if lf.elem != nil {
		c.idle.Remove(lf.elem)
		lf.elem = nil
	}
	lf.refs++
	return lf.f, nil
}

func (lf *lazyFile) release() {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	lf.refs--
	if lf.refs > 0 {
		return
	}
	if lf.closed {
		_ = lf.f.Close()
		lf.f = nil
		c.open--
		return
	}
	lf.elem = c.idle.PushBack(lf)
	c.trimLocked()
}

// Close closes the descriptor (at once, or when its last user is done) and makes later calls fail.
func (lf *lazyFile) Close() error {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if lf.closed {
		return nil
	}
	lf.closed = true
	if lf.elem != nil {
		c.idle.Remove(lf.elem)
		lf.elem = nil
	}
	if lf.f == nil || lf.refs > 0 {
		return nil
	}
	err := lf.f.Close()
	lf.f = nil
	c.open--
	return err
}

func (lf *lazyFile) Name() string { return lf.name }

func (lf *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := lf.acquire()
	if err != nil {
		return 0, err
	}
	defer lf.release()
	return f.ReadAt(p, off)
}

func (lf *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := lf.acquire()
	if err != nil {
		return 0, err
	}
	defer lf.release()
	return f.WriteAt(p, off)
}

// Write is not supported: a reopened descriptor would not keep the file offset. Segment files are written
// with WriteAt.
func (lf *lazyFile) Write([]byte) (int, error) {
	return 0, fmt.Errorf("log: %s: Write on a cached segment file (use WriteAt)", lf.name)
}

func (lf *lazyFile) with(fn func(vfs.File) error) error {
	f, err := lf.acquire()
	if err != nil {
		return err
	}
	defer lf.release()
	return fn(f)
}

func (lf *lazyFile) Sync() error { return lf.with(func(f vfs.File) error { return f.Sync() }) }

// DataSync is vfs.DataSync (fdatasync on real files) on the underlying descriptor.
func (lf *lazyFile) DataSync() error { return lf.with(vfs.DataSync) }

// Preallocate is vfs.Preallocate on the underlying descriptor.
func (lf *lazyFile) Preallocate(size int64) error {
	return lf.with(func(f vfs.File) error { return vfs.Preallocate(f, size) })
}

// PreallocateZeros is vfs.PreallocateZeros on the underlying descriptor.
func (lf *lazyFile) PreallocateZeros(size int64) error {
	return lf.with(func(f vfs.File) error { return vfs.PreallocateZeros(f, size) })
}

func (lf *lazyFile) Truncate(size int64) error {
	return lf.with(func(f vfs.File) error { return f.Truncate(size) })
}

func (lf *lazyFile) Stat() (os.FileInfo, error) {
	var fi os.FileInfo
	err := lf.with(func(f vfs.File) (err error) { fi, err = f.Stat(); return err })
	return fi, err
}
