package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// The few record batch v2 header fields the log needs (Kafka protocol, "Record Batch"). Records are never decoded.
const (
	headerLen      = 61 // baseOffset through recordCount
	lengthPrefix   = 12 // baseOffset int64 + batchLength int32; batchLength counts the bytes after it
	minBatchLength = headerLen - lengthPrefix
	magicV2        = 2
	crcStart       = 21 // the CRC-32C covers attributes to the end
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is a parsed batch header.
type header struct {
	base      int64 // baseOffset [0:8]
	length    int32 // batchLength [8:12]
	magic     int8  // [16]
	crc       uint32
	lastDelta int32 // lastOffsetDelta [23:27]
	maxTs     int64 // maxTimestamp [35:43]
}

func (h header) size() int64 { return lengthPrefix + int64(h.length) }
func (h header) last() int64 { return h.base + int64(h.lastDelta) }

// parseHeader reads the header at the start of b (len(b) >= headerLen) and checks what can be checked without
// the rest of the batch: length, magic and lastOffsetDelta.
func parseHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("%d bytes, want at least %d for a batch header", len(b), headerLen)
	}
	h := header{
		base:      int64(binary.BigEndian.Uint64(b[0:8])),
		length:    int32(binary.BigEndian.Uint32(b[8:12])),
		magic:     int8(b[16]),
		crc:       binary.BigEndian.Uint32(b[17:21]),
		lastDelta: int32(binary.BigEndian.Uint32(b[23:27])),
		maxTs:     int64(binary.BigEndian.Uint64(b[35:43])),
	}
	switch {
	case h.length < minBatchLength:
		return h, fmt.Errorf("batch length %d below the minimum %d", h.length, minBatchLength)
	case h.magic != magicV2:
		return h, fmt.Errorf("magic %d, want %d", h.magic, magicV2)
	case h.lastDelta < 0:
		return h, fmt.Errorf("negative lastOffsetDelta %d", h.lastDelta)
	case h.base > math.MaxInt64-int64(h.lastDelta):
		return h, fmt.Errorf("base offset %d + lastOffsetDelta %d overflows", h.base, h.lastDelta)
	}
	return h, nil
}

// checkCRC reports whether the whole batch b matches its header's CRC-32C.
func checkCRC(h header, b []byte) bool {
	return crc32.Checksum(b[crcStart:], castagnoli) == h.crc
}
