package powerfs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// node is a file or directory of the mount. It holds no state of its own:
// every operation goes to the MemFS by the node's current path, which the
// go-fuse inode tree keeps up to date through renames.
type node struct {
	gofs.Inode
	mem *vfs.MemFS
}

var (
	_ gofs.NodeLookuper  = (*node)(nil)
	_ gofs.NodeGetattrer = (*node)(nil)
	_ gofs.NodeSetattrer = (*node)(nil)
	_ gofs.NodeCreater   = (*node)(nil)
	_ gofs.NodeOpener    = (*node)(nil)
	_ gofs.NodeMkdirer   = (*node)(nil)
	_ gofs.NodeUnlinker  = (*node)(nil)
	_ gofs.NodeRmdirer   = (*node)(nil)
	_ gofs.NodeRenamer   = (*node)(nil)
	_ gofs.NodeReaddirer = (*node)(nil)
	_ gofs.NodeFsyncer   = (*node)(nil)
)

// name is the node's path in the MemFS.
func (n *node) name() string { return "/" + n.Path(nil) }

func (n *node) child(name string) string { return path.Join(n.name(), name) }

// errno maps a MemFS error to the errno the kernel passes on.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, os.ErrClosed):
		return syscall.EBADF
	}
	return syscall.EIO
}

func fillAttr(fi os.FileInfo, out *fuse.Attr) {
	out.Size = uint64(fi.Size())
	out.Blocks = (out.Size + 511) / 512
	out.Mode = uint32(fi.Mode().Perm())
	if fi.IsDir() {
		out.Mode |= syscall.S_IFDIR
		out.Nlink = 2
	} else {
		out.Mode |= syscall.S_IFREG
		out.Nlink = 1
	}
	out.SetTimes(nil, ptr(fi.ModTime()), ptr(fi.ModTime()))
}

func ptr[T any](v T) *T { return &v }

func (n *node) newChild(ctx context.Context, fi os.FileInfo, out *fuse.EntryOut) *gofs.Inode {
	fillAttr(fi, &out.Attr)
	mode := uint32(syscall.S_IFREG)
	if fi.IsDir() {
		mode = syscall.S_IFDIR
	}
	return n.NewInode(ctx, &node{mem: n.mem}, gofs.StableAttr{Mode: mode})
}

// Lookup implements NodeLookuper.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	fi, err := n.mem.Stat(n.child(name))
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, fi, out), 0
}

// Getattr implements NodeGetattrer; an open handle answers for a file that
// was removed or renamed while open.
func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var fi os.FileInfo
	var err error
	if h, ok := f.(*handle); ok {
		fi, err = h.f.Stat()
	} else {
		fi, err = n.mem.Stat(n.name())
	}
	if err != nil {
		return errno(err)
	}
	fillAttr(fi, &out.Attr)
	return 0
}

// Setattr implements NodeSetattrer: only the size (truncate) is kept;
// modes, owners and times are accepted and not stored.
func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		h, isHandle := f.(*handle)
		var file vfs.File
		if isHandle {
			file = h.f
		} else {
			var err error
			if file, err = n.mem.OpenFile(n.name(), os.O_WRONLY, 0); err != nil {
				return errno(err)
			}
			defer file.Close()
		}
		if err := file.Truncate(int64(size)); err != nil {
			return errno(err)
		}
	}
	return n.Getattr(ctx, f, out)
}

// openFlags keeps the flags MemFS honours; O_CREAT and O_EXCL were
// handled by the kernel and Create.
func openFlags(flags uint32) int {
	return int(flags) & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC)
}

// Create implements NodeCreater.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	p := n.child(name)
	fl := openFlags(flags) | os.O_CREATE
	if flags&syscall.O_EXCL != 0 {
		fl |= os.O_EXCL
	}
	f, err := n.mem.OpenFile(p, fl, os.FileMode(mode).Perm())
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, 0, errno(err)
	}
	return n.newChild(ctx, fi, out), &handle{f: f, append: flags&syscall.O_APPEND != 0}, 0, 0
}

