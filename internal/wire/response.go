package wire

import (
	"encoding/binary"

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
