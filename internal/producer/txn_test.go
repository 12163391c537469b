package producer

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTxnFirstOffsetAndMarker(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	s.AdvanceEndOffset(20)
	appendBatch(t, s, idem(1, 0, 0, 5)) // 20-24, not transactional
	appendBatch(t, s, txn(2, 0, 0, 3))  // 25-27 opens txn of 2
	appendBatch(t, s, txn(3, 0, 0, 1))  // 28 opens txn of 3
	appendBatch(t, s, txn(2, 0, 3, 2))  // 29-30 does not move 2's first offset
	want := map[int64]int64{2: 25, 3: 28}
	if got := s.OngoingTxnFirstOffsets(); !maps.Equal(got, want) {
		t.Fatalf("OngoingTxnFirstOffsets = %v, want %v", got, want)
	}
	if off, ok := s.FirstUndecidedOffset(); !ok || off != 25 {
		t.Fatalf("FirstUndecidedOffset = %d, %v; want 25, true", off, ok)
	}

	first, had := s.ApplyMarker(MarkerInfo{ProducerID: 2, Epoch: 0, CoordinatorEpoch: 4, Commit: true}, 31, t0)
	if !had || first != 25 {
		t.Fatalf("ApplyMarker = %d, %v; want 25, true", first, had)
	}
	if got := s.OngoingTxnFirstOffsets(); !maps.Equal(got, map[int64]int64{3: 28}) {
		t.Fatalf("after commit: %v", got)
	}
	if s.EndOffset() != 32 {
		t.Fatalf("end offset %d, want 32", s.EndOffset())
	}
	info, _ := s.Get(2)
	want2 := ProducerInfo{ProducerID: 2, Epoch: 0, LastSequence: 4, LastTimestamp: t0.UnixMilli(), CoordinatorEpoch: 4, CurrentTxnStartOffset: -1}
	if info != want2 {
		t.Fatalf("Get(2) = %+v, want %+v", info, want2)
	}
	// A TV1 commit keeps the batches: a late resend is still a duplicate,
	// and the next transaction continues the sequence.
	wantVerdict(t, s, txn(2, 0, 3, 2), Verdict{Duplicate: &Entry{FirstSeq: 3, LastSeq: 4, FirstOffset: 29, LastOffset: 30, Timestamp: -1}})
	wantVerdict(t, s, txn(2, 0, 5, 1), Verdict{})

	// A second marker for the same transaction finds none open.
	if first, had := s.ApplyMarker(MarkerInfo{ProducerID: 2, Epoch: 0, CoordinatorEpoch: 4, Commit: true}, 32, t0); had || first != -1 {
		t.Fatalf("repeat marker = %d, %v; want -1, false", first, had)
	}
	// The lead's Marker: no control type known, so the batches are treated
	// as aborted.
	if first, had := s.Marker(3, 0, 33, t0); !had || first != 28 {
		t.Fatalf("Marker = %d, %v; want 28, true", first, had)
	}
	wantVerdict(t, s, txn(3, 0, 0, 1), Verdict{Err: kerr.OutOfOrderSequenceNumber})
	if info, _ := s.Get(3); info.CoordinatorEpoch != -1 || info.CurrentTxnStartOffset != -1 {
		t.Fatalf("Get(3) = %+v", info)
	}
	if _, ok := s.FirstUndecidedOffset(); ok {
		t.Fatal("FirstUndecidedOffset reports an open transaction")
	}
}

// A TV2 marker carries a bumped epoch: the producer moves to it and its
// batches are forgotten, so the next transaction starts at seq 0.
func TestTV2MarkerBumpsEpoch(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	appendBatch(t, s, tv2(txn(pid, 5, 0, 3)))
	s.ApplyMarker(MarkerInfo{ProducerID: pid, Epoch: 6, CoordinatorEpoch: 0, Commit: true, TxnVersion: 2}, 3, t0)
	info, _ := s.Get(pid)
	if info.Epoch != 6 || info.LastSequence != -1 {
		t.Fatalf("after TV2 marker: %+v", info)
	}
	wantVerdict(t, s, tv2(txn(pid, 6, 3, 1)), Verdict{Err: kerr.OutOfOrderSequenceNumber})
	wantVerdict(t, s, tv2(txn(pid, 6, 0, 1)), Verdict{})
	wantVerdict(t, s, tv2(txn(pid, 5, 3, 1)), Verdict{Err: kerr.InvalidProducerEpoch})
}

// A marker for a producer the partition has no state for creates it with
// the marker's epoch; the producer's data must then start at seq 0.
func TestMarkerForUnknownProducer(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	s.AdvanceEndOffset(50)
	if first, had := s.ApplyMarker(MarkerInfo{ProducerID: pid, Epoch: 2, CoordinatorEpoch: 1}, 50, t0); had || first != -1 {
		t.Fatalf("ApplyMarker = %d, %v", first, had)
	}
	wantVerdict(t, s, idem(pid, 2, 7, 1), Verdict{Err: kerr.OutOfOrderSequenceNumber})
	wantVerdict(t, s, idem(pid, 2, 0, 1), Verdict{})
	wantVerdict(t, s, idem(pid, 1, 0, 1), Verdict{Err: kerr.InvalidProducerEpoch})
}

