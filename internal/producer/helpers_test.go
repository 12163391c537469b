package producer

import (
	"reflect"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// idem returns an idempotent, non-transactional batch of n records.
func idem(pid int64, epoch int16, firstSeq, n int32) BatchInfo {
	return BatchInfo{
		ProducerID: pid, Epoch: epoch, FirstSeq: firstSeq,
		LastSeq: LastSeq(firstSeq, n), NumRecords: n, MaxTimestamp: 1000,
	}
}

// txn returns a transactional (TV1) batch of n records.
func txn(pid int64, epoch int16, firstSeq, n int32) BatchInfo {
	b := idem(pid, epoch, firstSeq, n)
	b.Transactional = true
	return b
}

// appendBatch checks b, requires it to be allowed, and records it at the
// state's end offset as a partition would. It returns the base offset.
func appendBatch(t testing.TB, s *State, b BatchInfo) int64 {
	t.Helper()
	v := s.Check(b)
	if v.Err != nil || v.Duplicate != nil {
		t.Fatalf("Check(%+v) = %+v, want append", b, v)
	}
	first := s.EndOffset()
	s.Update(b, first, first+int64(b.NumRecords)-1, -1, t0)
	return first
}

// wantVerdict asserts Check(b) gives exactly want.
func wantVerdict(t testing.TB, s *State, b BatchInfo, want Verdict) {
	t.Helper()
	got := s.Check(b)
	if got.Err != want.Err {
		t.Fatalf("Check(%+v).Err = %v, want %v", b, got.Err, want.Err)
	}
	if !reflect.DeepEqual(got.Duplicate, want.Duplicate) {
		t.Fatalf("Check(%+v).Duplicate = %+v, want %+v", b, got.Duplicate, want.Duplicate)
	}
}

func crc32c(b []byte) uint32 { return batch.Checksum(b) }
