package proxy

import (
	"encoding/binary"
	"io"
	"net"
)

// maxFrame bounds a frame the proxy buffers (Kafka's default
// socket.request.max.bytes is 100 MiB).
const maxFrame = 256 << 20

// Frame names one Kafka request or response crossing the proxy.
type Frame struct {
	Conn    uint64 // connection number, from 1 in accept order
	Key     int16  // API key; for a response, that of the request it answers (-1 if unknown)
	Version int16  // API version of the request (-1 if unknown)
	Corr    int32  // correlation ID
}

// writeFrame writes body with its int32 size prefix in one writev, so the
// peer sees the frame byte for byte as it was read.
func writeFrame(w io.Writer, body []byte) error {
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(body)))
	bufs := net.Buffers{size[:], body}
	_, err := bufs.WriteTo(w)
	return err
}
