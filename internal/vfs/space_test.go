package vfs

import (
	"errors"
	"testing"
)

func TestSpace(t *testing.T) {
	total, usable, err := Space(OS, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if total <= 0 || usable < 0 || usable > total {
		t.Fatalf("Space = total %d, usable %d; want 0 <= usable <= total, total > 0", total, usable)
	}
	if _, _, err := Space(OS, "/nonexistent/kawa-space"); err == nil {
		t.Fatal("Space of a missing directory: no error")
	}
	if _, _, err := Space(NewMem(), "/data"); !errors.Is(err, ErrNoSpaceInfo) {
		t.Fatalf("Space(MemFS) error = %v, want ErrNoSpaceInfo", err)
	}
}
