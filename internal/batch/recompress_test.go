package batch

import (
	"bytes"
	"testing"
)

// TestRecompressKeepsHeaderAndRecords: Recompress to every codec at Kafka's level bounds gives a batch
// that validates, carries the target codec, decompresses to the same records section and keeps every
// other header field (producer ID, epoch, base sequence, timestamps, transactional bit, offsets).
func TestRecompressKeepsHeaderAndRecords(t *testing.T) {
	src := Encode(func() Header {
		h := testHeader()
		h.Attributes |= attrTransactional
		return h
	}(), testRecords(20))
	h, recs, err := ValidateRecords(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		codec  int8
		levels []int
	}{
		{CodecNone, []int{0}},
		{CodecGzip, []int{-1, 1, 9}},
		{CodecSnappy, []int{0}},
		{CodecLz4, []int{1, 9, 17}},
		{CodecZstd, []int{-131072, 1, 3, 22}},
	} {
		for _, level := range c.levels {
			out, err := Recompress(h, recs, c.codec, level)
			if err != nil {
				t.Fatalf("codec %d level %d: %v", c.codec, level, err)
			}
			oh, orecs, err := ValidateRecords(out)
			if err != nil {
				t.Fatalf("codec %d level %d: the result does not validate: %v", c.codec, level, err)
			}
			want := h
			want.Attributes = h.Attributes&^7 | int16(c.codec)
			want.Length, want.CRC = oh.Length, oh.CRC
			if oh != want || !bytes.Equal(orecs, recs) {
				t.Fatalf("codec %d level %d: header %+v, want %+v; records equal %v", c.codec, level, oh, want, bytes.Equal(orecs, recs))
			}
		}
	}
	// Back from a compressed batch: its decompressed records recompress to another codec.
	z, err := Recompress(h, recs, CodecZstd, 3)
	if err != nil {
		t.Fatal(err)
	}
	zh, zrecs, err := ValidateRecords(z)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Recompress(zh, zrecs, CodecNone, 0)
	if err != nil || !bytes.Equal(plain, src) {
		t.Fatalf("zstd back to uncompressed differs from the original batch (%v)", err)
	}
}
