package producer

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func nextN(t *testing.T, a *Allocator, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		id, err := a.Next()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func TestAllocatorPersistsAcrossReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "producer_ids")
	a, err := NewAllocator(nil, path, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file exists before the first ID: %v", err)
	}
	first := nextN(t, a, 13) // 0..12: two blocks reserved, limit 20
	for i, id := range first {
		if id != int64(i) {
			t.Fatalf("ID %d = %d, want %d", i, id, i)
		}
	}

	// Reopen (a restart): the unused rest of the block is skipped, never
	// reused.
	a, err = NewAllocator(nil, path, 10)
	if err != nil {
		t.Fatal(err)
	}
	second := nextN(t, a, 3)
	if second[0] != 20 || second[2] != 22 {
		t.Fatalf("after reopen got %v, want [20 21 22]", second)
	}

	// Reopen with a different block size keeps counting from the limit.
	a, err = NewAllocator(nil, path, 1)
	if err != nil {
		t.Fatal(err)
	}
	third := nextN(t, a, 2)
	if third[0] != 30 || third[1] != 31 {
		t.Fatalf("after second reopen got %v, want [30 31]", third)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temp file left behind: %v", err)
	}
}

func TestAllocatorConcurrentUnique(t *testing.T) {
	t.Parallel()
	a, err := NewAllocator(nil, filepath.Join(t.TempDir(), "producer_ids"), 64)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 200
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, err := a.Next()
				if err != nil {
					t.Error(err)
					return
				}
				// Each goroutine sees its own IDs strictly increase.
				if n := len(got[w]); n > 0 && id <= got[w][n-1] {
					t.Errorf("worker %d: %d after %d", w, id, got[w][n-1])
				}
				got[w] = append(got[w], id)
			}
		})
	}
	wg.Wait()
	seen := make(map[int64]bool, workers*each)
	for _, ids := range got {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
		}
	}
	for id := range int64(workers * each) {
		if !seen[id] {
			t.Fatalf("ID %d skipped within one process lifetime", id)
		}
	}
}

func TestAllocatorRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := NewAllocator(nil, filepath.Join(dir, "x"), 0); err == nil {
		t.Fatal("block size 0 accepted")
	}

	good := encodeAlloc(500)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty file", nil},
		{"bad magic", append([]byte("XXXX"), good[4:]...)},
		{"unknown version", append(append([]byte{}, good[:4]...), append([]byte{0, 9}, good[6:]...)...)},
		{"crc mismatch", append(append([]byte{}, good[:len(good)-1]...), good[len(good)-1]^1)},
		{"truncated", good[:len(good)-2]},
		{"negative next", encodeAlloc(-5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "producer_ids")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := NewAllocator(nil, path, 10); !errors.Is(err, ErrCorruptAllocator) {
				t.Fatalf("NewAllocator = %v, want ErrCorruptAllocator", err)
			}
		})
	}

	// A good file resumes at its value.
	path := filepath.Join(dir, "good")
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := NewAllocator(nil, path, 10)
	if err != nil {
		t.Fatal(err)
	}
	if id := nextN(t, a, 1)[0]; id != 500 {
		t.Fatalf("first ID %d, want 500", id)
	}
}

// A failed persist hands out no ID; once the directory is writable again
// allocation resumes without a gap or a repeat.
func TestAllocatorPersistFailure(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gone")
	a, err := NewAllocator(nil, filepath.Join(dir, "producer_ids"), 5)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.Next(); err == nil {
		t.Fatalf("Next = %d with no directory, want an error", id)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if id := nextN(t, a, 1)[0]; id != 0 {
		t.Fatalf("first ID after recovery %d, want 0", id)
	}
}
