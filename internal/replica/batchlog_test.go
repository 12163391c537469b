package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// kafkaBatch is a one-record Kafka batch with value v, as a producer sends it (base offset 0, epoch -1).
func kafkaBatch(v string, records int) []byte {
	recs := make([]kmsg.Record, records)
	for i := range recs {
		recs[i] = kmsg.NewRecord()
		recs[i].Value = []byte(v)
	}
	return batch.Encode(batch.Header{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1, MaxTimestamp: 1}, recs)
}

// batchEnts is n entries from index first at term: every third one a new leader's empty entry, one in five
// a conf change, the others Kafka batches of 1-3 records whose value names term and index.
func batchEnts(first, term uint64, n int) []*pb.Entry {
	out := make([]*pb.Entry, n)
	for i := range out {
		idx := first + uint64(i)
		e := &pb.Entry{Index: new(idx), Term: new(term), Type: pb.EntryType_EntryNormal.Enum()}
		switch {
		case idx%3 == 0:
		case idx%5 == 0:
			e.Type, e.Data = pb.EntryType_EntryConfChangeV2.Enum(), fmt.Appendf(nil, "cc-t%d-i%d", term, idx)
		default:
			e.Data = kafkaBatch(fmt.Sprintf("t%d-i%d", term, idx), 1+int(idx%3))
		}
		out[i] = e
	}
	return out
}

// wantBatchLog checks the log holds exactly terms[i] at index i+1 with batchEnts' contents, Kafka offsets
// contiguous over the data entries (raft's own take none), each data entry's epoch its term.
func wantBatchLog(t *testing.T, l *BatchLog, terms ...uint64) {
	t.Helper()
	if last, _ := l.LastIndex(); last != uint64(len(terms)) {
		t.Fatalf("last index %d, want %d", last, len(terms))
	}
	if len(terms) == 0 {
		return
	}
	got, err := l.Entries(1, uint64(len(terms))+1, math.MaxUint64)
	if err != nil || len(got) != len(terms) {
		t.Fatalf("Entries: %d, %v", len(got), err)
	}
	var next int64
	var kafka []byte
	for i, e := range got {
		idx := uint64(i + 1)
		want := batchEnts(idx, terms[i], 1)[0]
		if e.GetIndex() != idx || e.GetTerm() != terms[i] || e.GetType() != want.GetType() {
			t.Fatalf("entry %d: index %d term %d type %v, want term %d type %v", idx, e.GetIndex(), e.GetTerm(), e.GetType(), terms[i], want.GetType())
		}
		if tm, _ := l.Term(idx); tm != terms[i] {
			t.Fatalf("Term(%d) = %d, want %d", idx, tm, terms[i])
		}
		if want.GetType() != pb.EntryType_EntryNormal || len(want.GetData()) == 0 {
			if !bytes.Equal(e.GetData(), want.GetData()) {
				t.Fatalf("entry %d: data %q, want %q", idx, e.GetData(), want.GetData())
			}
			continue
		}
		h, err := batch.ParseHeader(e.GetData())
		recs, rerr := batch.Records(e.GetData())
		if err != nil || rerr != nil || h.BaseOffset != next || h.PartitionLeaderEpoch != int32(terms[i]) || string(recs[0].Value) != fmt.Sprintf("t%d-i%d", terms[i], idx) {
			t.Fatalf("entry %d: base offset %d (want %d), epoch %d, records %v", idx, h.BaseOffset, next, h.PartitionLeaderEpoch, rerr)
		}
		next = h.LastOffset() + 1
		kafka = append(kafka, e.GetData()...)
	}
	if end := l.l.End(); end != next {
		t.Fatalf("log end offset %d, want %d", end, next)
	}
	res, err := l.l.Read(0, 1<<30, next)
	if err != nil {
		t.Fatal(err)
	}
	if served, _ := l.l.ReadBytes(res); !bytes.Equal(served, kafka) {
		t.Fatalf("Fetch's Read serves %d bytes, want the %d of the Kafka batches only", len(served), len(kafka))
	}
}

