package wire

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Header is a decoded request header.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string // nil when the client sent a null client_id
}

var (
	// ErrUnknownKey: kmsg knows no request with the header's api_key.
	ErrUnknownKey = errors.New("wire: unknown api key")
	// ErrUnsupportedVersion: the api_version is negative or above kmsg's
	// MaxVersion for the key.
	ErrUnsupportedVersion = errors.New("wire: unsupported api version")
	// ErrMalformed: the header or body does not decode.
	ErrMalformed = errors.New("wire: malformed request")
)

// Keys with header quirks.
const (
	keyControlledShutdown = int16(kmsg.ControlledShutdown) // v0 has request header v0: no client_id
	keyApiVersions        = int16(kmsg.ApiVersions)        // response header stays v0 at every version
)

// ParseRequest decodes one request frame (as returned by ReadFrame): the
// request header (v1, v2 for flexible versions, v0 for ControlledShutdown v0)
// and then the body with kmsg at the header's version. Flexibility is
// kmsg's IsFlexible at that version; tagged fields in the header are skipped.
//
// Errors: for an api_key kmsg does not know, ErrUnknownKey; for a version it
// does not support, ErrUnsupportedVersion. In both cases the returned Header
// is filled (ClientID when it decodes), so the broker can answer ApiVersions
// with UNSUPPORTED_VERSION or close the connection. Any other undecodable
// input returns an error wrapping ErrMalformed. ParseRequest never panics.
//
// NB: byte fields of the request (Produce records, for one) alias frame.
func ParseRequest(frame []byte) (Header, kmsg.Request, error) {
	h, err := ParseRequestKey(frame)
	if err != nil {
		return h, nil, err
	}
	r := kbin.Reader{Src: frame[requestKeyLen:]}
	if h.Key != keyControlledShutdown || h.Version != 0 {
		h.ClientID = r.NullableString()
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, fmt.Errorf("%w: %d", ErrUnknownKey, h.Key)
	}
	if h.Version < 0 || h.Version > req.MaxVersion() {
		return h, nil, fmt.Errorf("%w: %s v%d, max v%d", ErrUnsupportedVersion, kmsg.NameForKey(h.Key), h.Version, req.MaxVersion())
	}
	if !r.Ok() {
		return h, nil, fmt.Errorf("%w: %s v%d: truncated client_id", ErrMalformed, kmsg.NameForKey(h.Key), h.Version)
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() && !skipTags(&r) {
		return h, nil, fmt.Errorf("%w: %s v%d: bad header tagged fields", ErrMalformed, kmsg.NameForKey(h.Key), h.Version)
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d body: %v", ErrMalformed, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, nil
}

// requestKeyLen is the fixed start of every request header: api_key int16,
// api_version int16, correlation_id int32.
const requestKeyLen = 8

// ParseRequestKey decodes the fixed start of a request frame's header
// (api_key, api_version, correlation_id) and nothing after it, for code that
// forwards frames unchanged (internal/proxy). Client ID and Header.ClientID
// stay unset. A frame shorter than 8 bytes returns an error wrapping
// ErrMalformed.
func ParseRequestKey(frame []byte) (Header, error) {
	r := kbin.Reader{Src: frame}
	h := Header{Key: r.Int16(), Version: r.Int16(), CorrelationID: r.Int32()}
	if !r.Ok() {
		return h, fmt.Errorf("%w: %d byte frame, too short for a request header", ErrMalformed, len(frame))
	}
	return h, nil
}

// skipTags consumes a tagged-field section (KIP-482): a uvarint count, then
// per field a uvarint tag, a uvarint size and size bytes. The request header
// defines no tags, so all are skipped. It reports whether the section decoded.
func skipTags(r *kbin.Reader) bool {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
	return r.Ok()
}
