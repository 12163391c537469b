package producer

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

const pid = 7

// appendAll appends batches in order, each at the state's end offset.
func appendAll(bs ...BatchInfo) func(*testing.T, *State) {
	return func(t *testing.T, s *State) {
		for _, b := range bs {
			appendBatch(t, s, b)
		}
	}
}

// written marks the partition as having held records before (log end
// offset 100), so the KAFKA-15591 never-written rule does not apply.
func written(more ...BatchInfo) func(*testing.T, *State) {
	return func(t *testing.T, s *State) {
		s.AdvanceEndOffset(100)
		appendAll(more...)(t, s)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	ooo, fenced := Verdict{Err: kerr.OutOfOrderSequenceNumber}, Verdict{Err: kerr.InvalidProducerEpoch}
	dup := func(fs, ls int32, fo, lo int64) Verdict {
		return Verdict{Duplicate: &Entry{FirstSeq: fs, LastSeq: ls, FirstOffset: fo, LastOffset: lo, Timestamp: -1}}
	}
	noPID := idem(-1, -1, -1, 3)
	noPID.LastSeq = -1 // as a non-idempotent header has it
	five := appendAll(idem(pid, 0, 0, 10), idem(pid, 0, 10, 10), idem(pid, 0, 20, 10), idem(pid, 0, 30, 10), idem(pid, 0, 40, 10))
	six := appendAll(idem(pid, 0, 0, 10), idem(pid, 0, 10, 10), idem(pid, 0, 20, 10), idem(pid, 0, 30, 10), idem(pid, 0, 40, 10), idem(pid, 0, 50, 10))

	for _, tc := range []struct {
		name  string
		setup func(*testing.T, *State)
		in    BatchInfo
		want  Verdict
	}{
		{"no producer ID always appends", nil, noPID, Verdict{}},
		{"no producer ID after idempotent state", appendAll(idem(pid, 0, 0, 5)), noPID, Verdict{}},
		{"first batch at seq 0", nil, idem(pid, 0, 0, 10), Verdict{}},
		{"next in order", appendAll(idem(pid, 0, 0, 10)), idem(pid, 0, 10, 5), Verdict{}},
		{"gap is out of order", appendAll(idem(pid, 0, 0, 10)), idem(pid, 0, 11, 5), ooo},
		{"lower seq, not retained exactly, is out of order", appendAll(idem(pid, 0, 0, 10)), idem(pid, 0, 5, 10), ooo},
		{"resend of last batch is a duplicate", appendAll(idem(pid, 0, 0, 10)), idem(pid, 0, 0, 10), dup(0, 9, 0, 9)},
		{"oldest of 5 retained is a duplicate", five, idem(pid, 0, 0, 10), dup(0, 9, 0, 9)},
		{"middle of 5 retained is a duplicate", five, idem(pid, 0, 20, 10), dup(20, 29, 20, 29)},
		{"6th-oldest is out of order, not a duplicate", six, idem(pid, 0, 0, 10), ooo},
		{"5th-oldest of 6 is still a duplicate", six, idem(pid, 0, 10, 10), dup(10, 19, 10, 19)},
		{"same first seq, other last seq is out of order", appendAll(idem(pid, 0, 0, 10)), idem(pid, 0, 0, 5), ooo},
		{"same seqs under a higher epoch are a new chain", appendAll(idem(pid, 0, 0, 10)), idem(pid, 1, 0, 10), Verdict{}},
		{"epoch bump with seq 0", appendAll(idem(pid, 0, 0, 10)), idem(pid, 1, 0, 3), Verdict{}},
		{"epoch bump with nonzero seq", appendAll(idem(pid, 0, 0, 10)), idem(pid, 1, 10, 3), ooo},
		{"lower epoch is fenced", appendAll(idem(pid, 0, 0, 10), idem(pid, 1, 0, 5)), idem(pid, 0, 10, 1), fenced},
		{"lower epoch resend of an old batch is fenced", appendAll(idem(pid, 0, 0, 10), idem(pid, 1, 0, 5)), idem(pid, 0, 0, 10), fenced},
		{"wrap: MaxInt32 is followed by 0", written(idem(pid, 0, math.MaxInt32-1, 2)), idem(pid, 0, 0, 4), Verdict{}},
		{"wrap: MaxInt32 is not followed by 1", written(idem(pid, 0, math.MaxInt32-1, 2)), idem(pid, 0, 1, 1), ooo},
		{"wrap: MinInt32 is no base sequence", written(idem(pid, 0, math.MaxInt32-1, 2)), idem(pid, 0, math.MinInt32, 1), Verdict{Err: kerr.InvalidRecord}},
		{"wrap inside a batch continues after its last seq", written(idem(pid, 0, math.MaxInt32-1, 3)), idem(pid, 0, 1, 2), Verdict{}},
		{"wrap inside a batch is a duplicate on resend", written(idem(pid, 0, math.MaxInt32-1, 3)), idem(pid, 0, math.MaxInt32-1, 3), dup(math.MaxInt32-1, 0, 100, 102)},
		{"unknown producer, written partition, any seq (KIP-360)", written(), idem(pid, 0, 42, 2), Verdict{}},
		{"unknown producer, written partition, epoch 5 seq 42", written(), idem(pid, 5, 42, 2), Verdict{}},
		{"unknown producer, never-written partition, seq 0", nil, idem(pid, 3, 0, 2), Verdict{}},
		{"unknown producer, never-written partition, nonzero seq (KAFKA-15591)", nil, idem(pid, 0, 42, 2), ooo},
		{"another producer's batches make the partition written", appendAll(idem(pid+1, 0, 0, 1)), idem(pid, 0, 42, 2), Verdict{}},
		{"non-idempotent batches make the partition written", appendAll(noPID), idem(pid, 0, 42, 2), Verdict{}},
		{"unknown producer, TV1 transactional, any seq", written(), txn(pid, 0, 5, 1), Verdict{}},
		{"unknown producer, TV2 transactional, nonzero seq (KAFKA-18202)", written(), tv2(txn(pid, 0, 5, 1)), ooo},
		{"unknown producer, TV2 transactional, seq 0", written(), tv2(txn(pid, 0, 0, 1)), Verdict{}},
		{"non-transactional batch during open transaction", appendAll(txn(pid, 0, 0, 2)), idem(pid, 0, 2, 1), Verdict{Err: kerr.InvalidTxnState}},
		{"transactional batch continues open transaction", appendAll(txn(pid, 0, 0, 2)), txn(pid, 0, 2, 1), Verdict{}},
		{"control batch from a client", nil, control(idem(pid, 0, 0, 1)), Verdict{Err: kerr.InvalidRecord}},
		{"negative base sequence", nil, idem(pid, 0, -1, 1), Verdict{Err: kerr.InvalidRecord}},
		{"no records", nil, BatchInfo{ProducerID: pid, LastSeq: -1}, Verdict{Err: kerr.InvalidRecord}},
		{"last seq disagrees with count", nil, BatchInfo{ProducerID: pid, FirstSeq: 0, LastSeq: 5, NumRecords: 3}, Verdict{Err: kerr.InvalidRecord}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewState(0)
			if tc.setup != nil {
				tc.setup(t, s)
			}
			before := s.Encode(s.EndOffset())
			wantVerdict(t, s, tc.in, tc.want)
			if after := s.Encode(s.EndOffset()); string(before) != string(after) {
				t.Fatal("Check changed the state")
			}
		})
	}
}

