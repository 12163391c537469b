package batch

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// segment returns three batches back to back, at base offsets 0, 2 and 5,
// with the end offset of each batch.
func segment() (b []byte, ends []int) {
	for i, n := range []int{2, 3, 1} {
		one := Encode(testHeader(), testRecords(n))
		SetBaseOffset(one, int64([]int{0, 2, 5}[i]))
		b = append(b, one...)
		ends = append(ends, len(b))
	}
	return b, ends
}

func TestIterateWhole(t *testing.T) {
	t.Parallel()
	b, ends := segment()
	var bases []int64
	valid, err := Iterate(b, func(h Header, one []byte) bool {
		if len(one) != h.Size() || CheckCRC(one) != nil {
			t.Fatalf("batch at %d: %d bytes, header says %d", h.BaseOffset, len(one), h.Size())
		}
		bases = append(bases, h.BaseOffset)
		return true
	})
	if err != nil || valid != ends[2] {
		t.Fatalf("Iterate = %d, %v; want %d, nil", valid, err, ends[2])
	}
	if len(bases) != 3 || bases[0] != 0 || bases[1] != 2 || bases[2] != 5 {
		t.Fatalf("base offsets %v", bases)
	}
	if valid, err := Iterate(nil, nil); valid != 0 || err != nil {
		t.Fatalf("empty input: %d, %v", valid, err)
	}
}

func TestIterateStopEarly(t *testing.T) {
	t.Parallel()
	b, ends := segment()
	calls := 0
	valid, err := Iterate(b, func(Header, []byte) bool { calls++; return calls < 2 })
	if err != nil || valid != ends[1] || calls != 2 {
		t.Fatalf("Iterate = %d, %v after %d calls; want %d, nil after 2", valid, err, calls, ends[1])
	}
}

func TestIterateStops(t *testing.T) {
	t.Parallel()
	b, ends := segment()
	mut := func(f func(b []byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	for _, tc := range []struct {
		name  string
		b     []byte
		valid int
		torn  bool
		want  *kerr.Error
	}{
		{"torn in length", b[:ends[1]+5], ends[1], true, kerr.CorruptMessage},
		{"torn in header", b[:ends[1]+30], ends[1], true, kerr.CorruptMessage},
		{"torn in records", b[:ends[2]-1], ends[1], true, kerr.CorruptMessage},
		{"zeroed tail", append(append([]byte(nil), b...), make([]byte, 100)...), ends[2], false, kerr.CorruptMessage},
		{"crc in middle", mut(func(c []byte) { c[ends[0]+HeaderSize] ^= 1 }), ends[0], false, kerr.CorruptMessage},
		{"magic in middle", mut(func(c []byte) { c[ends[0]+offMagic] = 1 }), ends[0], false, kerr.UnsupportedForMessageFormat},
		{"huge length at start", mut(func(c []byte) { binary.BigEndian.PutUint32(c[offLength:], 1<<31-1) }), 0, true, kerr.CorruptMessage},
		{"negative length", mut(func(c []byte) { binary.BigEndian.PutUint32(c[ends[0]+offLength:], 1<<31) }), ends[0], false, kerr.CorruptMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			valid, err := Iterate(tc.b, func(Header, []byte) bool { return true })
			if valid != tc.valid {
				t.Fatalf("valid = %d, want %d (err %v)", valid, tc.valid, err)
			}
			wantKerr(t, err, tc.want)
			if errors.Is(err, io.ErrUnexpectedEOF) != tc.torn {
				t.Fatalf("err = %v, torn want %v", err, tc.torn)
			}
		})
	}
}