func openBatchLog(t *testing.T, fs vfs.FS) *BatchLog {
	t.Helper()
	l, err := OpenBatchLog("/p-0", log.Options{FS: fs, SegmentBytes: 400, IndexIntervalBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestBatchLogAppendTruncateRecover: FileLog's scenario over the partition log, across segment rolls: a
// conflicting suffix replaced (its Kafka offsets reused by the new entries), a gap refused, unsynced entries
// lost by a power cut, appends continuing after recovery.
func TestBatchLogAppendTruncateRecover(t *testing.T) {
	mem := vfs.NewMem()
	l := openBatchLog(t, mem)
	if tm, err := l.Term(0); tm != 0 || err != nil {
		t.Fatalf("Term(0) = %d, %v", tm, err)
	}
	if _, err := l.Term(1); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Term(1) of an empty log: %v, want ErrUnavailable", err)
	}
	must(t, l.Append(batchEnts(1, 1, 12)))
	must(t, l.Sync())
	must(t, l.Append(batchEnts(4, 2, 4))) // a new leader's entries replace the suffix from index 4
	wantBatchLog(t, l, 1, 1, 1, 2, 2, 2, 2)
	if err := l.Append(batchEnts(9, 2, 1)); err == nil {
		t.Fatal("append leaving a gap accepted")
	}
	must(t, l.Sync())
	must(t, l.Append(batchEnts(8, 2, 6))) // not synced: a power cut loses it
	wantBatchLog(t, l, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)
	if n := len(l.l.Segments()); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}

	// A power cut keeps the synced entries and, since a segment roll fsyncs the segment it closes, maybe
	// some of the unsynced ones: a prefix of what was written.
	crashed := mem.CrashClone()
	r := openBatchLog(t, crashed)
	last, _ := r.LastIndex()
	if last < 7 || last > 13 {
		t.Fatalf("after a power cut the log ends at %d, want 7..13", last)
	}
	wantBatchLog(t, r, []uint64{1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}[:last]...)
	must(t, r.Append(batchEnts(8, 3, 2)))
	must(t, r.Sync())
	r.Close()
	wantBatchLog(t, openBatchLog(t, crashed.CrashClone()), 1, 1, 1, 2, 2, 2, 2, 3, 3)

	// Entries handed out stay intact when a later append replaces the suffix they came from.
	held, _ := l.Entries(7, 10, math.MaxUint64)
	must(t, l.Append(batchEnts(7, 4, 1)))
	if h, _ := batch.ParseHeader(held[0].GetData()); len(held) != 3 || h.PartitionLeaderEpoch != 2 {
		t.Fatalf("held entries changed: %d, epoch %d", len(held), h.PartitionLeaderEpoch)
	}
}

func TestBatchLogEntriesMaxSize(t *testing.T) {
	l := openBatchLog(t, vfs.NewMem())
	must(t, l.Append(batchEnts(1, 1, 10)))
	got, err := l.Entries(1, 11, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("maxSize 0: %d entries, %v; want 1 (raft's at-least-one rule)", len(got), err)
	}
	got, err = l.Entries(2, 11, 200) // a Kafka batch entry is ~80 bytes as a proto
	if err != nil || len(got) < 2 || len(got) > 4 || got[0].GetIndex() != 2 {
		t.Fatalf("maxSize 200: %d entries, %v", len(got), err)
	}
	if _, err := l.Entries(5, 12, 100); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("past the end: %v", err)
	}
	if _, err := l.Entries(0, 2, 100); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("index 0: %v", err)
	}
}

// TestBatchLogRefuses entries it cannot store: a term above math.MaxInt32 (the epoch field), data that is not
// one Kafka batch, a Kafka batch carrying the internal bit; nothing is written.
func TestBatchLogRefuses(t *testing.T) {
	l := openBatchLog(t, vfs.NewMem())
	must(t, l.Append(batchEnts(1, 1, 2)))
	bit14 := kafkaBatch("x", 1)
	bit14[21] |= 0x40 // attribute bit 14 (big-endian int16 at 21)
	binaryPutCRC(bit14)
	for name, e := range map[string]*pb.Entry{
		"term above MaxInt32": {Index: new(uint64(3)), Term: new(uint64(math.MaxInt32 + 1)), Type: pb.EntryType_EntryNormal.Enum(), Data: kafkaBatch("x", 1)},
		"not a batch":         {Index: new(uint64(3)), Term: new(uint64(1)), Type: pb.EntryType_EntryNormal.Enum(), Data: []byte("hello")},
		"two batches":         {Index: new(uint64(3)), Term: new(uint64(1)), Type: pb.EntryType_EntryNormal.Enum(), Data: append(kafkaBatch("x", 1), kafkaBatch("y", 1)...)},
		"internal bit":        {Index: new(uint64(3)), Term: new(uint64(1)), Type: pb.EntryType_EntryNormal.Enum(), Data: bit14},
	} {
		if err := l.Append([]*pb.Entry{e}); err == nil {
			t.Errorf("%s: appended", name)
		}
	}
	wantBatchLog(t, l, 1, 1)
}

// binaryPutCRC recomputes a batch's CRC after a test changed a covered field.
func binaryPutCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[21:]))
}

// FuzzInternalEntry: any internal batch payload either decodes to a raft entry that encodes back to the same
// payload, or is refused; never a panic.
func FuzzInternalEntry(f *testing.F) {
	f.Add([]byte{0})
	f.Add(encodeInternal(pb.EntryType_EntryConfChange, []byte("cc")))
	f.Add(encodeInternal(pb.EntryType_EntryConfChangeV2, nil))
	f.Add([]byte{0, 1})
	f.Add([]byte{9, 1, 2})
	f.Fuzz(func(t *testing.T, p []byte) {
		typ, data, err := decodeInternal(p)
		if err != nil {
			return
		}
		if again := encodeInternal(typ, data); !bytes.Equal(again, p) {
			t.Fatalf("payload %x decodes to (%v, %x), which encodes to %x", p, typ, data, again)
		}
		e, err := decodeEntry(7, batch.NewInternal(3, p))
		if err != nil || e.GetType() != typ || !bytes.Equal(e.GetData(), data) || e.GetTerm() != 3 || e.GetIndex() != 7 {
			t.Fatalf("decodeEntry: %v, %v", e, err)
		}
	})
}
