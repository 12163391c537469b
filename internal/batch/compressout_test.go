package batch

import (
	"bytes"
	"testing"
)

// TestCompress: an uncompressed batch compressed with each codec validates, carries the codec in its
// attributes, keeps every other header field and decodes back to the same records; compressing with CodecNone,
// or a batch without records, returns it unchanged; a compressed batch or an unknown codec is refused.
func TestCompress(t *testing.T) {
	t.Parallel()
	recs := testRecords(200)
	h := testHeader()
	h.Attributes = attrTransactional
	plain := Encode(h, recs)
	ph, err := ParseHeader(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []int8{CodecGzip, CodecSnappy, CodecLz4, CodecZstd} {
		c, err := Compress(plain, codec)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		roundTrip(t, c, recs)
		ch, _ := ParseHeader(c)
		if ch.Codec() != codec || !ch.Transactional() || len(c) >= len(plain) {
			t.Fatalf("codec %d: header %+v, %d bytes (uncompressed %d)", codec, ch, len(c), len(plain))
		}
		ch.Attributes, ch.Length, ch.CRC = ph.Attributes, ph.Length, ph.CRC
		if ch != ph {
			t.Fatalf("codec %d: header fields changed: %+v, was %+v", codec, ch, ph)
		}
		if _, err := Compress(c, codec); err == nil {
			t.Fatalf("codec %d: a compressed batch was compressed again", codec)
		}
	}
	if c, err := Compress(plain, CodecNone); err != nil || !bytes.Equal(c, plain) {
		t.Fatalf("CodecNone: %v, changed %v", err, !bytes.Equal(c, plain))
	}
	empty := EncodeRetained(h, nil)
	if c, err := Compress(empty, CodecZstd); err != nil || !bytes.Equal(c, empty) {
		t.Fatalf("empty batch: %v, changed %v", err, !bytes.Equal(c, empty))
	}
	if _, err := Compress(plain, 5); err == nil {
		t.Fatal("codec 5 accepted")
	}
}
