package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// readFrame reads one size-prefixed frame and returns it whole, prefix
// included, so it can be forwarded byte for byte.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxFrame {
		return nil, fmt.Errorf("proxy: frame size %d out of range", n)
	}
	b := make([]byte, 4+int(n))
	copy(b, size[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return nil, err
	}
	return b, nil
}

// parseRequest reads api key, version and correlation ID from a request
// frame (size prefix included).
func parseRequest(b []byte) (key, version int16, corr int32, err error) {
	if len(b) < 4+8 {
		return 0, 0, 0, errors.New("proxy: request header too short")
	}
	key = int16(binary.BigEndian.Uint16(b[4:]))
	version = int16(binary.BigEndian.Uint16(b[6:]))
	corr = int32(binary.BigEndian.Uint32(b[8:]))
	return key, version, corr, nil
}

// responseCorr reads the correlation ID of a response frame.
func responseCorr(b []byte) int32 {
	return int32(binary.BigEndian.Uint32(b[4:]))
}

// skipTags returns the length of a tagged-field section at the start of b
// (a uvarint count, then per field a uvarint tag, a uvarint size and the
// data).
func skipTags(b []byte) (int, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, errors.New("proxy: bad tagged fields")
	}
	pos := n
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b[pos:]); n <= 0 {
			return 0, errors.New("proxy: bad tag")
		}
		pos += n
		size, n := binary.Uvarint(b[pos:])
		if n <= 0 || size > uint64(len(b)-pos-n) {
			return 0, errors.New("proxy: bad tag size")
		}
		pos += n + int(size)
	}
	return pos, nil
}
