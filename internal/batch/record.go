package batch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// checkRecord checks one record body (everything after its length varint,
// protocol guide "Record") and returns its offset delta. The varint rules
// match kmsg's decoder, so a record that passes here also decodes with
// kmsg.Record.ReadFrom.
func checkRecord(body []byte) (offsetDelta int32, err error) {
	r := reader{b: body}
	r.skip(1, "attributes")
	r.varlong("timestamp delta")
	offsetDelta = r.varint("offset delta")
	r.nullableBytes("key", "key length")
	r.nullableBytes("value", "value length")
	headers := r.varint("header count")
	if headers < 0 && r.err == nil {
		r.err = fmt.Errorf("negative header count %d", headers)
	}
	for j := int32(0); j < headers && r.err == nil; j++ {
		// Kafka rejects a null header key ("Invalid negative header key size").
		keyLen := r.varint("header key length")
		if keyLen < 0 && r.err == nil {
			r.err = fmt.Errorf("header %d: negative key length %d", j, keyLen)
		}
		r.skip(int(keyLen), "header key")
		r.nullableBytes("header value", "header value length")
	}
	if r.err != nil {
		return 0, r.err
	}
	if len(r.b) != 0 {
		return 0, fmt.Errorf("%d bytes left over inside the record", len(r.b))
	}
	return offsetDelta, nil
}

// reader is a sticky decoder over record bytes: after the first failure every
// read returns zero and err names the field that failed.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(field string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated or malformed %s", field)
	}
	r.b = nil
}

func (r *reader) skip(n int, field string) {
	if r.err != nil {
		return
	}
	if n < 0 || n > len(r.b) {
		r.fail(field)
		return
	}
	r.b = r.b[n:]
}

func (r *reader) varint(field string) int32 {
	if r.err != nil {
		return 0
	}
	v, n := varint32(r.b)
	if n == 0 {
		r.fail(field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varlong(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// nullableBytes skips a varint-length byte string; -1 is null. lengthField
// names its length varint; it is a separate constant rather than field +
// " length" because that concatenation escaped to the heap on every record
// (6 % of broker CPU under W2, issue 10).
func (r *reader) nullableBytes(field, lengthField string) {
	l := r.varint(lengthField)
	if l < -1 && r.err == nil {
		r.err = fmt.Errorf("%s length %d", field, l)
	}
	if l > 0 {
		r.skip(int(l), field)
	}
}

// varint32 decodes a zigzag varint of at most 5 bytes that fits 32 bits,
// returning n == 0 on any failure. Longer or overflowing encodings are
// refused, as kmsg's decoder refuses them.
func varint32(b []byte) (int32, int) {
	x, n := binary.Uvarint(b)
	if n <= 0 || n > 5 || x > math.MaxUint32 {
		return 0, 0
	}
	u := uint32(x)
	return int32(u>>1) ^ -int32(u&1), n
}
