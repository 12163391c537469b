package batch

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrip checks that b validates and that Records gives back want.
func roundTrip(t *testing.T, b []byte, want []kmsg.Record) {
	t.Helper()
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if int(h.NumRecords) != len(want) {
		t.Fatalf("NumRecords %d, want %d", h.NumRecords, len(want))
	}
	got, err := Records(b)
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.OffsetDelta != int32(i) || g.TimestampDelta64 != w.TimestampDelta64 ||
			!bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
			len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d = %+v, want %+v", i, g, w)
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d = %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	recs := testRecords(50)
	plain := Encode(testHeader(), recs)
	roundTrip(t, plain, recs)
	for _, codec := range []int8{CodecGzip, CodecSnappy, CodecLz4, CodecZstd} {
		b := withRecordsSection(plain, codec, compressForTest(t, codec, plain[HeaderSize:]))
		roundTrip(t, b, recs)
	}
}

// The Java producer frames snappy with xerial's header and 32 KiB blocks;
// several blocks must concatenate back.
func TestXerialSnappy(t *testing.T) {
	t.Parallel()
	recs := testRecords(200)
	plain := Encode(testHeader(), recs)
	for _, chunk := range []int{1, 100, 32 << 10} {
		b := withRecordsSection(plain, CodecSnappy, xerialForTest(plain[HeaderSize:], chunk))
		roundTrip(t, b, recs)
	}
	// A block length running past the end is corrupt, not a panic.
	x := xerialForTest(plain[HeaderSize:], 100)
	b := withRecordsSection(plain, CodecSnappy, x[:len(x)-3])
	if _, err := Validate(b); err == nil {
		t.Fatal("truncated xerial stream validated")
	}
}

// A highly compressible batch under the bound must still pass: a 16 MiB
// zero value compresses to well under 1/64 of itself with zstd, and the
// bound then is 64x the batch or 1 MiB, whichever is larger.
func TestDecompressWithinBound(t *testing.T) {
	t.Parallel()
	rec := kmsg.NewRecord()
	rec.Value = bytes.Repeat([]byte("abcdefgh"), (decompressFloor-100)/8)
	want := []kmsg.Record{rec}
	plain := Encode(testHeader(), want)
	for _, codec := range []int8{CodecGzip, CodecSnappy, CodecLz4, CodecZstd} {
		roundTrip(t, withRecordsSection(plain, codec, compressForTest(t, codec, plain[HeaderSize:])), want)
	}
}

func TestRecordsAliasesUncompressed(t *testing.T) {
	t.Parallel()
	b := Encode(testHeader(), testRecords(1))
	recs, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	// Documented: uncompressed values point into b.
	i := bytes.Index(b, []byte("value-a"))
	b[i] = 'V'
	if string(recs[0].Value) != "Value-a" {
		t.Fatalf("value %q does not alias the batch", recs[0].Value)
	}
}
