package batch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// attrInternal marks a Kawa internal batch (bit 14 of the attributes, which Kafka leaves unused): a raft
// entry that is not Kafka data, stored in a replicated partition's log (internal/log with Options.Raft).
const attrInternal = 1 << 14

// Internal reports attribute bit 14: the batch is a Kawa internal batch (see NewInternal). Only a log opened
// for raft (internal/log Options.Raft) gives the bit this meaning; elsewhere it is an unused attribute bit.
func (h Header) Internal() bool { return h.Attributes&attrInternal != 0 }

// NewInternal builds a Kawa internal batch holding payload: a v2 header with attributes = bit 14 only,
// BaseOffset 0 (the log sets it to the next offset to assign), PartitionLeaderEpoch epoch (the raft term),
// LastOffsetDelta -1 and NumRecords 0 (it takes no Kafka offset: its last offset is base-1), both timestamps
// -1, producer ID -1, producer epoch -1, base sequence -1, then payload in place of records, under the CRC.
// It is never served to a Kafka client (the log's Read skips it), so its payload is Kawa's own bytes, not
// records. A payload that would overflow the int32 batch length panics (raft entries are far smaller).
func NewInternal(epoch int32, payload []byte) []byte {
	if len(payload) > math.MaxInt32-HeaderSize {
		panic(fmt.Sprintf("batch: internal batch payload of %d bytes", len(payload)))
	}
	b := make([]byte, HeaderSize+len(payload))
	putHeader(b, Header{
		Length:               int32(len(b) - lengthOverhead),
		PartitionLeaderEpoch: epoch,
		Magic:                magicV2,
		Attributes:           attrInternal,
		LastOffsetDelta:      -1,
		FirstTimestamp:       -1,
		MaxTimestamp:         -1,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	})
	copy(b[HeaderSize:], payload)
	binary.BigEndian.PutUint32(b[offCRC:], crc(b))
	return b
}

// CheckRaft is Check for a log that holds internal batches (internal/log with Options.Raft): an internal
// batch (bit 14) must have LastOffsetDelta -1 and NumRecords 0, the shape NewInternal gives it; Check refuses
// a negative LastOffsetDelta in any other batch, so the two kinds cannot be confused (a Kafka batch carrying
// bit 14 fails here). Otherwise it checks what Check checks.
// Errors wrap kerr.CorruptMessage (kerr.UnsupportedForMessageFormat for another magic).
func (h Header) CheckRaft() error {
	if !h.Internal() {
		return h.Check()
	}
	if h.LastOffsetDelta != -1 || h.NumRecords != 0 {
		return corruptf("internal batch with last offset delta %d and %d records, want -1 and 0", h.LastOffsetDelta, h.NumRecords)
	}
	h.LastOffsetDelta = 0 // Check's other rules (length, magic) apply to it as to any batch
	return h.Check()
}

// SetPartitionLeaderEpoch rewrites partitionLeaderEpoch in place (a raft leader stamps its term there). The
// field sits outside the CRC, so the checksum stays valid.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}
