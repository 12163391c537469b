package recfmt

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	b := []byte{7}
	b = binary.BigEndian.AppendUint16(b, 0xBEEF)
	b = binary.BigEndian.AppendUint32(b, 0xDEADBEEF)
	b = binary.BigEndian.AppendUint64(b, 1<<62+5)
	b = AppendString(b, "orders")
	b = AppendString(b, "")
	r := NewReader(b)
	if got := r.U8(); got != 7 {
		t.Fatalf("U8 = %d", got)
	}
	if got := r.U16(); got != 0xBEEF {
		t.Fatalf("U16 = %#x", got)
	}
	if got := r.U32(); got != 0xDEADBEEF {
		t.Fatalf("U32 = %#x", got)
	}
	if got := r.U64(); got != 1<<62+5 {
		t.Fatalf("U64 = %d", got)
	}
	if got := r.Str(); got != "orders" {
		t.Fatalf("Str = %q", got)
	}
	if got := r.Str(); got != "" {
		t.Fatalf("empty Str = %q", got)
	}
	if !r.Done() || r.Bad() || r.Len() != 0 {
		t.Fatalf("Done %v Bad %v Len %d after reading everything", r.Done(), r.Bad(), r.Len())
	}
}

// A short read makes every later read zero, even one that would fit.
func TestSticky(t *testing.T) {
	r := NewReader([]byte{0, 9, 'a', 'b', 1, 2, 3, 4})
	if s := r.Str(); s != "\x00\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("short Str = %q, want 9 zero bytes", s)
	}
	if !r.Bad() || r.Done() {
		t.Fatalf("Bad %v Done %v after a short read", r.Bad(), r.Done())
	}
	if got := r.U8(); got != 0 {
		t.Fatalf("U8 after a short read = %d, want 0", got)
	}
	if r.Len() != 6 {
		t.Fatalf("Len = %d: a short read must not consume", r.Len())
	}
	r = NewReader([]byte{1})
	if got := r.Take(-1); len(got) != 0 || !r.Bad() {
		t.Fatalf("Take(-1) = %v, bad %v", got, r.Bad())
	}
	r = NewReader([]byte{1, 2})
	r.Fail()
	if got := r.U16(); got != 0 || !r.Bad() {
		t.Fatalf("U16 after Fail = %d", got)
	}
}

func TestDoneNeedsEveryByte(t *testing.T) {
	r := NewReader(AppendString(nil, "x"))
	_ = r.U16()
	if r.Done() {
		t.Fatal("Done with a byte left")
	}
	if !bytes.Equal(r.Take(1), []byte("x")) || !r.Done() {
		t.Fatal("Take of the last byte")
	}
}
