package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/recfmt"
)

// Snapshot file layout, version 1 (all integers big-endian):
//
//	magic    [4]byte "KWPS"
//	version  uint16
//	crc      uint32  CRC-32C of everything after this field
//	covers   int64   log offset the snapshot covers up to (exclusive)
//	count    uint32  number of producers
//	producer ×count:
//	  producerID int64, epoch int16, coordinatorEpoch int32,
//	  lastTimestamp int64 (ms), lastSeen int64 (unix ms),
//	  txnFirst int64 (-1: none), nBatches uint8 (<= NumBatchesToRetain)
//	  batch ×nBatches:
//	    firstSeq int32, lastSeq int32, firstOffset int64, lastOffset int64,
//	    timestamp int64, flags uint8 (bit 0: aborted)
//
// Kafka's own .snapshot keeps only the last batch of each producer; this one
// keeps the last five, so a restart does not shrink the duplicate window
// (BL-01 across a restart). The magic tells it apart from a Kafka file.
const (
	snapshotMagic   = "KWPS"
	snapshotVersion = 1
	snapHeaderLen   = 4 + 2 + 4
	producerLen     = 8 + 2 + 4 + 8 + 8 + 8 + 1
	batchLen        = 4 + 4 + 8 + 8 + 8 + 1
	flagAborted     = 1
)

// ErrCorruptSnapshot is returned (wrapped) by Decode for a snapshot with a
// bad magic, version, CRC or length; the caller rebuilds from the log.
var ErrCorruptSnapshot = errors.New("producer: corrupt snapshot")

// Encode returns the snapshot file contents for this state; lastOffset is
// the log offset it covers up to (exclusive). Producers are written in
// producer ID order, so equal states give equal bytes.
func (s *State) Encode(lastOffset int64) []byte {
	ids := make([]int64, 0, len(s.producers))
	for id := range s.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	b := make([]byte, snapHeaderLen, snapHeaderLen+12+len(ids)*(producerLen+2*batchLen))
	copy(b, snapshotMagic)
	binary.BigEndian.PutUint16(b[4:], snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(lastOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = appendProducer(b, id, s.producers[id])
	}
	binary.BigEndian.PutUint32(b[6:], batch.Checksum(b[snapHeaderLen:]))
	return b
}

func appendProducer(b []byte, id int64, p *producerState) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint16(b, uint16(p.epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(p.coordEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(p.lastTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(p.lastSeen.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, uint64(p.txnFirst))
	b = append(b, byte(len(p.batches)))
	for _, r := range p.batches {
		b = binary.BigEndian.AppendUint32(b, uint32(r.FirstSeq))
		b = binary.BigEndian.AppendUint32(b, uint32(r.LastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(r.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(r.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(r.Timestamp))
		var flags byte
		if r.aborted {
			flags |= flagAborted
		}
		b = append(b, flags)
	}
	return b
}

// Decode parses snapshot file contents made by Encode and returns the state
// (with the given expiration) and the offset the snapshot covers up to. It
// rejects a bad magic, an unknown version, a CRC mismatch and a truncated or
// over-long body with an error wrapping ErrCorruptSnapshot. Expired producers
// are kept; the caller runs Expire.
func Decode(b []byte, expiration time.Duration) (*State, int64, error) {
	if len(b) < snapHeaderLen || string(b[:4]) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: bad magic", ErrCorruptSnapshot)
	}
	// Readers accept version N and N-1; 1 is the first version.
	if v := binary.BigEndian.Uint16(b[4:]); v != snapshotVersion {
		return nil, 0, fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	body := b[snapHeaderLen:]
	if want, got := binary.BigEndian.Uint32(b[6:]), batch.Checksum(body); want != got {
		return nil, 0, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptSnapshot, want, got)
	}
	r := recfmt.NewReader(body)
	covers := int64(r.U64())
	count := r.U32()
	if r.Bad() || uint64(count) > uint64(r.Len())/producerLen {
		return nil, 0, fmt.Errorf("%w: malformed body", ErrCorruptSnapshot)
	}
	s := NewState(expiration)
	s.endOffset = covers
	for range count {
		id, p := readProducer(r)
		if r.Bad() {
			return nil, 0, fmt.Errorf("%w: malformed body", ErrCorruptSnapshot)
		}
		if _, dup := s.producers[id]; dup || id < 0 {
			return nil, 0, fmt.Errorf("%w: bad producer ID %d", ErrCorruptSnapshot, id)
		}
		s.producers[id] = p
		if p.txnFirst >= 0 {
			s.beginTxn(id, p, p.txnFirst)
		}
	}
	if r.Len() != 0 {
		return nil, 0, fmt.Errorf("%w: %d trailing bytes", ErrCorruptSnapshot, r.Len())
	}
	return s, covers, nil
}

// readProducer decodes one producer entry of a snapshot body.
func readProducer(r *recfmt.Reader) (int64, *producerState) {
	id := int64(r.U64())
	p := &producerState{
		epoch:         int16(r.U16()),
		coordEpoch:    int32(r.U32()),
		lastTimestamp: int64(r.U64()),
		lastSeen:      time.UnixMilli(int64(r.U64())),
		txnFirst:      int64(r.U64()),
	}
	n := int(r.U8())
	if n > NumBatchesToRetain {
		r.Fail()
		return id, p
	}
	for range n {
		var e retained
		e.FirstSeq = int32(r.U32())
		e.LastSeq = int32(r.U32())
		e.FirstOffset = int64(r.U64())
		e.LastOffset = int64(r.U64())
		e.Timestamp = int64(r.U64())
		e.aborted = r.U8()&flagAborted != 0
		p.batches = append(p.batches, e)
	}
	return id, p
}
