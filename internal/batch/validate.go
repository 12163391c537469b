package batch

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Validate checks that b is exactly one v2 batch as a producer sends it and
// returns its header. In order, with the kerr error each failure wraps:
//
//   - len(b) >= HeaderSize and len(b) == 12 + batchLength: CorruptMessage
//   - magic == 2: UnsupportedForMessageFormat
//   - the CRC-32C matches: CorruptMessage
//   - NumRecords >= 1 and LastOffsetDelta == NumRecords-1: InvalidRecord
//   - the records decompress (known codec; at most 64 times len(b) bytes out,
//     but always up to 1 MiB and never over 256 MiB): CorruptMessage
//   - every record's varint length frames exactly its fields, offset deltas
//     run 0..NumRecords-1 in order, and there are exactly NumRecords
//     records: InvalidRecord (Kafka's DefaultRecord and LogValidator raise
//     InvalidRecordException for these)
//
// When b ends inside the batch the error also wraps io.ErrUnexpectedEOF.
// Validate never panics and allocates only to decompress. The Header is
// meaningful only when err is nil.
func Validate(b []byte) (Header, error) {
	h, _, err := ValidateRecords(b)
	return h, err
}

// ValidateRecords is Validate that also returns the batch's records section
// (every record, from the first record's length varint on), decompressed:
// it aliases b when the batch is uncompressed, else it is a new buffer.
// EachTimestamp and Recompress take it, so that a produce decompresses once.
func ValidateRecords(b []byte) (Header, []byte, error) {
	h, err := frame(b)
	if err != nil {
		return Header{}, nil, err
	}
	if h.Size() != len(b) {
		return Header{}, nil, corruptf("%d trailing bytes after a %d byte batch", len(b)-h.Size(), h.Size())
	}
	if h.NumRecords < 1 {
		return Header{}, nil, invalidf("record count %d, need at least 1", h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return Header{}, nil, invalidf("last offset delta %d does not match record count %d", h.LastOffsetDelta, h.NumRecords)
	}
	data, err := recordsSection(h, b)
	if err != nil {
		return Header{}, nil, err
	}
	if err := walkRecords(data, h.NumRecords, true, nil); err != nil {
		return Header{}, nil, err
	}
	return h, data, nil
}

// EachTimestamp calls fn with each record's timestamp (ms: h.FirstTimestamp
// plus the record's timestamp delta) and offset delta, in order, until fn
// returns false. records is the section ValidateRecords returned for the
// batch with header h.
func EachTimestamp(h Header, records []byte, fn func(ts int64, offsetDelta int32) bool) {
	for len(records) > 0 {
		l, n := varint32(records)
		if n == 0 || l < 0 || int64(l) > int64(len(records)-n) {
			return // ValidateRecords checked the framing; stop rather than misread
		}
		r := reader{b: records[n : n+int(l)]}
		r.skip(1, "attributes")
		delta := r.varlong("timestamp delta")
		od := r.varint("offset delta")
		if r.err != nil || !fn(h.FirstTimestamp+delta, od) {
			return
		}
		records = records[n+int(l):]
	}
}

// frame checks the batch at the start of b: a length that covers a header,
// all of its bytes present, magic 2 and a matching CRC. It returns the header;
// b may continue past the batch. When b ends inside the batch the error also
// wraps io.ErrUnexpectedEOF.
func frame(b []byte) (Header, error) {
	if len(b) < lengthOverhead {
		return Header{}, tornf("%d bytes, too few for a batch length", len(b))
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	if length < HeaderSize-lengthOverhead {
		return Header{}, corruptf("batch length %d, below the minimum %d", length, HeaderSize-lengthOverhead)
	}
	if size := lengthOverhead + int64(length); int64(len(b)) < size {
		return Header{}, tornf("batch of %d bytes, only %d present", size, len(b))
	}
	h, err := ParseHeader(b)
	if err != nil {
		return Header{}, err
	}
	if h.Magic != magicV2 {
		return Header{}, fmt.Errorf("%w: batch: magic %d, only 2 is supported", kerr.UnsupportedForMessageFormat, h.Magic)
	}
	if got := crc(b[:h.Size()]); got != h.CRC {
		return Header{}, corruptf("crc mismatch: header has %#08x, bytes give %#08x", h.CRC, got)
	}
	return h, nil
}

// recordsSection returns the records of batch b, decompressed if needed.
// Uncompressed records alias b.
func recordsSection(h Header, b []byte) ([]byte, error) {
	raw := b[HeaderSize:h.Size()]
	if h.Codec() == CodecNone {
		return raw, nil
	}
	return decompress(h.Codec(), raw, decompressLimit(len(b)))
}

// walkRecords checks the framing of the want records in data and calls fn, if
// set, with each record's bytes (its length varint included). With
// exactDeltas, record i must carry offset delta i, as a producer sends it;
// compacted batches may have gaps, so readers do not ask for it.
func walkRecords(data []byte, want int32, exactDeltas bool, fn func(rec []byte) error) error {
	var i int32
	for len(data) > 0 {
		if i == want {
			return invalidf("%d bytes of records after the %d declared", len(data), want)
		}
		l, n := varint32(data)
		if n == 0 || l < 0 || int64(l) > int64(len(data)-n) {
			return invalidf("record %d: bad length (%d) with %d bytes left", i, l, len(data))
		}
		end := n + int(l)
		delta, err := checkRecord(data[n:end])
		if err != nil {
			return invalidf("record %d: %v", i, err)
		}
		if exactDeltas && delta != i {
			return invalidf("record %d has offset delta %d", i, delta)
		}
		if fn != nil {
			if err := fn(data[:end]); err != nil {
				return err
			}
		}
		data = data[end:]
		i++
	}
	if i != want {
		return invalidf("%d records, header says %d", i, want)
	}
	return nil
}

func tornf(format string, args ...any) error {
	return fmt.Errorf("%w: %w: batch: %s", kerr.CorruptMessage, io.ErrUnexpectedEOF, fmt.Sprintf(format, args...))
}
