package producer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// BL-01: five batches appended, every response lost, all five resent with
// the same producer, epoch and sequences. Each resend is answered with its
// original base offset; nothing is appended twice.
func TestBL01ResendAllFiveInFlight(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	var bases []int64
	for i := range int32(5) {
		bases = append(bases, appendBatch(t, s, idem(pid, 0, i*10, 10)))
	}
	for i := range int32(5) {
		v := s.Check(idem(pid, 0, i*10, 10))
		if v.Err != nil || v.Duplicate == nil || v.Duplicate.FirstOffset != bases[i] {
			t.Fatalf("resend %d: %+v, want duplicate at %d", i, v, bases[i])
		}
	}
	if s.EndOffset() != 50 {
		t.Fatalf("end offset %d, want 50", s.EndOffset())
	}
}

// BL-03 variant A: retention or DeleteRecords removes every batch the
// producer wrote. Its state is kept, so the next sequence is in order and a
// skipped one is still refused.
func TestBL03StateOutlivesLogTruncation(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	appendBatch(t, s, idem(pid, 0, 0, 5))
	s.AdvanceEndOffset(1_000) // log start moved far past the producer's batches
	wantVerdict(t, s, idem(pid, 0, 6, 1), Verdict{Err: kerr.OutOfOrderSequenceNumber})
	wantVerdict(t, s, idem(pid, 0, 5, 1), Verdict{})
}

// BL-03 variant B: the producer idles past the expiration; its next batch
// (seq 2) is accepted and starts fresh state.
func TestBL03ExpiredProducerStartsFresh(t *testing.T) {
	t.Parallel()
	s := NewState(time.Hour)
	b := idem(pid, 0, 0, 2)
	s.Update(b, 0, 1, -1, t0)
	if n := s.Expire(t0.Add(time.Hour)); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	next := idem(pid, 0, 2, 2)
	wantVerdict(t, s, next, Verdict{})
	s.Update(next, 2, 3, -1, t0.Add(time.Hour))
	wantVerdict(t, s, idem(pid, 0, 4, 1), Verdict{})
	wantVerdict(t, s, next, Verdict{Duplicate: &Entry{FirstSeq: 2, LastSeq: 3, FirstOffset: 2, LastOffset: 3, Timestamp: -1}})
}

// BL-04: seq 100-109 appended at offsets 500-509 with LogAppendTime; the
// segment is deleted before the retry. The retry is answered from the state
// with the original offsets and append time.
func TestBL04DuplicateAfterSegmentDeleted(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	s.AdvanceEndOffset(500)
	b := idem(pid, 0, 100, 10)
	wantVerdict(t, s, b, Verdict{})
	s.Update(b, 500, 509, 1234, t0)
	s.AdvanceEndOffset(600) // log start past 509: the segment is gone
	wantVerdict(t, s, b, Verdict{Duplicate: &Entry{FirstSeq: 100, LastSeq: 109, FirstOffset: 500, LastOffset: 509, Timestamp: 1234}})
}

// BL-05: the client bumps its own epoch after a delivery timeout and
// restarts at seq 0; a nonzero first sequence at the new epoch is out of
// order; a late retry from the old epoch is fenced; acknowledged offsets
// never move.
func TestBL05ClientEpochBump(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	appendBatch(t, s, idem(pid, 0, 0, 10))
	wantVerdict(t, s, idem(pid, 1, 3, 5), Verdict{Err: kerr.OutOfOrderSequenceNumber})
	base := appendBatch(t, s, idem(pid, 1, 0, 5))
	wantVerdict(t, s, idem(pid, 0, 10, 1), Verdict{Err: kerr.InvalidProducerEpoch})
	wantVerdict(t, s, idem(pid, 1, 0, 5), Verdict{Duplicate: &Entry{FirstSeq: 0, LastSeq: 4, FirstOffset: base, LastOffset: base + 4, Timestamp: -1}})
}

// BL-06: T1's batch (seq 42) is appended and T1 aborted by a TV1 marker at
// the same epoch. A different record sent again as seq 42, epoch e in T2
// must not be acknowledged with T1's aborted offset: it is refused. A
// conforming client's next sequence (43) is accepted.
func TestBL06AbortedBatchNeverDeduplicates(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	s.AdvanceEndOffset(10)
	b := txn(pid, 3, 42, 1)
	appendBatch(t, s, b)
	m := MarkerInfo{ProducerID: pid, Epoch: 3, CoordinatorEpoch: 1, Commit: false, TxnVersion: 1}
	if err := s.CheckMarker(m); err != nil {
		t.Fatal(err)
	}
	if first, had := s.ApplyMarker(m, 11, t0); !had || first != 10 {
		t.Fatalf("ApplyMarker = %d, %v; want 10, true", first, had)
	}
	wantVerdict(t, s, b, Verdict{Err: kerr.OutOfOrderSequenceNumber})
	wantVerdict(t, s, txn(pid, 3, 43, 1), Verdict{})

	// Under TV2 the abort marker bumps the epoch: the stale send is fenced.
	s2 := NewState(0)
	s2.AdvanceEndOffset(10)
	appendBatch(t, s2, tv2(txn(pid, 3, 0, 1)))
	s2.ApplyMarker(MarkerInfo{ProducerID: pid, Epoch: 4, TxnVersion: 2}, 11, t0)
	wantVerdict(t, s2, tv2(txn(pid, 3, 0, 1)), Verdict{Err: kerr.InvalidProducerEpoch})
	wantVerdict(t, s2, tv2(txn(pid, 4, 0, 1)), Verdict{})
}
