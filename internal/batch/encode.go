package batch

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// minRecordSize is the smallest encoded record: one byte each for length,
// attributes, timestamp delta, offset delta, key, value and header count.
const minRecordSize = 7

// Encode builds an uncompressed v2 batch holding recs. From h it takes
// BaseOffset, PartitionLeaderEpoch, Attributes (the codec bits are cleared:
// the records are not compressed), FirstTimestamp, MaxTimestamp, ProducerID,
// ProducerEpoch and BaseSequence; it fills in Magic (2), NumRecords,
// LastOffsetDelta (len(recs)-1), Length and CRC. Record i is written with
// OffsetDelta i and its computed Length; recs itself is not modified.
func Encode(h Header, recs []kmsg.Record) []byte {
	h.LastOffsetDelta = int32(len(recs) - 1)
	return encode(h, recs, true)
}

// encode writes recs after a header built from h; renumber gives record i
// OffsetDelta i, else each keeps its own.
func encode(h Header, recs []kmsg.Record, renumber bool) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(recs)*32)
	var scratch []byte
	for i := range recs {
		r := recs[i]
		if renumber {
			r.OffsetDelta = int32(i)
		}
		r.Length = 0
		scratch = r.AppendTo(scratch[:0])
		body := scratch[1:] // drop the one-byte varint of the zero Length
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	h.Magic = magicV2
	h.Attributes &^= 7
	h.NumRecords = int32(len(recs))
	h.Length = int32(len(b) - lengthOverhead)
	putHeader(b, h)
	binary.BigEndian.PutUint32(b[offCRC:], crc(b))
	return b
}

// putHeader writes every field of h except the CRC into b[:HeaderSize].
func putHeader(b []byte, h Header) {
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[offLength:], uint32(h.Length))
	be.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = byte(h.Magic)
	be.PutUint16(b[offAttributes:], uint16(h.Attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[offFirstTimestamp:], uint64(h.FirstTimestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[offNumRecords:], uint32(h.NumRecords))
}

// Records decompresses and decodes every record of b, which must be exactly
// one v2 batch. It does not check the CRC (Validate and Iterate do) nor that
// offset deltas are contiguous (compaction leaves gaps), but it does check
// each record's framing and that there are NumRecords records. Errors wrap
// kerr.CorruptMessage, kerr.InvalidRecord or kerr.UnsupportedForMessageFormat.
//
// NB: for an uncompressed batch the records' Key, Value and header values
// alias b.
func Records(b []byte) ([]kmsg.Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != lengthOverhead+int64(h.Length) {
		return nil, corruptf("batch length field says %d bytes, have %d", lengthOverhead+int64(h.Length), len(b))
	}
	if h.Magic != magicV2 {
		return nil, fmt.Errorf("%w: batch: magic %d, only 2 is supported", kerr.UnsupportedForMessageFormat, h.Magic)
	}
	if h.NumRecords < 0 {
		return nil, invalidf("negative record count %d", h.NumRecords)
	}
	data, err := recordsSection(h, b)
	if err != nil {
		return nil, err
	}
	recs := make([]kmsg.Record, 0, min(int(h.NumRecords), len(data)/minRecordSize))
	err = walkRecords(data, h.NumRecords, false, func(rec []byte) error {
		var r kmsg.Record
		if err := r.ReadFrom(rec); err != nil {
			return invalidf("record %d: %v", len(recs), err)
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// EncodeRetained builds an uncompressed v2 batch holding recs, a subset of
// an existing batch's records, as Kafka's log cleaner rewrites a batch
// (MemoryRecords.filterTo): each record keeps its OffsetDelta and
// TimestampDelta, and every header field of h is kept (LastOffsetDelta too,
// so the batch still covers its original offsets and its producer's last
// sequence, KIP-98) except Magic (2), NumRecords, Length, CRC and the codec
// bits, which are cleared. With no records it is Kafka's empty retained
// batch (header only). The caller keeps the deltas consistent with
// h.FirstTimestamp when it changes it (a delete horizon, KIP-534).
func EncodeRetained(h Header, recs []kmsg.Record) []byte { return encode(h, recs, false) }

// SetDeleteHorizon marks h with a delete horizon (KIP-534): attribute bit 6
// set and FirstTimestamp = horizonMs. The caller re-encodes the records'
// timestamp deltas against it.
func (h *Header) SetDeleteHorizon(horizonMs int64) {
	h.Attributes |= attrDeleteHorizonMs
	h.FirstTimestamp = horizonMs
}
