package producer

import (
	"slices"
	"testing"
	"time"
)

func TestExpire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		idle    time.Duration
		openTxn bool
		want    int
	}{
		{"idle less than expiration", 24*time.Hour - time.Millisecond, false, 0},
		{"idle exactly the expiration (Kafka: >=)", 24 * time.Hour, false, 1},
		{"idle longer", 48 * time.Hour, false, 1},
		{"open transaction is never expired", 48 * time.Hour, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewState(0) // DefaultExpiration
			b := idem(pid, 0, 0, 1)
			if tc.openTxn {
				b = txn(pid, 0, 0, 1)
			}
			s.Update(b, 0, 0, -1, t0)
			if got := s.Expire(t0.Add(tc.idle)); got != tc.want {
				t.Fatalf("Expire = %d, want %d", got, tc.want)
			}
			if _, ok := s.Get(pid); ok != (tc.want == 0) {
				t.Fatalf("Get present = %v after Expire = %d", ok, tc.want)
			}
		})
	}
}

// Expire measures idleness from the last append or marker on the broker
// clock, per producer, and leaves the end offset alone (the partition was
// written, so an expired producer may resume at any sequence).
func TestExpireMixed(t *testing.T) {
	t.Parallel()
	s := NewState(time.Minute)
	s.Update(idem(1, 0, 0, 1), 0, 0, -1, t0)
	s.Update(idem(2, 0, 0, 1), 1, 1, -1, t0.Add(30*time.Second))
	s.Update(txn(3, 0, 0, 1), 2, 2, -1, t0)
	s.ApplyMarker(MarkerInfo{ProducerID: 4, Epoch: 0}, 3, t0.Add(50*time.Second))
	if n := s.Expire(t0.Add(70 * time.Second)); n != 1 {
		t.Fatalf("Expire = %d, want 1", n)
	}
	var ids []int64
	for _, p := range s.All() {
		ids = append(ids, p.ProducerID)
	}
	if !slices.Equal(ids, []int64{2, 3, 4}) {
		t.Fatalf("remaining producers %v, want [2 3 4]", ids)
	}
	if s.EndOffset() != 4 {
		t.Fatalf("end offset %d, want 4", s.EndOffset())
	}
	wantVerdict(t, s, idem(1, 0, 9, 1), Verdict{})
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	s := NewState(0)
	b := idem(9, 2, 0, 4)
	b.MaxTimestamp = 777
	s.Update(b, 0, 3, -1, t0)
	l := txn(8, 1, 0, 2)
	s.Update(l, 4, 5, 555, t0) // LogAppendTime topic: the append time wins
	want := []ProducerInfo{
		{ProducerID: 8, Epoch: 1, LastSequence: 1, LastTimestamp: 555, CoordinatorEpoch: -1, CurrentTxnStartOffset: 4},
		{ProducerID: 9, Epoch: 2, LastSequence: 3, LastTimestamp: 777, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1},
	}
	if got := s.All(); !slices.Equal(got, want) {
		t.Fatalf("All = %+v\nwant %+v", got, want)
	}
	if _, ok := s.Get(10); ok {
		t.Fatal("Get(10) found a producer")
	}
}
