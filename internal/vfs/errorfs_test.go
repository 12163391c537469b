package vfs

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
)

func TestErrorFSInjectsAndCounts(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var syncs atomic.Int32
	e := NewErrorFS(NewMem(), func(op, name string) error {
		switch {
		case op == OpSync:
			if syncs.Add(1) == 2 {
				return boom
			}
		case op == OpWrite && name == "/bad":
			return boom
		case op == OpSyncDir:
			return boom
		}
		return nil
	})
	f, err := e.OpenFile("/f", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("first sync = %v", err)
	}
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("second sync = %v, want boom", err)
	}
	if syncs.Load() != 2 {
		t.Fatalf("syncs = %d", syncs.Load())
	}
	bad, err := e.OpenFile("/bad", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.WriteAt([]byte("x"), 0); !errors.Is(err, boom) {
		t.Fatalf("WriteAt = %v", err)
	}
	if err := e.SyncDir("/"); !errors.Is(err, boom) {
		t.Fatalf("SyncDir = %v", err)
	}
	if st, err := e.Stat("/f"); err != nil || st.Size() != 2 {
		t.Fatalf("Stat = %v, %v", st, err)
	}
}
