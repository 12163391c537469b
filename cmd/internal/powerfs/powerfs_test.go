package powerfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// mountForTest mounts a power-loss file system on a temporary directory,
// skipping where FUSE is unavailable unless KAWA_REQUIRE_FUSE=1 (CI).
func mountForTest(t *testing.T) *FS {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("KAWA_REQUIRE_FUSE") == "1" {
			t.Fatalf("KAWA_REQUIRE_FUSE=1: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	f, err := Mount(t.TempDir())
	if err != nil {
		if os.Getenv("KAWA_REQUIRE_FUSE") == "1" {
			t.Fatal(err)
		}
		t.Skipf("skipping: cannot mount FUSE here: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return f
}

func writeFile(t *testing.T, name string, data []byte, sync bool) *os.File {
	t.Helper()
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", dir, err)
	}
}

// TestCutKeepsOnlyDurable: through the kernel, a cut keeps synced bytes of
// files whose names were synced, and drops unsynced tails, unsynced names
// (a new file, a new directory, a rename) and unsynced removals.
func TestCutKeepsOnlyDurable(t *testing.T) {
	f := mountForTest(t)
	root := f.Dir()
	sub := filepath.Join(root, "data")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, root)

	a := writeFile(t, filepath.Join(sub, "a.log"), []byte("synced"), true)
	if _, err := a.Write([]byte("+tail")); err != nil { // never synced
		t.Fatal(err)
	}
	a.Close()
	writeFile(t, filepath.Join(sub, "gone.tmp"), []byte("x"), true).Close()
	syncDir(t, sub)
	writeFile(t, filepath.Join(sub, "b.log"), []byte("file synced, name not"), true).Close()
	if err := os.Rename(filepath.Join(sub, "a.log"), filepath.Join(sub, "renamed.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(sub, "gone.tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "unsynced-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Before the cut everything is visible.
	if got, err := os.ReadFile(filepath.Join(sub, "renamed.log")); err != nil || string(got) != "synced+tail" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}

	if err := f.Cut(); err != nil {
		t.Fatal(err)
	}
	if f.Cuts() != 1 {
		t.Errorf("Cuts = %d", f.Cuts())
	}
	got, err := os.ReadFile(filepath.Join(sub, "a.log"))
	if err != nil || string(got) != "synced" {
		t.Errorf("a.log after the cut = %q, %v; want the synced bytes under the synced name", got, err)
	}
	for _, name := range []string{filepath.Join(sub, "renamed.log"), filepath.Join(sub, "b.log"), filepath.Join(root, "unsynced-dir")} {
		if _, err := os.Stat(name); !os.IsNotExist(err) {
			t.Errorf("%s after the cut: %v, want it gone (its directory entry was never synced)", name, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(sub, "gone.tmp")); err != nil || string(got) != "x" {
		t.Errorf("gone.tmp after the cut = %q, %v; its removal was never synced", got, err)
	}

	// A rename made durable survives, with truncation and O_APPEND writes.
	c := writeFile(t, filepath.Join(sub, "c.tmp"), []byte("0123456789"), false)
	if err := c.Truncate(4); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ap, err := os.OpenFile(filepath.Join(sub, "c.tmp"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.WriteAt([]byte("z"), 0); err == nil {
		t.Error("WriteAt on an O_APPEND file succeeded")
	}
	if _, err := ap.Write([]byte("-end")); err != nil {
		t.Fatal(err)
	}
	if err := ap.Sync(); err != nil {
		t.Fatal(err)
	}
	ap.Close()
	if err := os.Rename(filepath.Join(sub, "c.tmp"), filepath.Join(sub, "c.log")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, sub)
	if err := f.Cut(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(sub, "c.log")); err != nil || string(got) != "0123-end" {
		t.Errorf("c.log after the second cut = %q, %v; want %q", got, err, "0123-end")
	}
	ents, err := os.ReadDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := "[a.log c.log gone.tmp]"; fmt.Sprint(names) != want {
		t.Errorf("entries after the second cut %v, want %s", names, want)
	}
}
