package batch

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateGood(t *testing.T) {
	t.Parallel()
	b := Encode(testHeader(), testRecords(5))
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.NumRecords != 5 || h.LastOffsetDelta != 4 || h.BaseSequence != 100 || h.LastSequence() != 104 {
		t.Fatalf("header %+v", h)
	}
}

// rawRecord encodes one record body by hand (everything after its length).
func rawRecord(offsetDelta int32, tail ...byte) []byte {
	body := []byte{0}                   // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, int64(offsetDelta))
	return append(body, tail...)
}

// framed prefixes each body with its varint length.
func framed(bodies ...[]byte) []byte {
	var out []byte
	for _, b := range bodies {
		out = binary.AppendVarint(out, int64(len(b)))
		out = append(out, b...)
	}
	return out
}

// withCount returns b with recordCount and lastOffsetDelta set, resealed.
func withCount(b []byte, n, lastDelta int32) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint32(b[offNumRecords:], uint32(n))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	return reseal(b)
}

func TestValidateErrors(t *testing.T) {
	t.Parallel()
	good := Encode(testHeader(), testRecords(2))
	one := Encode(testHeader(), testRecords(1))
	// key null, value empty, no headers: 0x01 = varint -1, 0x00 = 0.
	okTail := []byte{1, 0, 0}
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want *kerr.Error
	}{
		{"empty", nil, kerr.CorruptMessage},
		{"shorter than header", good[:HeaderSize-1], kerr.CorruptMessage},
		{"truncated", good[:len(good)-1], kerr.CorruptMessage},
		{"trailing byte", append(append([]byte(nil), good...), 0), kerr.CorruptMessage},
		{"length below header", mut(func(b []byte) { binary.BigEndian.PutUint32(b[offLength:], 10) }), kerr.CorruptMessage},
		{"negative length", mut(func(b []byte) { binary.BigEndian.PutUint32(b[offLength:], 0xffffffff) }), kerr.CorruptMessage},
		{"magic 1", reseal(mut(func(b []byte) { b[offMagic] = 1 })), kerr.UnsupportedForMessageFormat},
		{"bad crc", mut(func(b []byte) { b[len(b)-1] ^= 0xff }), kerr.CorruptMessage},
		{"zero records", withCount(good, 0, -1), kerr.InvalidRecord},
		{"negative records", withCount(good, -3, -4), kerr.InvalidRecord},
		{"last delta mismatch", withCount(good, 2, 5), kerr.InvalidRecord},
		{"fewer records than count", withCount(good, 3, 2), kerr.InvalidRecord},
		{"more records than count", withCount(good, 1, 0), kerr.InvalidRecord},
		{"unknown codec 5", withRecordsSection(one, 5, one[HeaderSize:]), kerr.CorruptMessage},
		{"unknown codec 7", withRecordsSection(one, 7, one[HeaderSize:]), kerr.CorruptMessage},
		{"garbage gzip", withRecordsSection(one, CodecGzip, []byte("not gzip")), kerr.CorruptMessage},
		{"garbage snappy", withRecordsSection(one, CodecSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x0f}), kerr.CorruptMessage},
		{"garbage lz4", withRecordsSection(one, CodecLz4, []byte("not lz4 at all")), kerr.CorruptMessage},
		{"garbage zstd", withRecordsSection(one, CodecZstd, []byte("not zstd at all")), kerr.CorruptMessage},
		{"empty gzip", withRecordsSection(one, CodecGzip, nil), kerr.CorruptMessage},
		{"offset delta 1 first", withRecordsSection(one, 0, framed(rawRecord(1, okTail...))), kerr.InvalidRecord},
		{"offset deltas swapped", withRecordsSection(good, 0, framed(rawRecord(1, okTail...), rawRecord(0, okTail...))), kerr.InvalidRecord},
		{"record length past end", withRecordsSection(one, 0, append([]byte{40}, rawRecord(0, okTail...)...)), kerr.InvalidRecord},
		{"negative record length", withRecordsSection(one, 0, append([]byte{3}, rawRecord(0, okTail...)...)), kerr.InvalidRecord},
		{"record length 6-byte varint", withRecordsSection(one, 0, append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0}, rawRecord(0, okTail...)...)), kerr.InvalidRecord},
		{"record field past its length", withRecordsSection(one, 0, framed(rawRecord(0, 1, 0))), kerr.InvalidRecord},
		{"bytes left inside record", withRecordsSection(one, 0, framed(rawRecord(0, 1, 0, 0, 9))), kerr.InvalidRecord},
		{"key length -2", withRecordsSection(one, 0, framed(rawRecord(0, 3, 0, 0))), kerr.InvalidRecord},
		{"key longer than record", withRecordsSection(one, 0, framed(rawRecord(0, 10, 'a', 0, 0))), kerr.InvalidRecord},
		{"negative header count", withRecordsSection(one, 0, framed(rawRecord(0, 1, 0, 1))), kerr.InvalidRecord},
		{"null header key", withRecordsSection(one, 0, framed(rawRecord(0, 1, 0, 2, 1, 0))), kerr.InvalidRecord},
		{"header count past end", withRecordsSection(one, 0, framed(rawRecord(0, 1, 0, 8, 0, 0))), kerr.InvalidRecord},
		{"truncated timestamp varlong", withRecordsSection(one, 0, framed([]byte{0, 0x80})), kerr.InvalidRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Validate(tc.b)
			wantKerr(t, err, tc.want)
		})
	}
}

