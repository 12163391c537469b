package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// HeaderSize is the size in bytes of a v2 record batch header, from
// baseOffset through recordCount (Kafka's RECORD_BATCH_OVERHEAD).
const HeaderSize = 61

// Compression codecs, the low three bits of the batch attributes.
const (
	CodecNone   int8 = 0
	CodecGzip   int8 = 1
	CodecSnappy int8 = 2
	CodecLz4    int8 = 3
	CodecZstd   int8 = 4
)

// Attribute bits above the codec.
const (
	attrLogAppendTime   = 1 << 3
	attrTransactional   = 1 << 4
	attrControl         = 1 << 5
	attrDeleteHorizonMs = 1 << 6
)

// Byte offsets of the header fields; see the package doc for the layout.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// lengthOverhead is what batchLength does not count: baseOffset and
	// batchLength itself (Kafka's LOG_OVERHEAD).
	lengthOverhead = 12
)

// magicV2 is the only message format Kawa accepts (KIP-98).
const magicV2 = 2

// castagnoli is the module's one CRC-32C table: record batches and every
// checksummed file Kawa writes use it through Checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b, the checksum of a v2 record
// batch (over attributes to the end) and of Kawa's own checksummed files
// (producer snapshots, the aborted-transaction index, the topic catalog, the
// producer-ID block, the log start file).
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Header is the decoded 61-byte header of a v2 record batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the Length field: Size() - 12
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64 // ms; Kafka's baseTimestamp
	MaxTimestamp         int64 // ms
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Codec returns the compression codec (CodecNone..CodecZstd, or an unknown
// value 5-7 that Validate rejects).
func (h Header) Codec() int8 { return int8(h.Attributes & 7) }

// LogAppendTime reports whether the timestamp type is LogAppendTime, in which
// case MaxTimestamp is the broker's append time for every record.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports whether the batch belongs to a transaction (KIP-98).
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds a control record (a marker).
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// HasDeleteHorizon reports attribute bit 6 (KIP-534): FirstTimestamp is the
// delete horizon set by the log cleaner.
func (h Header) HasDeleteHorizon() bool { return h.Attributes&attrDeleteHorizonMs != 0 }

// Size returns the whole batch size in bytes, on disk and on the wire.
func (h Header) Size() int { return lengthOverhead + int(h.Length) }

// LastOffset returns the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// LastSequence returns the sequence number of the batch's last record. Kafka
// wraps sequences past math.MaxInt32 to 0 (DefaultRecordBatch.incrementSequence),
// and a batch without a sequence (-1) keeps -1.
func (h Header) LastSequence() int32 {
	if h.BaseSequence == -1 {
		return -1
	}
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

// Magic returns the magic byte of the batch or legacy message set at the
// start of b (byte 16 in v0, v1 and v2 alike); ok is false when b is too
// short to hold it. Produce uses it to refuse other formats before parsing.
func Magic(b []byte) (magic int8, ok bool) {
	if len(b) <= offMagic {
		return 0, false
	}
	return int8(b[offMagic]), true
}

// ParseHeader decodes the first HeaderSize bytes of b. It checks neither the
// magic, the length nor the CRC. A b shorter than HeaderSize returns an error
// wrapping kerr.CorruptMessage.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, corruptf("%d bytes, need %d for a batch header", len(b), HeaderSize)
	}
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		Length:               int32(be.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[offNumRecords:])),
	}, nil
}

// Check checks what a stored batch's header alone must hold before the rest of
// the batch is read (log recovery and the log's scans): a batchLength that
// covers the header, magic 2, a non-negative LastOffsetDelta and a last
// offset that fits an int64. Errors wrap kerr.CorruptMessage, or
// kerr.UnsupportedForMessageFormat for another magic. It checks neither the
// CRC (CheckCRC) nor the records.
func (h Header) Check() error {
	switch {
	case h.Length < HeaderSize-lengthOverhead:
		return corruptf("batch length %d, below the minimum %d", h.Length, HeaderSize-lengthOverhead)
	case h.Magic != magicV2:
		return fmt.Errorf("%w: batch: magic %d, only 2 is supported", kerr.UnsupportedForMessageFormat, h.Magic)
	case h.LastOffsetDelta < 0:
		return corruptf("negative last offset delta %d", h.LastOffsetDelta)
	case h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta):
		return corruptf("base offset %d + last offset delta %d overflows", h.BaseOffset, h.LastOffsetDelta)
	}
	return nil
}

// CheckCRC checks the CRC-32C of b, which must be exactly one batch
// (len(b) == 12 + batchLength). It returns an error wrapping
// kerr.CorruptMessage when b is short, its length disagrees with batchLength,
// or the checksum does not match.
func CheckCRC(b []byte) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if int64(len(b)) != lengthOverhead+int64(h.Length) {
		return corruptf("batch length field says %d bytes, have %d", lengthOverhead+int64(h.Length), len(b))
	}
	if got := crc(b); got != h.CRC {
		return corruptf("crc mismatch: header has %#08x, bytes give %#08x", h.CRC, got)
	}
	return nil
}

// crc computes the CRC-32C the header should carry; b has at least HeaderSize bytes.
func crc(b []byte) uint32 { return Checksum(b[offAttributes:]) }

// SetBaseOffset rewrites the base offset in place. The field sits outside the
// CRC, so the checksum stays valid.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// SetLogAppendTime marks the batch as LogAppendTime with append time ts (ms):
// it sets attribute bit 3 and MaxTimestamp and recomputes the CRC, as Kafka's
// LogValidator does for topics with message.timestamp.type=LogAppendTime.
// b must be exactly one batch.
func SetLogAppendTime(b []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(b[offAttributes:]) | attrLogAppendTime
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	be.PutUint32(b[offCRC:], crc(b))
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: batch: %s", kerr.CorruptMessage, fmt.Sprintf(format, args...))
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: batch: %s", kerr.InvalidRecord, fmt.Sprintf(format, args...))
}
