package server

import (
	"bufio"
	"net"
	"sync"

	"github.com/kawa-broker/kawa/internal/wire"
)

// connBufSize is the size of a connection's socket read buffer and write
// buffer while it is busy: 64 KiB, so a pipelined burst of produce requests
// or of small responses costs one syscall per 64 KiB.
const connBufSize = 64 << 10

// A connection holds its read and write buffers only between the first byte
// of a request (or a response) and the moment it has nothing more buffered;
// idle, it holds neither. Kept for the connection's life they were 128 KiB
// of the ~150 KiB every idle connection held (issue 10: ~313 KiB of RSS per
// connection at 2,000 connections, 1,000 producer clients over the 256 MiB
// target). sync.Pool drops what stays unused across two GCs.
var (
	readBufs  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, connBufSize) }}
	writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, connBufSize) }}
)

// keepResponseBuf is the largest response buffer a connection keeps between
// the responses of one burst. A larger one (a Metadata of 10,000 partitions
// is ~500 KiB; kept, it was measured at 745 KiB per connection at 2,000
// connections) goes back to the shared pool (wire.GetBuffer) at once, so the
// next large response on any connection does not grow a fresh buffer.
const keepResponseBuf = 64 << 10

// frameReader reads a connection's request frames through a pooled
// bufio.Reader that it holds only while bytes are buffered. Owned by the
// connection's reader goroutine.
type frameReader struct {
	nc net.Conn
	br *bufio.Reader // nil while nothing is buffered
}

// readSize reads the next frame's size prefix (wire.ReadFrameSize). With
// nothing buffered it gives the buffer back first and waits for the prefix on
// the socket itself, so a connection idle between requests holds no buffer;
// the body is then read through a pooled buffer (readBody).
func (fr *frameReader) readSize(max int32) (int, error) {
	if fr.br != nil && fr.br.Buffered() == 0 {
		fr.release()
	}
	if fr.br != nil {
		return wire.ReadFrameSize(fr.br, max)
	}
	n, err := wire.ReadFrameSize(fr.nc, max)
	if err != nil {
		return 0, err
	}
	fr.br = readBufs.Get().(*bufio.Reader)
	fr.br.Reset(fr.nc)
	return n, nil
}

// readBody reads the n-byte body of the frame whose size readSize returned
// (wire.ReadFrameBody).
func (fr *frameReader) readBody(n int, reserve func(grow int) error) ([]byte, error) {
	return wire.ReadFrameBody(fr.br, n, reserve)
}

// release gives the read buffer back to the pool; bytes still buffered are
// dropped, so only call it when there are none or the connection is done.
func (fr *frameReader) release() {
	if fr.br == nil {
		return
	}
	fr.br.Reset(nil)
	readBufs.Put(fr.br)
	fr.br = nil
}

// responseWriter holds a connection's pooled write buffer and response
// frame buffer between the first response of a burst and the flush that
// ends it. Owned by the connection's writer goroutine.
type responseWriter struct {
	nc net.Conn
	w  *bufio.Writer // nil while idle
	// frame is the buffer responses are encoded into (wire.GetBuffer); nil
	// while idle.
	frame []byte
	// hint is the length of the last response: the next one (a Fetch in a
	// catch-up read, a Metadata of many partitions) likely needs as much, so
	// its buffer is taken from the pool at that size instead of grown.
	hint int
}

// writer returns the write buffer, taking one from the pool if idle.
func (rw *responseWriter) writer() *bufio.Writer {
	if rw.w == nil {
		rw.w = writeBufs.Get().(*bufio.Writer)
		rw.w.Reset(rw.nc)
	}
	return rw.w
}

// frameBuf returns an empty response buffer of at least the last response's
// capacity.
func (rw *responseWriter) frameBuf() []byte {
	if rw.frame == nil {
		rw.frame = wire.GetBuffer(max(rw.hint, 1))
	}
	return rw.frame[:0]
}

// encoded records the buffer a response was encoded into (frameBuf's,
// possibly grown). One larger than keepResponseBuf goes back to the pool at
// once rather than staying with this connection through the burst.
func (rw *responseWriter) encoded(frame []byte) {
	rw.hint = len(frame)
	rw.frame = frame
	if cap(frame) > keepResponseBuf {
		wire.PutBuffer(frame)
		rw.frame = nil
	}
}

// flush writes what is buffered and gives both buffers back to the pools:
// the connection has nothing more to send for now.
func (rw *responseWriter) flush() error {
	var err error
	if rw.w != nil {
		err = rw.w.Flush()
		rw.w.Reset(nil)
		writeBufs.Put(rw.w)
		rw.w = nil
	}
	if rw.frame != nil {
		wire.PutBuffer(rw.frame)
		rw.frame = nil
	}
	return err
}
