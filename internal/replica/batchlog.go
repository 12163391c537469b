package replica

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/log"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// BatchLog is the LogStore over a partition's segment log (internal/log opened with Options.Raft; see the
// package doc's design): one raft entry is one batch, written once. A normal entry's data is one Kafka record
// batch (v2), stored as given with its base offset assigned by the log and its partitionLeaderEpoch set to the
// entry's term; raft's own entries (a new leader's empty entry, configuration changes) become internal batches
// that take no Kafka offset and that Fetch never serves. Entries returns the stored bytes, so a data entry's
// Data carries the offsets this replica assigned.
//
// Append checks that the base offset the log assigns each entry is the offset its raft index maps to (the
// log end before it; for an index being replaced, the base offset the old entry had): raft's log matching
// makes every replica assign the leader's offsets, so a mismatch means the logs disagree below the entry, and
// the group is failed rather than renumbered (ErrOffsetMismatch). Terms above math.MaxInt32 (the epoch
// field) are refused.
//
// Raft reads it from the group's worker while other goroutines (tests' checkers, later the partition) may
// read too; mu makes an Append, with its truncation, one step for them.
type BatchLog struct {
	l *log.Log

	mu     sync.Mutex
	failed error // sticky ErrOffsetMismatch
}

// ErrOffsetMismatch: the log assigned an entry another base offset than its raft index maps to (see
// BatchLog). It fails the group.
var ErrOffsetMismatch = errors.New("replica: Kafka offset does not match the raft index")

// Internal batch payload: entry type uint8, then the entry's data. The type is EntryNormal only for an empty
// entry (a new leader's), EntryConfChange or EntryConfChangeV2 otherwise.
const internalHeader = 1

// OpenBatchLog opens (creating if missing) the raft log in dir with o, recovering it (internal/log Open).
// It sets o.Raft, and o.Fsync to FsyncNever (raft makes entries durable with Sync before the messages that
// depend on them, so the log's own group commit would only add fsyncs) and, when unset, o.RetentionMs to -1
// (retention would move FirstIndex, and snapshots are not supported yet). Errors are Open's.
func OpenBatchLog(dir string, o log.Options) (*BatchLog, error) {
	o.Raft = true
	o.Fsync = log.FsyncNever
	if o.RetentionMs == 0 {
		o.RetentionMs = -1
	}
	l, err := log.Open(dir, o)
	if err != nil {
		return nil, err
	}
	return &BatchLog{l: l}, nil
}

// Close closes the log (which fsyncs it).
func (b *BatchLog) Close() error { return b.l.Close() }

// Append implements LogStore: ents (consecutive indexes) go after the entry before ents[0], every entry at or
// after ents[0]'s index first removed (log.TruncateToIndex). Each entry is copied (raft shares Entry.Data).
// Errors: an index outside [FirstIndex, LastIndex+1], an entry that is neither a raft entry nor one valid
// Kafka batch, a term above math.MaxInt32, ErrOffsetMismatch, or the log's (write, fsync, closed).
func (b *BatchLog) Append(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed != nil {
		return b.failed
	}
	first := ents[0].GetIndex()
	start, end := b.l.RaftStart(), b.l.RaftEnd()
	if first < start || first > end {
		return fmt.Errorf("replica: append at index %d to a log holding [%d, %d)", first, start, end)
	}
	want, err := b.l.RaftOffset(first)
	if err != nil {
		return err
	}
	if first < end {
		if err := b.l.TruncateToIndex(first); err != nil {
			return err
		}
	}
	for i, e := range ents {
		if e.GetIndex() != first+uint64(i) {
			return fmt.Errorf("replica: append: entry %d follows index %d", e.GetIndex(), first+uint64(i)-1)
		}
		enc, err := encodeEntry(e)
		if err != nil {
			return fmt.Errorf("replica: append index %d: %w", e.GetIndex(), err)
		}
		base, err := b.l.Append(enc)
		if err != nil {
			return err
		}
		if base != want {
			b.failed = fmt.Errorf("%w: index %d got base offset %d, its raft index maps to %d", ErrOffsetMismatch, e.GetIndex(), base, want)
			return b.failed
		}
		h, _ := batch.ParseHeader(enc) // Append parsed it
		want = h.LastOffset() + 1
	}
	return nil
}

