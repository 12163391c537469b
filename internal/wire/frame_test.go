package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

func sized(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestReadFrame(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("0123456789"), 50_000) // crosses growChunk several times
	stream := append(append(sized([]byte("hello")), sized(nil)...), sized(big)...)
	// One byte at a time exercises every partial read.
	r := iotest.OneByteReader(bytes.NewReader(stream))
	for i, want := range [][]byte{[]byte("hello"), {}, big} {
		got, err := ReadFrame(r, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if _, err := ReadFrame(r, 1<<20); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	t.Parallel()
	readErr := errors.New("boom")
	for _, tc := range []struct {
		name string
		r    io.Reader
		max  int32
		want error
	}{
		{"clean eof", bytes.NewReader(nil), 100, io.EOF},
		{"eof in size", bytes.NewReader([]byte{0, 0}), 100, io.ErrUnexpectedEOF},
		{"eof in body", bytes.NewReader(sized([]byte("hello"))[:7]), 100, io.ErrUnexpectedEOF},
		{"eof right after size", bytes.NewReader([]byte{0, 0, 0, 5}), 100, io.ErrUnexpectedEOF},
		{"negative size", bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xfe, 1, 2}), 100, ErrFrameTooLarge},
		{"over max", bytes.NewReader(sized(make([]byte, 101))), 100, ErrFrameTooLarge},
		{"negative max", bytes.NewReader(sized(nil)), -1, ErrFrameTooLarge},
		{"reader error", io.MultiReader(bytes.NewReader([]byte{0, 0, 0, 9, 1}), iotest.ErrReader(readErr)), 100, readErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReadFrame(tc.r, tc.max)
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("ReadFrame = %q, %v; want %v", got, err, tc.want)
			}
		})
	}
	// Exactly max is allowed.
	if got, err := ReadFrame(bytes.NewReader(sized(make([]byte, 100))), 100); err != nil || len(got) != 100 {
		t.Fatalf("frame of exactly max: %d, %v", len(got), err)
	}
}

// zeros declares a frame of size bytes and then yields zeros lazily,
// counting what was read, without ever holding the frame in memory.
type zeros struct {
	size   uint32
	served int64
	limit  int64 // the stream ends after limit bytes in all
}

func (z *zeros) Read(p []byte) (int, error) {
	if z.served >= z.limit {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.limit-z.served))
	for i := range n {
		p[i] = 0
		if at := z.served + int64(i); at < 4 {
			p[i] = byte(z.size >> (24 - 8*at))
		}
	}
	z.served += int64(n)
	return n, nil
}

// Not parallel: it measures the heap.
func TestReadFrameNoAllocationForDeclaredSize(t *testing.T) {
	// A declared 2 GiB - 1 over the limit is refused after the 4 size
	// bytes, before any of the body is read.
	z := &zeros{size: 1<<31 - 1, limit: 1 << 31}
	if _, err := ReadFrame(z, 100<<20); !errors.Is(err, ErrFrameTooLarge) || z.served != 4 {
		t.Fatalf("err %v after reading %d bytes; want ErrFrameTooLarge after 4", err, z.served)
	}
	// Allowed by the limit, but the peer sends 1 KiB and hangs up: the
	// allocation follows the bytes that arrived, not the 1 GiB declared.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	z = &zeros{size: 1 << 30, limit: 4 + 1024}
	_, err := ReadFrame(z, 1<<31-1)
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("err %v, want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*growChunk {
		t.Fatalf("allocated %d bytes for a 1 KiB partial frame", grew)
	}
}

// TestReadFrameBodyReserves: the growths passed to reserve sum to the frame
// size for a whole frame and stay within one growth of the bytes received
// for a partial one; a reserve error stops the read.
func TestReadFrameBodyReserves(t *testing.T) {
	for _, n := range []int{0, 1, growChunk, growChunk + 1, 5*growChunk + 3} {
		var sum int
		got, err := ReadFrameBody(bytes.NewReader(make([]byte, n)), n, func(g int) error { sum += g; return nil })
		if err != nil || len(got) != n || sum != n {
			t.Fatalf("n=%d: len %d, err %v, reserved %d", n, len(got), err, sum)
		}
	}
	var sum int
	_, err := ReadFrameBody(bytes.NewReader(make([]byte, 3*growChunk)), 1<<30, func(g int) error { sum += g; return nil })
	if err != io.ErrUnexpectedEOF || sum > 2*3*growChunk {
		t.Fatalf("partial frame: err %v, reserved %d for %d bytes received", err, sum, 3*growChunk)
	}
	stop := errors.New("no memory")
	if _, err := ReadFrameBody(bytes.NewReader(make([]byte, 10)), 10, func(int) error { return stop }); err != stop {
		t.Fatalf("reserve error: got %v", err)
	}
}

// Not parallel: it counts allocations. A frame given back with PutBuffer is
// reused by the next ReadFrameBody, whose bytes are all the new frame's (the
// pooled buffer is not zeroed, so a stale byte would show): the produce
// path's frames cost no allocation and no zeroing in the steady state.
func TestReadFrameBodyReusesPutFrames(t *testing.T) {
	const n = 64 << 10
	a, b := bytes.Repeat([]byte{0xaa}, n), bytes.Repeat([]byte{0x55}, n-100)
	got, err := ReadFrameBody(bytes.NewReader(a), n, nil)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("first frame: %d bytes, %v", len(got), err)
	}
	PutBuffer(got)
	got, err = ReadFrameBody(bytes.NewReader(b), len(b), nil)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("second frame, in a reused buffer: %d bytes, %v; want %d bytes of 0x55", len(got), err, len(b))
	}
	PutBuffer(got)
	r := bytes.NewReader(a)
	const runs = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		r.Reset(a)
		f, err := ReadFrameBody(r, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		PutBuffer(f)
	}
	runtime.ReadMemStats(&after)
	// The pool's slice headers are a few dozen bytes a frame; a GC may also
	// drop the pooled buffer once. A fresh frame would be 64 KiB a frame.
	if perFrame := (after.TotalAlloc - before.TotalAlloc) / runs; perFrame > 2<<10 {
		t.Fatalf("ReadFrameBody with frames given back: %d bytes allocated per %d-byte frame, want ~0", perFrame, n)
	}
}