// The hand-built records the error table starts from must be valid, or the
// table would prove nothing.
func TestValidateHandBuiltRecord(t *testing.T) {
	t.Parallel()
	one := Encode(testHeader(), testRecords(1))
	b := withRecordsSection(one, 0, framed(rawRecord(0, 1, 0, 2, 2, 'h', 0)))
	if _, err := Validate(b); err != nil {
		t.Fatal(err)
	}
	recs, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Key != nil || len(recs[0].Value) != 0 || len(recs[0].Headers) != 1 ||
		recs[0].Headers[0].Key != "h" || len(recs[0].Headers[0].Value) != 0 {
		t.Fatalf("records %+v", recs)
	}
}

func TestValidateTruncatedWrapsUnexpectedEOF(t *testing.T) {
	t.Parallel()
	good := Encode(testHeader(), testRecords(2))
	_, err := Validate(good[:len(good)-3])
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestDecompressionBomb(t *testing.T) {
	t.Parallel()
	// One record whose value is all zeros, far over the bound for the
	// tiny compressed batch; both Validate and Records must refuse it.
	rec := kmsg.NewRecord()
	rec.Value = make([]byte, decompressFloor+1)
	plain := Encode(testHeader(), []kmsg.Record{rec})
	// Snappy expands at most ~21x, so its bomb is a block that claims a
	// huge decoded length; the claim must be refused before allocating.
	lying := binary.AppendUvarint(nil, 1<<30)
	lying = append(lying, 0, 0, 0, 0)
	for _, tc := range []struct {
		name  string
		codec int8
		data  []byte
	}{
		{"gzip", CodecGzip, compressForTest(t, CodecGzip, plain[HeaderSize:])},
		{"lz4", CodecLz4, compressForTest(t, CodecLz4, plain[HeaderSize:])},
		{"zstd", CodecZstd, compressForTest(t, CodecZstd, plain[HeaderSize:])},
		{"raw snappy", CodecSnappy, lying},
		{"xerial snappy", CodecSnappy, append(binary.BigEndian.AppendUint32(xerialForTest([]byte("abc"), 8), uint32(len(lying))), lying...)},
	} {
		b := withRecordsSection(plain, tc.codec, tc.data)
		if len(b)*decompressRatio > decompressFloor {
			t.Fatalf("%s: %d byte batch is not a bomb", tc.name, len(b))
		}
		_, err := Validate(b)
		wantKerr(t, err, kerr.CorruptMessage)
		var tl tooLargeError
		if !errors.As(err, &tl) {
			t.Fatalf("%s: err = %v, want the size bound", tc.name, err)
		}
		_, err = Records(b)
		wantKerr(t, err, kerr.CorruptMessage)
	}
}

// Validate's doc promises it allocates only to decompress: an uncompressed
// batch (keys, values, headers) is checked with no allocation at all. A field
// name built per record (field + " length") used to cost two allocations per
// record on the produce path.
func TestValidateUncompressedDoesNotAllocate(t *testing.T) {
	b := Encode(testHeader(), testRecords(50))
	if _, err := Validate(b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Validate(b) }); n != 0 {
		t.Fatalf("Validate of a 50-record uncompressed batch: %v allocations, want 0", n)
	}
}