// Open implements NodeOpener.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	f, err := n.mem.OpenFile(n.name(), openFlags(flags), 0)
	if err != nil {
		return nil, 0, errno(err)
	}
	return &handle{f: f, append: flags&syscall.O_APPEND != 0}, 0, 0
}

// Mkdir implements NodeMkdirer.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	p := n.child(name)
	if _, err := n.mem.Stat(p); err == nil {
		return nil, syscall.EEXIST
	}
	if err := n.mem.MkdirAll(p, os.FileMode(mode).Perm()); err != nil {
		return nil, errno(err)
	}
	fi, err := n.mem.Stat(p)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, fi, out), 0
}

// Unlink implements NodeUnlinker.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	p := n.child(name)
	if fi, err := n.mem.Stat(p); err == nil && fi.IsDir() {
		return syscall.EISDIR
	}
	return errno(n.mem.Remove(p))
}

// Rmdir implements NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	p := n.child(name)
	fi, err := n.mem.Stat(p)
	if err != nil {
		return errno(err)
	}
	if !fi.IsDir() {
		return syscall.ENOTDIR
	}
	return errno(n.mem.Remove(p))
}

// Rename implements NodeRenamer; RENAME_EXCHANGE is refused and
// RENAME_NOREPLACE honoured.
func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	const renameNoReplace, renameExchange = 1, 2
	if flags&renameExchange != 0 {
		return syscall.EINVAL
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	dst := np.child(newName)
	if flags&renameNoReplace != 0 {
		if _, err := n.mem.Stat(dst); err == nil {
			return syscall.EEXIST
		}
	}
	return errno(n.mem.Rename(n.child(name), dst))
}

// Readdir implements NodeReaddirer.
func (n *node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ents, err := n.mem.ReadDir(n.name())
	if err != nil {
		return nil, errno(err)
	}
	list := make([]fuse.DirEntry, len(ents))
	for i, e := range ents {
		mode := uint32(syscall.S_IFREG)
		if e.IsDir() {
			mode = syscall.S_IFDIR
		}
		list[i] = fuse.DirEntry{Name: e.Name(), Mode: mode}
	}
	return gofs.NewListDirStream(list), 0
}

// Fsync implements NodeFsyncer for files (fsync, fdatasync: both make the
// contents durable) and directories (the entries).
func (n *node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	if n.IsDir() {
		return errno(n.mem.SyncDir(n.name()))
	}
	if h, ok := f.(*handle); ok {
		return errno(h.f.Sync())
	}
	file, err := n.mem.OpenFile(n.name(), os.O_RDONLY, 0)
	if err != nil {
		return errno(err)
	}
	defer file.Close()
	return errno(file.Sync())
}

// handle is an open file.
type handle struct {
	f      vfs.File
	append bool // O_APPEND: every write goes to the end, whatever offset the kernel sends
}

var (
	_ gofs.FileReader    = (*handle)(nil)
	_ gofs.FileWriter    = (*handle)(nil)
	_ gofs.FileReleaser  = (*handle)(nil)
	_ gofs.FileGetattrer = (*handle)(nil)
	_ gofs.FileFlusher   = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	k, err := h.f.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:k]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	var k int
	var err error
	if h.append {
		k, err = h.f.Write(data)
	} else {
		k, err = h.f.WriteAt(data, off)
	}
	return uint32(k), errno(err)
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	fi, err := h.f.Stat()
	if err != nil {
		return errno(err)
	}
	fillAttr(fi, &out.Attr)
	return 0
}

// Flush is close(2) on one descriptor of the handle: nothing to do, the
// bytes are already in the MemFS (and close does not make them durable).
func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *handle) Release(ctx context.Context) syscall.Errno { return errno(h.f.Close()) }
