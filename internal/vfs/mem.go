package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that tracks what is durable, in the spirit of pebble's strict MemFS.
//
// Each file keeps its current bytes and the bytes as of its last Sync; each directory keeps its current entries
// and the entries as of its last SyncDir. CrashClone returns the durable view, as a power loss would leave it.
// Open handles keep working on a file that was removed or renamed, as on POSIX.
//
// The zero value is not usable; call NewMem.
type MemFS struct {
	mu   sync.Mutex // guards every directory's children and syncedChildren
	root *memNode
}

// memNode is a file or a directory.
type memNode struct {
	dir bool
	// Directories (guarded by MemFS.mu).
	children       map[string]*memNode
	syncedChildren map[string]*memNode

	// Files.
	mu      sync.RWMutex // guards data, synced, modTime
	data    []byte
	synced  []byte
	modTime time.Time
}

// NewMem returns an empty in-memory FS whose root directory "/" exists and is durable.
func NewMem() *MemFS {
	return &MemFS{root: newDir()}
}

func newDir() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}, modTime: time.Now()}
}

// split turns a name into path elements below the root; relative names are taken from the root.
func split(name string) []string {
	clean := filepath.ToSlash(filepath.Clean("/" + name))
	var out []string
	for _, e := range strings.Split(clean, "/") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// lookupLocked walks to name; fs.mu must be held.
func (m *MemFS) lookupLocked(name string) (*memNode, error) {
	n := m.root
	for _, e := range split(name) {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.children[e]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parentLocked returns the directory holding name and name's last element.
func (m *MemFS) parentLocked(name string) (*memNode, string, error) {
	els := split(name)
	if len(els) == 0 {
		return nil, "", fs.ErrInvalid // the root has no parent
	}
	dir, err := m.lookupLocked(strings.Join(els[:len(els)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", syscall.ENOTDIR
	}
	return dir, els[len(els)-1], nil
}

// OpenFile opens or creates a file. It honours O_CREATE, O_EXCL, O_TRUNC, O_APPEND and the access mode.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked(name)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	n, ok := dir.children[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ok && n.dir:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &memNode{modTime: time.Now()}
		dir.children[base] = n
	}
	f := &memFile{n: n, name: name, flag: flag}
	if flag&os.O_TRUNC != 0 && f.writable() {
		n.mu.Lock()
		n.data = n.data[:0:0]
		n.modTime = time.Now()
		n.mu.Unlock()
	}
	return f, nil
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked(name)
	if err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	n, ok := dir.children[base]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(dir.children, base)
	return nil
}

// Rename moves oldname to newname, replacing a file at newname.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	odir, obase, err := m.parentLocked(oldname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	n, ok := odir.children[obase]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	ndir, nbase, err := m.parentLocked(newname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if old, ok := ndir.children[nbase]; ok && old.dir && (!n.dir || len(old.children) > 0) {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EEXIST}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	return nil
}

// MkdirAll creates name and missing parents. New directories are not durable until their parent is SyncDir'ed.
func (m *MemFS) MkdirAll(name string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, e := range split(name) {
		c, ok := n.children[e]
		if !ok {
			c = newDir()
			n.children[e] = c
		}
		if !c.dir {
			return &os.PathError{Op: "mkdir", Path: name, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return nil
}

// ReadDir lists the current entries of a directory, sorted by name.
func (m *MemFS) ReadDir(name string) ([]os.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(name)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: name, Err: err}
	}
	if !n.dir {
		return nil, &os.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]os.DirEntry, len(names))
	for i, k := range names {
		out[i] = fs.FileInfoToDirEntry(n.children[k].info(k))
	}
	return out, nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(name)
	if err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	return n.info(filepath.Base(name)), nil
}

// SyncDir makes the directory's current entries durable.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(name)
	if err != nil {
		return &os.PathError{Op: "syncdir", Path: name, Err: err}
	}
	if !n.dir {
		return &os.PathError{Op: "syncdir", Path: name, Err: syscall.ENOTDIR}
	}
	n.syncedChildren = maps(n.children)
	return nil
}

func maps(in map[string]*memNode) map[string]*memNode {
	out := make(map[string]*memNode, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// CrashClone returns a copy holding only the durable state: each directory's entries as of its last SyncDir, each
// file's bytes as of its last Sync. Everything in the copy is durable. The receiver is unchanged.
func (m *MemFS) CrashClone() *MemFS {
	return m.CrashCloneFunc(func(_ string, synced, _ []byte) []byte { return synced })
}

// CrashCloneFunc is CrashClone with a say in what survives of each file: keep gets the file's path, its durable
// bytes and its current bytes and returns the bytes the copy holds (it must not retain or modify its arguments).
// Returning the durable bytes plus a prefix of an appended tail models a torn write.
// Directory entries still follow SyncDir only.
func (m *MemFS) CrashCloneFunc(keep func(name string, synced, current []byte) []byte) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: cloneDurable(m.root, "/", keep)}
}

func cloneDurable(n *memNode, path string, keep func(string, []byte, []byte) []byte) *memNode {
	if !n.dir {
		n.mu.RLock()
		data := slices.Clone(keep(path, n.synced, n.data))
		modTime := n.modTime // under the lock: a write may be updating it
		n.mu.RUnlock()
		return &memNode{data: data, synced: slices.Clone(data), modTime: modTime}
	}
	c := newDir()
	for name, child := range n.syncedChildren {
		cc := cloneDurable(child, filepath.Join(path, name), keep)
		c.children[name] = cc
		c.syncedChildren[name] = cc
	}
	return c
}
