// Package rawreq writes and reads single Kafka frames for tests that talk
// to a broker below any client (bad input, storms, connection limits). It
// encodes with kmsg's RequestFormatter, so every test frames requests the
// way the protocol says: size prefix, request header v1 or v2 (flexible
// versions add the tag section), body. It imports only kmsg and the
// standard library.
package rawreq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrCorrelation is a response whose correlation ID is not the request's.
var ErrCorrelation = errors.New("rawreq: correlation ID mismatch")

// Frame returns req as one size-prefixed request frame with correlation ID
// corr and client ID clientID (nil: a null client ID), at req's version.
func Frame(req kmsg.Request, corr int32, clientID *string) []byte {
	var opts []kmsg.RequestFormatterOpt
	if clientID != nil {
		opts = append(opts, kmsg.FormatterClientID(*clientID))
	}
	return kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, corr)
}

// ReadFrame reads one size-prefixed response frame from r and returns its
// correlation ID and the rest of the frame (response header tags, if any,
// and body).
func ReadFrame(r io.Reader) (corr int32, rest []byte, err error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, err
	}
	if len(b) < 4 {
		return 0, nil, fmt.Errorf("rawreq: %d-byte response frame", len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// ReadResponse reads one response frame from r into resp, whose version
// must be set, and checks that it answers correlation ID corr. The response
// header is v1 (tag section) for flexible versions, except ApiVersions,
// whose response header is always v0 (KIP-511).
func ReadResponse(r io.Reader, corr int32, resp kmsg.Response) error {
	got, b, err := ReadFrame(r)
	if err != nil {
		return err
	}
	if got != corr {
		return fmt.Errorf("%w: %d, want %d", ErrCorrelation, got, corr)
	}
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		if len(b) == 0 || b[0] != 0 {
			return fmt.Errorf("rawreq: response header tags %x, want none", b[:min(len(b), 1)])
		}
		b = b[1:]
	}
	return resp.ReadFrom(b)
}
