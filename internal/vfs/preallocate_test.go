package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPreallocate: the file grows to the size asked for, its old bytes kept and the new ones zeros, on real
// files (fallocate) and in memory (Truncate); asking for less than the size leaves the file alone; the
// extension survives a crash once synced, and not before.
func TestPreallocate(t *testing.T) {
	t.Parallel()
	testPreallocate(t, Preallocate)
}

// TestPreallocateZeros: PreallocateZeros keeps Preallocate's contract.
func TestPreallocateZeros(t *testing.T) {
	t.Parallel()
	testPreallocate(t, PreallocateZeros)
}

func testPreallocate(t *testing.T, prealloc func(File, int64) error) {
	mem := NewMem()
	for name, fs := range map[string]FS{"os": OS, "mem": mem} {
		t.Run(name, func(t *testing.T) {
			dir := "/d"
			if fs == OS {
				dir = t.TempDir()
			} else if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := fs.OpenFile(filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
				t.Fatal(err)
			}
			if err := prealloc(f, 10000); err != nil {
				t.Fatal(err)
			}
			if err := prealloc(f, 100); err != nil {
				t.Fatal(err)
			}
			st, err := f.Stat()
			if err != nil || st.Size() != 10000 {
				t.Fatalf("size %d (%v), want 10000", st.Size(), err)
			}
			got := make([]byte, 10000)
			if _, err := f.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if want := append([]byte("abc"), make([]byte, 9997)...); !bytes.Equal(got, want) {
				t.Fatal("preallocated file is not its bytes followed by zeros")
			}
		})
	}
	// In memory, the extension is only durable after Sync, like any write.
	f, err := mem.OpenFile("/d/g", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, d := range []string{"/", "/d"} {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := prealloc(f, 4096); err != nil {
		t.Fatal(err)
	}
	if st, err := mem.CrashClone().Stat("/d/g"); err != nil || st.Size() != 0 {
		t.Fatalf("unsynced preallocation after a crash: %v, %v", st, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if st, err := mem.CrashClone().Stat("/d/g"); err != nil || st.Size() != 4096 {
		t.Fatalf("synced preallocation after a crash: %v, %v; want 4096 bytes", st, err)
	}
}
