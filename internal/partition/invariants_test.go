//go:build invariants

package partition

import (
	"strings"
	"testing"
)

// TestInvariantsFire: with -tags invariants, a publication that moves the
// HW back and an aborted-transaction index out of marker order panic.
func TestInvariantsFire(t *testing.T) {
	mustPanic := func(name, want string, fn func()) {
		t.Helper()
		defer func() {
			r := recover()
			if s, _ := r.(string); !strings.Contains(s, want) {
				t.Errorf("%s: recovered %v, want a panic containing %q", name, r, want)
			}
		}()
		fn()
	}
	mustPanic("hw back", "publication {hw 9, lso 9} after {hw 10, lso 10}", func() {
		checkPublication(offsets{hw: 10, lso: 10}, offsets{hw: 9, lso: 9})
	})
	mustPanic("lso above hw", "publication {hw 10, lso 11}", func() {
		checkPublication(offsets{}, offsets{hw: 10, lso: 11})
	})
	p := &Partition{Topic: "t", aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 4, LastOffset: 5}}}
	mustPanic("unsorted", "not strictly sorted", func() {
		p.addAbortedLocked(AbortedTxn{ProducerID: 2, FirstOffset: 1, LastOffset: 3}, false)
	})
	checkPublication(offsets{hw: 10, lso: 8}, offsets{hw: 12, lso: 12}) // a legal advance
}
