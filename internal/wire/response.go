package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AppendResponse appends resp to dst as one frame and returns the extended
// slice: an int32 size, then the response header (correlation_id, plus an
// empty tagged-field section when resp is flexible and not ApiVersions), then
// the body. It sets resp's version to h.Version first.
//
// NB: Kafka answers an ApiVersions request of a version it does not support
// with a v0 response; pass h with Version 0 for that.
func AppendResponse(dst []byte, h Header, resp kmsg.Response) []byte {
	resp.SetVersion(h.Version)
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size, filled in below
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if resp.IsFlexible() && resp.Key() != keyApiVersions {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ResponseCorrelationID returns the correlation_id that starts every response
// frame (as returned by ReadFrame). A frame shorter than 4 bytes returns an
// error wrapping ErrMalformed.
func ResponseCorrelationID(frame []byte) (int32, error) {
	if len(frame) < 4 {
		return 0, fmt.Errorf("%w: %d byte frame, too short for a response header", ErrMalformed, len(frame))
	}
	return int32(binary.BigEndian.Uint32(frame)), nil
}

// ParseResponse decodes one response frame (as returned by ReadFrame, for a
// request of the given version) into resp, the inverse of AppendResponse:
// the response header (header v1 with its tagged fields when resp is
// flexible at that version, v0 for ApiVersions and non-flexible versions),
// then the body with kmsg. It returns the correlation ID. Undecodable input
// returns an error wrapping ErrMalformed; it never panics.
func ParseResponse(frame []byte, version int16, resp kmsg.Response) (corr int32, err error) {
	resp.SetVersion(version)
	r := kbin.Reader{Src: frame}
	corr = r.Int32()
	if !r.Ok() {
		return 0, fmt.Errorf("%w: %d byte frame, too short for a response header", ErrMalformed, len(frame))
	}
	if resp.IsFlexible() && resp.Key() != keyApiVersions && !skipTags(&r) {
		return corr, fmt.Errorf("%w: %s v%d response: bad header tagged fields", ErrMalformed, kmsg.NameForKey(resp.Key()), version)
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return corr, fmt.Errorf("%w: %s v%d response body: %v", ErrMalformed, kmsg.NameForKey(resp.Key()), version, err)
	}
	return corr, nil
}