func TestCheckMarker(t *testing.T) {
	t.Parallel()
	// State: producer at epoch 5, coordinator epoch 3; open says whether a
	// transaction is open.
	setup := func(open bool) *State {
		s := NewState(0)
		s.AdvanceEndOffset(1)
		s.ApplyMarker(MarkerInfo{ProducerID: pid, Epoch: 5, CoordinatorEpoch: 3, Commit: true}, 1, t0)
		if open {
			appendBatch(t, s, txn(pid, 5, 0, 1))
		}
		return s
	}
	for _, tc := range []struct {
		name string
		open bool
		m    MarkerInfo
		want error
	}{
		{"TV1 same epoch", true, MarkerInfo{Epoch: 5, CoordinatorEpoch: 3, TxnVersion: 1}, nil},
		{"TV1 higher epoch (fencing abort)", true, MarkerInfo{Epoch: 6, CoordinatorEpoch: 3, TxnVersion: 1}, nil},
		{"TV1 lower epoch", true, MarkerInfo{Epoch: 4, CoordinatorEpoch: 3, TxnVersion: 1}, kerr.InvalidProducerEpoch},
		{"TV2 bumped epoch", true, MarkerInfo{Epoch: 6, CoordinatorEpoch: 3, TxnVersion: 2}, nil},
		{"TV2 same epoch with open txn", true, MarkerInfo{Epoch: 5, CoordinatorEpoch: 3, TxnVersion: 2}, kerr.InvalidProducerEpoch},
		{"TV2 same epoch, txn done: retried marker (KAFKA-19999)", false, MarkerInfo{Epoch: 5, CoordinatorEpoch: 3, TxnVersion: 2}, nil},
		{"TV2 lower epoch", false, MarkerInfo{Epoch: 4, CoordinatorEpoch: 3, TxnVersion: 2}, kerr.InvalidProducerEpoch},
		{"newer coordinator", true, MarkerInfo{Epoch: 5, CoordinatorEpoch: 4, TxnVersion: 1}, nil},
		{"zombie coordinator", true, MarkerInfo{Epoch: 5, CoordinatorEpoch: 2, TxnVersion: 1}, kerr.TransactionCoordinatorFenced},
		{"unknown producer", false, MarkerInfo{ProducerID: pid + 1, Epoch: 0, CoordinatorEpoch: 0, TxnVersion: 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(tc.open)
			m := tc.m
			if m.ProducerID == 0 {
				m.ProducerID = pid
			}
			if got := s.CheckMarker(m); got != tc.want {
				t.Fatalf("CheckMarker = %v, want %v", got, tc.want)
			}
		})
	}
}

// An abort marks only the aborted transaction's batches: idempotent batches
// written before it still answer duplicates.
func TestAbortKeepsEarlierBatches(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	appendBatch(t, s, idem(pid, 0, 0, 2)) // 0-1
	appendBatch(t, s, txn(pid, 0, 2, 2))  // 2-3
	s.ApplyMarker(MarkerInfo{ProducerID: pid, Epoch: 0}, 4, t0)
	wantVerdict(t, s, idem(pid, 0, 0, 2), Verdict{Duplicate: &Entry{FirstSeq: 0, LastSeq: 1, FirstOffset: 0, LastOffset: 1, Timestamp: -1}})
	wantVerdict(t, s, txn(pid, 0, 2, 2), Verdict{Err: kerr.OutOfOrderSequenceNumber})
	wantVerdict(t, s, idem(pid, 0, 4, 1), Verdict{})
}

// The first undecided offset comes from the open transactions alone: many
// idempotent producers around two transactions, through a snapshot round
// trip and the markers that close them (the index the partition asks after
// every append; issue 10's W6 with 1,000 producer IDs).
func TestFirstUndecidedOffsetAmongManyProducers(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	for id := int64(100); id < 1100; id++ {
		appendBatch(t, s, idem(id, 0, 0, 1))
	}
	if _, ok := s.FirstUndecidedOffset(); ok {
		t.Fatal("FirstUndecidedOffset reports a transaction among idempotent producers only")
	}
	appendBatch(t, s, txn(7, 0, 0, 2)) // 1000-1001
	appendBatch(t, s, txn(8, 0, 0, 1)) // 1002
	s2, covers, err := Decode(s.Encode(s.EndOffset()), 0)
	if err != nil || covers != 1003 {
		t.Fatalf("Decode = %d, %v", covers, err)
	}
	for _, st := range []*State{s, s2} {
		if off, ok := st.FirstUndecidedOffset(); !ok || off != 1000 {
			t.Fatalf("FirstUndecidedOffset = %d, %v; want 1000, true", off, ok)
		}
		st.ApplyMarker(MarkerInfo{ProducerID: 7, Commit: true}, 1003, t0)
		if off, ok := st.FirstUndecidedOffset(); !ok || off != 1002 {
			t.Fatalf("after 7's marker: FirstUndecidedOffset = %d, %v; want 1002, true", off, ok)
		}
		st.ApplyMarker(MarkerInfo{ProducerID: 8}, 1004, t0)
		if off, ok := st.FirstUndecidedOffset(); ok {
			t.Fatalf("after both markers: FirstUndecidedOffset = %d, true", off)
		}
		if got := st.OngoingTxnFirstOffsets(); len(got) != 0 {
			t.Fatalf("OngoingTxnFirstOffsets = %v after both markers", got)
		}
	}
}
