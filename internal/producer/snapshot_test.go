package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// snapshotState builds a state exercising every encoded field: a full
// window, a wrapped sequence, an open transaction, an aborted batch, a
// marker-only producer and LogAppendTime entries.
func snapshotState(t testing.TB) *State {
	s := NewState(time.Hour)
	s.AdvanceEndOffset(10)
	for i := range int32(6) {
		appendBatch(t, s, idem(1, 0, i*2, 2))
	}
	s.Update(idem(2, 3, math.MaxInt32-1, 3), 30, 32, 4242, t0)
	appendBatch(t, s, txn(3, 1, 0, 2))
	appendBatch(t, s, txn(4, 0, 0, 1))
	s.ApplyMarker(MarkerInfo{ProducerID: 4, Epoch: 0, CoordinatorEpoch: 9}, s.EndOffset(), t0)
	s.ApplyMarker(MarkerInfo{ProducerID: 5, Epoch: 7, CoordinatorEpoch: 2, Commit: true}, s.EndOffset(), t0.Add(time.Second))
	return s
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	s := snapshotState(t)
	enc := s.Encode(s.EndOffset())
	got, covers, err := Decode(enc, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if covers != s.EndOffset() || got.EndOffset() != covers {
		t.Fatalf("covers %d, end offset %d; want %d", covers, got.EndOffset(), s.EndOffset())
	}
	if !slices.Equal(got.All(), s.All()) {
		t.Fatalf("All differs:\n got %+v\nwant %+v", got.All(), s.All())
	}
	if !maps.Equal(got.OngoingTxnFirstOffsets(), s.OngoingTxnFirstOffsets()) {
		t.Fatal("open transactions differ")
	}
	if !bytes.Equal(got.Encode(covers), enc) {
		t.Fatal("re-encoding the decoded state gives other bytes")
	}
	// The decoded state answers every check as the original does.
	for _, b := range []BatchInfo{
		idem(1, 0, 2, 2), idem(1, 0, 0, 2), idem(1, 0, 10, 2), idem(1, 0, 12, 1),
		idem(2, 3, math.MaxInt32-1, 3), idem(2, 3, 1, 1),
		txn(3, 1, 2, 1), idem(3, 1, 2, 1),
		txn(4, 0, 0, 1), txn(4, 0, 1, 1),
		idem(5, 7, 0, 1), idem(5, 6, 0, 1), idem(6, 0, 5, 1),
	} {
		if w, g := s.Check(b), got.Check(b); w.Err != g.Err || !equalEntry(w.Duplicate, g.Duplicate) {
			t.Fatalf("Check(%+v): decoded %+v, original %+v", b, g, w)
		}
	}
	// Expiry survives too: lastSeen is kept to the millisecond.
	if n := got.Expire(t0.Add(time.Hour)); n != 3 {
		t.Fatalf("Expire after decode = %d, want 3 (producers 1, 2, 4)", n)
	}
}

func equalEntry(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestSnapshotEmpty(t *testing.T) {
	t.Parallel()
	got, covers, err := Decode(NewState(0).Encode(0), 0)
	if err != nil || covers != 0 || len(got.All()) != 0 {
		t.Fatalf("Decode(empty) = %v, %d, %v", got.All(), covers, err)
	}
	// A decoded empty snapshot at 0 still applies the never-written rule.
	wantVerdict(t, got, idem(pid, 0, 3, 1), Verdict{Err: kerr.OutOfOrderSequenceNumber})
}

func TestSnapshotCorruptRejected(t *testing.T) {
	t.Parallel()
	good := snapshotState(t).Encode(99)
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[6:], crc32c(b[snapHeaderLen:]))
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short header", good[:5]},
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"unknown version", mutate(func(b []byte) []byte { b[5] = 2; return b })},
		{"bit flip in body", mutate(func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b })},
		{"bit flip in crc", mutate(func(b []byte) []byte { b[7] ^= 1; return b })},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", recrc(append(bytes.Clone(good), 0))},
		{"count too large", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[18:], 1<<30); return recrc(b) })},
		{"too many batches", mutate(func(b []byte) []byte { b[22+producerLen-1] = NumBatchesToRetain + 1; return recrc(b) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _, err := Decode(tc.in, 0)
			if !errors.Is(err, ErrCorruptSnapshot) || s != nil {
				t.Fatalf("Decode = %v, %v; want ErrCorruptSnapshot", s, err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(NewState(0).Encode(0))
	f.Add(snapshotState(f).Encode(42))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, covers, err := Decode(b, time.Hour)
		if err != nil {
			return
		}
		// Invariant: whatever decodes re-encodes to the same bytes.
		if !bytes.Equal(s.Encode(covers), b) {
			t.Fatal("decode/encode is not the identity")
		}
	})
}
