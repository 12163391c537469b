package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrFrameTooLarge is returned by ReadFrame when a frame declares a negative
// size or one over the limit (Kafka's socket.request.max.bytes); the
// connection cannot be resynchronised and should be closed.
var ErrFrameTooLarge = errors.New("wire: frame size out of range")

// growChunk bounds what ReadFrame allocates ahead of the bytes that actually
// arrived, so a peer that declares a large frame and stalls costs little.
// It is 1 MiB because typical produce requests fit: growing a 1 MiB frame
// from 64 KiB by doubling cost ~20% of the broker's produce CPU (memmove and
// zeroing of the discarded buffers, measured with pprof).
const growChunk = 1 << 20

// ReadFrame reads one frame from r: a big-endian int32 size, then exactly
// that many bytes, which it returns (a slice the caller owns, from
// GetBuffer: the caller may give it back with PutBuffer once nothing refers
// to it, or leave it to the GC).
//
// The size is checked against max before anything is allocated: a negative
// size or one above max returns an error wrapping ErrFrameTooLarge, having
// read only the 4 size bytes. The buffer then grows with the data received,
// at most growChunk or doubling ahead of it, rather than to the declared size
// at once.
//
// ReadFrame returns io.EOF only when r ends cleanly before a frame starts,
// io.ErrUnexpectedEOF when it ends inside one, and other errors from r as is.
func ReadFrame(r io.Reader, max int32) ([]byte, error) {
	n, err := ReadFrameSize(r, max)
	if err != nil {
		return nil, err
	}
	return ReadFrameBody(r, n, nil)
}

// ReadFrameSize reads a frame's 4-byte big-endian size prefix and checks it:
// a negative size or one above max returns an error wrapping
// ErrFrameTooLarge. It returns io.EOF when r ends before the first byte and
// io.ErrUnexpectedEOF inside the prefix.
func ReadFrameSize(r io.Reader, max int32) (int, error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return 0, err // io.EOF before any byte, io.ErrUnexpectedEOF after some
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 0 || size > max {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, size, max)
	}
	return int(size), nil
}

// ReadFrameBody reads the n bytes of a frame whose size prefix was read by
// ReadFrameSize. The buffer grows with the data received (growChunk, then
// doubling), and before each growth reserve, if non-nil, is called with the
// bytes the buffer is about to grow by; an error from it is returned as is
// and nothing more is read. The growths sum to n for a whole frame, so a
// caller that reserves memory from a pool holds exactly the frame's size
// once it is read, and only what arrived (plus one growth) while it trickles.
// A body that ends early is io.ErrUnexpectedEOF.
//
// The buffer that holds the whole frame comes from GetBuffer (from 4 KiB up),
// not zeroed (every byte of the returned slice was read from r); the smaller
// steps of a frame over growChunk are plain allocations left to the GC, so a
// stalled sender pins no pooled memory. Fresh, zeroed frames were 99.5 % of the broker's allocated
// bytes under produce load (issue 10). The caller owns the frame; it may
// hand it back with PutBuffer once nothing refers to it any more (kmsg's
// decoded []byte fields alias it), or leave it to the GC.
func ReadFrameBody(r io.Reader, n int, reserve func(grow int) error) ([]byte, error) {
	var buf []byte
	limit := 0 // bytes reserved so far: buf is never read past it, whatever its pooled capacity
	for len(buf) < n || buf == nil {
		if len(buf) == limit {
			next := min(n, max(growChunk, 2*limit))
			if reserve != nil {
				if err := reserve(next - limit); err != nil {
					return nil, err // buf is a step of an unfinished frame, never pooled
				}
			}
			var grown []byte
			if next < 1<<minBufferShift || next < n {
				// Small requests (heartbeats, metadata) take no pooled 4 KiB. A buffer that cannot hold the
				// whole frame is a step of a frame still trickling in: fresh memory, touched only as bytes
				// arrive and left to the GC once outgrown. Pooling those steps let senders that declare huge
				// frames and stall (TestInFlightRequestMemoryCapped) hold pooled, fully resident buffers on
				// top of queued.max.request.bytes: peak RSS 508-540 MiB against 318-350 MiB unpooled.
				grown = make([]byte, len(buf), next)
			} else {
				grown = GetBuffer(next)[:len(buf)]
			}
			copy(grown, buf)
			buf, limit = grown, next
		}
		got, err := io.ReadFull(r, buf[len(buf):limit])
		buf = buf[:len(buf)+got]
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			if limit == n {
				PutBuffer(buf) // the whole frame's pooled buffer
			}
			return nil, err
		}
	}
	return buf, nil
}
