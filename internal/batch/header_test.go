package batch

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestEncodeParseHeader(t *testing.T) {
	t.Parallel()
	in := testHeader()
	in.BaseOffset = 42
	in.Attributes = attrTransactional | int16(CodecZstd) // codec bits must be dropped
	b := Encode(in, testRecords(3))
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Attributes = attrTransactional
	want.Magic = 2
	want.NumRecords = 3
	want.LastOffsetDelta = 2
	want.Length = int32(len(b) - 12)
	want.CRC = crc(b)
	if h != want {
		t.Fatalf("header = %+v\nwant     %+v", h, want)
	}
	if h.Size() != len(b) || h.LastOffset() != 44 || h.Codec() != CodecNone {
		t.Fatalf("Size %d LastOffset %d Codec %d", h.Size(), h.LastOffset(), h.Codec())
	}
	if !h.Transactional() || h.Control() || h.LogAppendTime() || h.HasDeleteHorizon() {
		t.Fatalf("attribute accessors wrong for %#x", h.Attributes)
	}
}

func TestParseHeaderShort(t *testing.T) {
	t.Parallel()
	_, err := ParseHeader(make([]byte, HeaderSize-1))
	wantKerr(t, err, kerr.CorruptMessage)
}

func TestLastSequence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base, delta, want int32
	}{
		{0, 0, 0},
		{100, 4, 104},
		{math.MaxInt32 - 3, 3, math.MaxInt32},
		{math.MaxInt32 - 1, 3, 1}, // wraps past MaxInt32 to 0, as Kafka does
		{math.MaxInt32, 1, 0},
		{-1, 5, -1}, // no sequence stays no sequence
	} {
		h := Header{BaseSequence: tc.base, LastOffsetDelta: tc.delta}
		if got := h.LastSequence(); got != tc.want {
			t.Errorf("LastSequence(base %d, delta %d) = %d, want %d", tc.base, tc.delta, got, tc.want)
		}
	}
}

func TestSetOutsideCRC(t *testing.T) {
	t.Parallel()
	b := Encode(testHeader(), testRecords(2))
	SetBaseOffset(b, 1<<40)
	if err := CheckCRC(b); err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(b)
	if h.BaseOffset != 1<<40 || h.LastOffset() != 1<<40+1 {
		t.Fatalf("header after rewrite: %+v", h)
	}
}

func TestSetLogAppendTime(t *testing.T) {
	t.Parallel()
	b := Encode(testHeader(), testRecords(2))
	SetLogAppendTime(b, 1_800_000_000_000)
	if err := CheckCRC(b); err != nil {
		t.Fatalf("CRC after SetLogAppendTime: %v", err)
	}
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != 1_800_000_000_000 || h.FirstTimestamp != testHeader().FirstTimestamp {
		t.Fatalf("header after SetLogAppendTime: %+v", h)
	}
}

func TestCheckCRC(t *testing.T) {
	t.Parallel()
	good := Encode(testHeader(), testRecords(2))
	if err := CheckCRC(good); err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 1
	crcFlipped := append([]byte(nil), good...)
	crcFlipped[offCRC] ^= 1
	for name, b := range map[string][]byte{
		"short":          good[:HeaderSize-1],
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"record bit":     flipped,
		"crc bit":        crcFlipped,
	} {
		t.Run(name, func(t *testing.T) { wantKerr(t, CheckCRC(b), kerr.CorruptMessage) })
	}
	// Fields outside the CRC do not matter to it.
	outside := append([]byte(nil), good...)
	binary.BigEndian.PutUint64(outside, 77)
	if err := CheckCRC(outside); err != nil {
		t.Fatal(err)
	}
}

func TestHeaderCheck(t *testing.T) {
	t.Parallel()
	good, err := ParseHeader(Encode(testHeader(), testRecords(3)))
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Check(); err != nil {
		t.Fatalf("Check of an encoded batch: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*Header)
		want *kerr.Error
	}{
		"short length":   {func(h *Header) { h.Length = HeaderSize - 13 }, kerr.CorruptMessage},
		"magic 1":        {func(h *Header) { h.Magic = 1 }, kerr.UnsupportedForMessageFormat},
		"negative delta": {func(h *Header) { h.LastOffsetDelta = -1 }, kerr.CorruptMessage},
		"overflow":       {func(h *Header) { h.BaseOffset, h.LastOffsetDelta = math.MaxInt64-1, 2 }, kerr.CorruptMessage},
	} {
		h := good
		tc.edit(&h)
		t.Run(name, func(t *testing.T) { wantKerr(t, h.Check(), tc.want) })
	}
}

func TestChecksumIsCastagnoli(t *testing.T) {
	t.Parallel()
	// RFC 3720 B.4: 32 bytes of zeros give 0x8a9136aa under CRC-32C.
	if got := Checksum(make([]byte, 32)); got != 0x8a9136aa {
		t.Fatalf("Checksum(32 zero bytes) = %#08x, want 0x8a9136aa", got)
	}
}

func TestMagic(t *testing.T) {
	t.Parallel()
	b := Encode(testHeader(), testRecords(1))
	if m, ok := Magic(b); !ok || m != 2 {
		t.Fatalf("Magic(v2 batch) = %d, %v; want 2, true", m, ok)
	}
	if _, ok := Magic(b[:16]); ok {
		t.Fatal("Magic of 16 bytes reported a magic")
	}
	b[16] = 1
	if m, ok := Magic(b[:17]); !ok || m != 1 {
		t.Fatalf("Magic(17 bytes, magic 1) = %d, %v; want 1, true", m, ok)
	}
}
