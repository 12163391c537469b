package vfs

import (
	"errors"
	"os"
	"testing"
)

// TestDurableHelpersSurviveCrash: everything the helpers report done is in
// the crash clone (what a power loss leaves), on a fresh path that needs its
// directories made durable too.
func TestDurableHelpersSurviveCrash(t *testing.T) {
	t.Parallel()
	m := NewMem()
	if err := MkdirAllDurable(m, "/data/a/b"); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(m, "/data/a/b/f", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(m, "/data/a/b/f", []byte("version 2")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"x", "yz"} {
		if err := AppendFile(m, "/data/a/log", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	crashed := m.CrashClone()
	for name, want := range map[string]string{"/data/a/b/f": "version 2", "/data/a/log": "xyz"} {
		got, err := ReadFile(crashed, name)
		if err != nil || string(got) != want {
			t.Fatalf("after a crash %s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := crashed.Stat("/data/a/b/f" + TempSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	if err := RemoveAllDurable(m, "/data/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CrashClone().Stat("/data/a"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed tree back after a crash: %v", err)
	}
	if err := RemoveAllDurable(m, "/data/a"); err != nil {
		t.Fatalf("RemoveAllDurable of a missing dir: %v", err)
	}
}

// TestWriteFileAtomicCrashMidway: a crash at any point of WriteFileAtomic
// leaves the old contents or the new ones, never a torn or empty file.
func TestWriteFileAtomicCrashMidway(t *testing.T) {
	t.Parallel()
	for _, failOp := range []string{OpOpen, OpWrite, OpSync, OpRename, OpSyncDir} {
		m := NewMem()
		if err := MkdirAllDurable(m, "/d"); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(m, "/d/f", []byte("old")); err != nil {
			t.Fatal(err)
		}
		var crashed *MemFS
		efs := NewErrorFS(m, func(op, name string) error {
			if op == failOp && crashed == nil {
				crashed = m.CrashClone() // power cut just before op
				return errors.New("injected")
			}
			return nil
		})
		if err := WriteFileAtomic(efs, "/d/f", []byte("new contents")); err == nil {
			t.Fatalf("%s: injected failure not reported", failOp)
		}
		for _, fsys := range []*MemFS{crashed, m.CrashClone()} {
			got, err := ReadFile(fsys, "/d/f")
			if err != nil || (string(got) != "old" && string(got) != "new contents") {
				t.Fatalf("%s: after a crash /d/f = %q, %v", failOp, got, err)
			}
		}
	}
}
