// Package recfmt is the field encoding of Kawa's own binary records: the
// __consumer_offsets and __transaction_state values Kawa defines, and the
// producer-state snapshots. Fields are big-endian fixed-width integers and
// strings prefixed by their length as a uint16.
//
// Decoding is sticky: the first read past the end marks the Reader bad and
// every later read returns zeros, so a decoder reads all its fields and checks
// Bad (or Done) once at the end instead of after every field. Kafka-defined
// records (GroupMetadata, offset commit keys and values) are kmsg's job, not
// this package's.
package recfmt

import "encoding/binary"

// AppendString appends s with its length as a big-endian uint16. s must be
// at most 65,535 bytes (group IDs, topic names and transactional IDs are
// bounded by Kafka's int16 string length).
func AppendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// Reader is a sticky bounds-checked decoder over one record.
type Reader struct {
	b   []byte
	bad bool
}

// NewReader reads b; it does not copy it (Take returns sub-slices of b).
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Take returns the next n bytes, or n zero bytes (and marks the Reader bad)
// when fewer than n are left or the Reader is already bad.
func (r *Reader) Take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		if n < 0 {
			n = 0
		}
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// U8 reads one byte.
func (r *Reader) U8() uint8 { return r.Take(1)[0] }

// U16 reads a big-endian uint16.
func (r *Reader) U16() uint16 { return binary.BigEndian.Uint16(r.Take(2)) }

// U32 reads a big-endian uint32.
func (r *Reader) U32() uint32 { return binary.BigEndian.Uint32(r.Take(4)) }

// U64 reads a big-endian uint64.
func (r *Reader) U64() uint64 { return binary.BigEndian.Uint64(r.Take(8)) }

// Str reads a string written by AppendString.
func (r *Reader) Str() string { return string(r.Take(int(r.U16()))) }

// Fail marks the Reader bad, for a decoder that finds a field out of range.
func (r *Reader) Fail() { r.bad = true }

// Bad reports whether a read ran past the end (or Fail was called).
func (r *Reader) Bad() bool { return r.bad }

// Len is the number of bytes not read yet.
func (r *Reader) Len() int { return len(r.b) }

// Done reports whether every byte was read and no read was short.
func (r *Reader) Done() bool { return !r.bad && len(r.b) == 0 }
