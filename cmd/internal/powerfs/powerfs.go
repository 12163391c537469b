// Package powerfs mounts a FUSE file system that can lose power: a real
// directory that a real process (`kawa serve`) writes through the kernel,
// whose contents live in a vfs.MemFS and so follow its durability model.
// A file's bytes survive a cut only as of its last fsync or fdatasync; a
// directory's entries (creations, removals, renames) only as of the last
// fsync of that directory.
//
// Cut unmounts the file system, keeps MemFS.CrashClone (the durable view,
// the same one Kawa's own crash tests use) and mounts that again at the
// same place. The caller kills every process using the mount first: the
// kernel refuses to unmount a busy file system, as a machine that loses
// power takes its processes with it.
//
// It needs /dev/fuse and the right to mount (root, or CAP_SYS_ADMIN): it
// mounts with the mount(2) system call, not fusermount.
package powerfs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// FS is a mounted power-loss file system. Its methods are safe for
// concurrent use.
type FS struct {
	dir string

	mu   sync.Mutex // guards mem, srv and cuts
	mem  *vfs.MemFS
	srv  *fuse.Server
	cuts int
}

// Available reports why a mount cannot work here (nil: it can): no
// /dev/fuse, or not allowed to open it.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("powerfs needs /dev/fuse: %w", err)
	}
	return f.Close()
}

// Mount mounts an empty power-loss file system on dir, which must exist
// and be an empty directory.
func Mount(dir string) (*FS, error) {
	f := &FS{dir: dir, mem: vfs.NewMem()}
	srv, err := mount(dir, f.mem)
	if err != nil {
		return nil, err
	}
	f.srv = srv
	return f, nil
}

func mount(dir string, mem *vfs.MemFS) (*fuse.Server, error) {
	one := time.Second
	srv, err := fs.Mount(dir, &node{mem: mem}, &fs.Options{
		EntryTimeout: &one,
		AttrTimeout:  &one,
		MountOptions: fuse.MountOptions{
			FsName:            "kawa-powerfs",
			Name:              "powerfs",
			DirectMountStrict: true, // mount(2) itself: no fusermount here
			DisableXAttrs:     true,
			MaxWrite:          1 << 20,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mount powerfs on %s: %w", dir, err)
	}
	return srv, nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.dir }

// Cuts is the number of power cuts so far.
func (f *FS) Cuts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cuts
}

// Cut simulates a power loss: it unmounts, drops everything that was not
// made durable and mounts the rest again. Every process with a file open
// on the mount must be dead first, or the unmount fails (EBUSY, retried
// for a few seconds while the kernel releases a killed process's files).
func (f *FS) Cut() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv == nil {
		return errors.New("powerfs: not mounted")
	}
	if err := unmount(f.srv); err != nil {
		return err
	}
	f.srv = nil
	f.mem = f.mem.CrashClone()
	srv, err := mount(f.dir, f.mem)
	if err != nil {
		return err
	}
	f.srv = srv
	f.cuts++
	return nil
}

// Unmount unmounts the file system; its contents are gone.
func (f *FS) Unmount() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv == nil {
		return nil
	}
	err := unmount(f.srv)
	if err == nil {
		f.srv = nil
	}
	return err
}

// unmount retries EBUSY for up to five seconds: the kernel releases the
// files of a process killed a moment ago asynchronously.
func unmount(srv *fuse.Server) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := srv.Unmount()
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("unmount powerfs: %w", err)
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond) // polling the kernel: there is no event for "no longer busy"
	}
}
