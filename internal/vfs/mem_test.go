package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func writeFile(t *testing.T, fsys FS, name, data string, sync bool) File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func readAll(t *testing.T, fsys FS, name string) (string, error) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(buf), nil
}

// TestFSConformance runs one script against the OS and the in-memory FS and expects the same observations.
func TestFSConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fs   FS
		root string
	}{{"os", OS, t.TempDir()}, {"mem", NewMem(), "/x"}} {
		t.Run(tc.name, func(t *testing.T) {
			p := func(s string) string { return filepath.Join(tc.root, s) }
			if err := tc.fs.MkdirAll(p("a/b"), 0o755); err != nil {
				t.Fatal(err)
			}
			f := writeFile(t, tc.fs, p("a/b/f"), "hello", false)
			if n, err := f.WriteAt([]byte("J"), 0); n != 1 || err != nil {
				t.Fatalf("WriteAt = %d, %v", n, err)
			}
			if _, err := f.WriteAt([]byte("!"), 7); err != nil { // leaves a zero-filled gap
				t.Fatal(err)
			}
			if got, _ := readAll(t, tc.fs, p("a/b/f")); got != "Jello\x00\x00!" {
				t.Fatalf("contents = %q", got)
			}
			buf := make([]byte, 4)
			if n, err := f.ReadAt(buf, 6); n != 2 || err != io.EOF {
				t.Fatalf("short ReadAt = %d, %v; want 2, EOF", n, err)
			}
			if err := f.Truncate(2); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(4); err != nil {
				t.Fatal(err)
			}
			if got, _ := readAll(t, tc.fs, p("a/b/f")); got != "Je\x00\x00" {
				t.Fatalf("after truncate = %q", got)
			}
			if st, err := f.Stat(); err != nil || st.Size() != 4 || f.Name() != p("a/b/f") {
				t.Fatalf("Stat = %v, %v, name %q", st, err, f.Name())
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
				t.Fatalf("ReadAt after Close = %v", err)
			}
			if _, err := tc.fs.OpenFile(p("a/b/f"), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("O_EXCL = %v", err)
			}
			if _, err := tc.fs.OpenFile(p("a/nope"), os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open missing = %v", err)
			}
			a := writeFile(t, tc.fs, p("a/b/g"), "x", false)
			if _, err := a.Write([]byte("yz")); err != nil {
				t.Fatal(err)
			}
			a.Close()
			ap, err := tc.fs.OpenFile(p("a/b/g"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ap.Write([]byte("!")); err != nil {
				t.Fatal(err)
			}
			if _, err := ap.WriteAt([]byte("?"), 0); err == nil {
				t.Fatal("WriteAt on O_APPEND file succeeded")
			}
			ap.Close()
			if got, _ := readAll(t, tc.fs, p("a/b/g")); got != "xyz!" {
				t.Fatalf("append = %q", got)
			}
			if err := tc.fs.Rename(p("a/b/g"), p("a/b/f")); err != nil {
				t.Fatal(err)
			}
			ents, err := tc.fs.ReadDir(p("a/b"))
			if err != nil || len(ents) != 1 || ents[0].Name() != "f" || ents[0].IsDir() {
				t.Fatalf("ReadDir = %v, %v", ents, err)
			}
			if got, _ := readAll(t, tc.fs, p("a/b/f")); got != "xyz!" {
				t.Fatalf("renamed = %q", got)
			}
			if err := tc.fs.Remove(p("a/b")); err == nil {
				t.Fatal("removed a non-empty directory")
			}
			if err := tc.fs.Remove(p("a/b/f")); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.fs.Stat(p("a/b/f")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Stat removed = %v", err)
			}
			if st, err := tc.fs.Stat(p("a/b")); err != nil || !st.IsDir() {
				t.Fatalf("Stat dir = %v, %v", st, err)
			}
			if err := tc.fs.SyncDir(p("a/b")); err != nil {
				t.Fatal(err)
			}
			if err := tc.fs.Remove(p("a/b")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOSFileIsOSFile(t *testing.T) {
	t.Parallel()
	f, err := OS.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(*os.File); !ok {
		t.Fatalf("OS file is %T, want *os.File (sendfile)", f)
	}
	if _, err := OS.OpenFile(filepath.Join(t.TempDir(), "missing"), os.O_RDONLY, 0); err == nil {
		t.Fatal("opened a missing file")
	}
}

func TestCrashCloneKeepsOnlySyncedState(t *testing.T) {
	t.Parallel()
	m := NewMem()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.MkdirAll("/d", 0o755))
	must(m.SyncDir("/"))
	durable := writeFile(t, m, "/d/durable", "synced", true)
	_, err := durable.Write([]byte("-lost"))
	must(err)
	writeFile(t, m, "/d/unsynced-data", "lost", false)
	removed := writeFile(t, m, "/d/removed", "comes back", true)
	renamed := writeFile(t, m, "/d/old", "moved", true)
	must(m.SyncDir("/d"))
	writeFile(t, m, "/d/no-dir-sync", "data synced, entry not", true)
	must(m.Remove("/d/removed"))
	must(m.Rename("/d/old", "/d/new"))
	must(m.MkdirAll("/d/sub", 0o755)) // never SyncDir'ed on /d

	// An open handle keeps working after its name is removed.
	buf := make([]byte, 10)
	if n, _ := removed.ReadAt(buf, 0); string(buf[:n]) != "comes back" {
		t.Fatalf("read after remove = %q", buf[:n])
	}
	renamed.Close()

	c := m.CrashClone()
	for name, want := range map[string]string{
		"/d/durable":         "synced",
		"/d/unsynced-data":   "",
		"/d/removed":         "comes back",
		"/d/old":             "moved",
		"/d/new":             "<absent>",
		"/d/no-dir-sync":     "<absent>",
		"/d/sub":             "<absent>",
		"/d/unsynced-data/x": "<absent>",
	} {
		got, err := readAll(t, c, name)
		if err != nil {
			got = "<absent>"
		}
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// The original is untouched by cloning.
	if got, _ := readAll(t, m, "/d/durable"); got != "synced-lost" {
		t.Fatalf("original = %q", got)
	}
	// The clone is fully durable: cloning it again changes nothing.
	if got, _ := readAll(t, c.CrashClone(), "/d/durable"); got != "synced" {
		t.Fatalf("clone of clone = %q", got)
	}
}

func TestCrashCloneFuncTornWrite(t *testing.T) {
	t.Parallel()
	m := NewMem()
	f := writeFile(t, m, "/f", "abc", true)
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("defgh")); err != nil {
		t.Fatal(err)
	}
	c := m.CrashCloneFunc(func(name string, synced, current []byte) []byte {
		if name != "/f" || !bytes.HasPrefix(current, synced) {
			t.Errorf("keep(%q, %q, %q)", name, synced, current)
		}
		return current[:len(synced)+(len(current)-len(synced))/2]
	})
	if got, _ := readAll(t, c, "/f"); got != "abcde" {
		t.Fatalf("torn clone = %q, want %q", got, "abcde")
	}
}

func TestMemAccessModes(t *testing.T) {
	t.Parallel()
	m := NewMem()
	writeFile(t, m, "/f", "x", false).Close()
	ro, err := m.OpenFile("/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Write([]byte("y")); err == nil {
		t.Fatal("write on read-only handle succeeded")
	}
	wo, err := m.OpenFile("/f", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wo.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("read on write-only handle succeeded")
	}
	if _, err := m.OpenFile("/", os.O_RDONLY, 0); err == nil {
		t.Fatal("opened the root as a file")
	}
}

// TestCrashCloneDuringWrites: taking a crash clone while another goroutine
// writes is race-free (run with -race; the clone used to read a file's
// modification time outside its lock).
func TestCrashCloneDuringWrites(t *testing.T) {
	t.Parallel()
	m := NewMem()
	f := writeFile(t, m, "/f", "synced", true)
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if _, err := f.WriteAt([]byte("unsynced"), int64(6+i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 50 {
		if got, err := readAll(t, m.CrashClone(), "/f"); err != nil || got != "synced" {
			t.Fatalf("crash clone during writes holds %q, %v; want the synced bytes", got, err)
		}
	}
	<-done
}