// encodeEntry returns the batch that stores e: a copy of its Kafka batch with the term as epoch, or an
// internal batch.
func encodeEntry(e *pb.Entry) ([]byte, error) {
	if e.GetTerm() > math.MaxInt32 {
		return nil, fmt.Errorf("term %d does not fit the batch's partitionLeaderEpoch (int32)", e.GetTerm())
	}
	term := int32(e.GetTerm())
	typ, data := e.GetType(), e.GetData()
	if typ != pb.EntryType_EntryNormal || len(data) == 0 {
		return batch.NewInternal(term, encodeInternal(typ, data)), nil
	}
	h, err := batch.ParseHeader(data)
	switch {
	case err != nil:
	case h.Size() != len(data):
		err = fmt.Errorf("entry data of %d bytes holds a batch of %d", len(data), h.Size())
	case h.Internal():
		err = errors.New("a Kafka batch with Kawa's internal attribute (bit 14)")
	default:
		err = batch.CheckCRC(data)
	}
	if err != nil {
		return nil, fmt.Errorf("entry data is not one Kafka record batch: %w", err)
	}
	c := append([]byte(nil), data...)
	batch.SetPartitionLeaderEpoch(c, term)
	return c, nil
}

func encodeInternal(typ pb.EntryType, data []byte) []byte {
	return append([]byte{byte(typ)}, data...)
}

// decodeInternal decodes an internal batch's payload (type, data); it refuses a short payload, an unknown
// type, and a normal entry with data (those are Kafka batches).
func decodeInternal(p []byte) (pb.EntryType, []byte, error) {
	if len(p) < internalHeader {
		return 0, nil, errors.New("replica: internal batch without an entry type")
	}
	typ := pb.EntryType(p[0])
	switch {
	case typ == pb.EntryType_EntryNormal && len(p) > internalHeader:
		return 0, nil, errors.New("replica: internal batch holding a normal entry with data")
	case typ != pb.EntryType_EntryNormal && typ != pb.EntryType_EntryConfChange && typ != pb.EntryType_EntryConfChangeV2:
		return 0, nil, fmt.Errorf("replica: internal batch with unknown entry type %d", p[0])
	}
	return typ, p[internalHeader:], nil
}

// decodeEntry turns the stored batch at raft index i back into the entry.
func decodeEntry(i uint64, b []byte) (*pb.Entry, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return nil, err
	}
	e := &pb.Entry{Index: new(i), Term: new(uint64(h.PartitionLeaderEpoch)), Type: pb.EntryType_EntryNormal.Enum(), Data: b}
	if h.Internal() {
		typ, data, err := decodeInternal(b[batch.HeaderSize:])
		if err != nil {
			return nil, fmt.Errorf("index %d: %w", i, err)
		}
		e.Type, e.Data = typ.Enum(), data
		if len(data) == 0 {
			e.Data = nil
		}
	}
	return e, nil
}

// Sync implements LogStore: log.SyncData.
func (b *BatchLog) Sync() error { return b.l.SyncData() }

// Entries implements raft.Storage: entries [lo, hi), at most maxSize bytes (proto size) but at least one.
func (b *BatchLog) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if lo < b.l.RaftStart() {
		return nil, raft.ErrCompacted
	}
	if hi > b.l.RaftEnd() || lo > hi {
		return nil, raft.ErrUnavailable
	}
	bs, err := b.l.ReadRaft(lo, hi, maxSize)
	if err != nil {
		return nil, err
	}
	out := make([]*pb.Entry, 0, len(bs))
	var size uint64
	for k, bb := range bs {
		e, err := decodeEntry(lo+uint64(k), bb)
		if err != nil {
			return nil, err
		}
		if size += uint64(proto.Size(e)); len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// Term implements raft.Storage: the term of entry i from the log's leader-epoch cache; 0 for index 0, before
// the first entry of a log that starts at 1.
func (b *BatchLog) Term(i uint64) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	start := b.l.RaftStart()
	switch {
	case i == 0 && start == 1:
		return 0, nil
	case i < start:
		return 0, raft.ErrCompacted
	case i >= b.l.RaftEnd():
		return 0, raft.ErrUnavailable
	}
	t, ok := b.l.RaftTerm(i)
	if !ok {
		return 0, raft.ErrUnavailable
	}
	return uint64(t), nil
}

// LastIndex implements raft.Storage.
func (b *BatchLog) LastIndex() (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.l.RaftEnd() - 1, nil
}

// FirstIndex implements raft.Storage.
func (b *BatchLog) FirstIndex() (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.l.RaftStart(), nil
}

// Snapshot implements raft.Storage. Snapshots are not supported yet (the log never drops its prefix while
// retention is off), so raft keeps retrying rather than installing an empty one.
func (b *BatchLog) Snapshot() (*pb.Snapshot, error) {
	return nil, raft.ErrSnapshotTemporarilyUnavailable
}