func tv2(b BatchInfo) BatchInfo {
	b.TxnV2 = true
	return b
}

func control(b BatchInfo) BatchInfo {
	b.Control = true
	return b
}

func TestLastSeq(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first, n, want int32
	}{
		{0, 1, 0},
		{0, 10, 9},
		{math.MaxInt32, 1, math.MaxInt32},
		{math.MaxInt32 - 1, 2, math.MaxInt32},
		{math.MaxInt32 - 1, 3, 0},
		{math.MaxInt32, 2, 0},
		{math.MaxInt32, 5, 3},
	} {
		if got := LastSeq(tc.first, tc.n); got != tc.want {
			t.Errorf("LastSeq(%d, %d) = %d, want %d", tc.first, tc.n, got, tc.want)
		}
	}
}

// TestWraparoundChain walks a producer through the int32 wrap one batch at a
// time: MaxInt32-1, MaxInt32, 0, 1, each accepted, each resend a duplicate.
func TestWraparoundChain(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	s.AdvanceEndOffset(1)
	for _, seq := range []int32{math.MaxInt32 - 1, math.MaxInt32, 0, 1} {
		b := idem(pid, 0, seq, 1)
		off := appendBatch(t, s, b)
		wantVerdict(t, s, b, Verdict{Duplicate: &Entry{FirstSeq: seq, LastSeq: seq, FirstOffset: off, LastOffset: off, Timestamp: -1}})
	}
	if info, _ := s.Get(pid); info.LastSequence != 1 {
		t.Fatalf("LastSequence = %d, want 1", info.LastSequence)
	}
}
