package partition

import (
	"cmp"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// FuzzLoadTxnIndex feeds arbitrary .txnindex contents to loadTxnIndex, which
// Open runs on every partition. It must not panic; what it returns must be
// sorted by marker offset, below end, no more than the file has whole
// entries, and survive a rewrite (writeTxnIndexLocked's encoding) unchanged.
func FuzzLoadTxnIndex(f *testing.F) {
	valid := []byte(txnIndexMagic)
	valid = encodeTxnEntry(valid, AbortedTxn{ProducerID: 1, FirstOffset: 10, LastOffset: 12})
	valid = encodeTxnEntry(valid, AbortedTxn{ProducerID: 2, FirstOffset: 3, LastOffset: 5})
	f.Add(valid, int64(100))
	f.Add(valid, int64(6))
	f.Add(valid[:len(valid)-3], int64(100)) // torn last entry
	f.Add([]byte("KAWATXN0"), int64(0))
	f.Fuzz(func(t *testing.T, file []byte, end int64) {
		fsys := vfs.NewMem()
		if err := fsys.MkdirAll("p", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(fsys, filepath.Join("p", txnIndexName), file); err != nil {
			t.Fatal(err)
		}
		got, _, err := loadTxnIndex(fsys, "p", end)
		if err != nil {
			return
		}
		if max := (len(file) - len(txnIndexMagic)) / txnEntrySize; len(got) > max {
			t.Fatalf("%d entries from a file with room for %d", len(got), max)
		}
		if !slices.IsSortedFunc(got, func(a, b AbortedTxn) int { return cmp.Compare(a.LastOffset, b.LastOffset) }) {
			t.Fatalf("not sorted by LastOffset: %+v", got)
		}
		for _, a := range got {
			if a.LastOffset >= end {
				t.Fatalf("entry %+v at or above end %d", a, end)
			}
		}
		rewritten := []byte(txnIndexMagic)
		for _, a := range got {
			rewritten = encodeTxnEntry(rewritten, a)
		}
		if err := vfs.WriteFileAtomic(fsys, filepath.Join("p", txnIndexName), rewritten); err != nil {
			t.Fatal(err)
		}
		again, _, err := loadTxnIndex(fsys, "p", end)
		if err != nil || len(again) != len(got) || len(got) > 0 && !reflect.DeepEqual(again, got) {
			t.Fatalf("rewrite of %+v loads as %+v, %v", got, again, err)
		}
	})
}
