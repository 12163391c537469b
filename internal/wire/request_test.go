package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf returns req as franz-go puts it on the wire, minus the size.
func frameOf(req kmsg.Request, corr int32, clientID *string) []byte {
	var f *kmsg.RequestFormatter
	if clientID != nil {
		f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
	} else {
		f = kmsg.NewRequestFormatter()
	}
	return f.AppendRequest(nil, req, corr)[4:]
}

func metadataRequest(version int16) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("orders")
	req.Topics = append(req.Topics, topic)
	return req
}

func produceRequest(version int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = -1
	req.TimeoutMillis = 1500
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "orders"
	part := kmsg.NewProduceRequestTopicPartition()
	part.Partition = 3
	part.Records = []byte("not really a batch")
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	return req
}

func apiVersionsRequest(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	req.ClientSoftwareName = "kgo"
	req.ClientSoftwareVersion = "1.22.3"
	return req
}

func TestParseRequestRoundTrip(t *testing.T) {
	t.Parallel()
	id := "kawa-test"
	for _, tc := range []struct {
		name     string
		req      kmsg.Request
		clientID *string
		flexible bool
	}{
		{"metadata v0, header v1", metadataRequest(0), &id, false},
		{"metadata v8, null client id", metadataRequest(8), nil, false},
		{"metadata v12, header v2", metadataRequest(12), &id, true},
		{"produce v3", produceRequest(3), &id, false},
		{"produce v9 flexible", produceRequest(9), &id, true},
		{"api versions v0", apiVersionsRequest(0), &id, false},
		{"api versions v3, header v2", apiVersionsRequest(3), &id, true},
		{"api versions v4", apiVersionsRequest(4), &id, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, req, err := ParseRequest(frameOf(tc.req, 77, tc.clientID))
			if err != nil {
				t.Fatal(err)
			}
			want := Header{Key: tc.req.Key(), Version: tc.req.GetVersion(), CorrelationID: 77, ClientID: tc.clientID}
			if h.Key != want.Key || h.Version != want.Version || h.CorrelationID != 77 || !sameString(h.ClientID, tc.clientID) {
				t.Fatalf("header %+v, want %+v", h, want)
			}
			if req.IsFlexible() != tc.flexible || req.GetVersion() != want.Version {
				t.Fatalf("request v%d flexible %v", req.GetVersion(), req.IsFlexible())
			}
			if got, wantBody := req.AppendTo(nil), tc.req.AppendTo(nil); !bytes.Equal(got, wantBody) {
				t.Fatalf("body re-encodes to %x, want %x", got, wantBody)
			}
		})
	}
}

// ControlledShutdown v0 is the one request with header v0: no client_id.
// (kmsg's RequestFormatter writes no body for it, so the frame is by hand.)
func TestParseRequestHeaderV0(t *testing.T) {
	t.Parallel()
	frame := []byte{0, 7, 0, 0, 0, 0, 0, 42, 0, 0, 0, 4} // key 7, v0, corr 42, broker 4
	h, req, err := ParseRequest(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.Key != 7 || h.Version != 0 || h.CorrelationID != 42 || h.ClientID != nil {
		t.Fatalf("header %+v", h)
	}
	if got := req.(*kmsg.ControlledShutdownRequest).BrokerID; got != 4 {
		t.Fatalf("broker id %d", got)
	}
}

func sameString(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// header assembles a request header by hand; tags, if not nil, is the raw
// tagged-field section.
func header(key, version int16, corr int32, clientID string, tags []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	return append(b, tags...)
}

func TestParseRequestHeaderTaggedFields(t *testing.T) {
	t.Parallel()
	body := metadataRequest(12).AppendTo(nil)
	// Two tagged fields: tag 0 with 3 bytes, tag 300 (two-byte uvarint) empty.
	tags := []byte{2, 0, 3, 'a', 'b', 'c', 0xac, 0x02, 0}
	h, req, err := ParseRequest(append(header(3, 12, 5, "c", tags), body...))
	if err != nil {
		t.Fatal(err)
	}
	if h.Key != 3 || h.Version != 12 || h.CorrelationID != 5 || *h.ClientID != "c" {
		t.Fatalf("header %+v", h)
	}
	if got := req.(*kmsg.MetadataRequest); len(got.Topics) != 1 || *got.Topics[0].Topic != "orders" {
		t.Fatalf("body %+v", got)
	}
}

func TestParseRequestErrors(t *testing.T) {
	t.Parallel()
	meta12 := metadataRequest(12).AppendTo(nil)
	meta1 := metadataRequest(1).AppendTo(nil)
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
		hdr   Header // expected header for unknown key / version
	}{
		{"empty", nil, ErrMalformed, Header{}},
		{"short header", []byte{0, 3, 0, 1, 0, 0}, ErrMalformed, Header{}},
		{"truncated client id", header(3, 1, 9, "abc", nil)[:10], ErrMalformed, Header{}},
		{"missing tagged fields", header(3, 12, 9, "c", nil), ErrMalformed, Header{}},
		{"tag size past end", append(header(3, 12, 9, "c", []byte{1, 0, 9, 1}), meta12[:0]...), ErrMalformed, Header{}},
		{"huge tag count", header(3, 12, 9, "c", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}), ErrMalformed, Header{}},
		{"truncated body", append(header(3, 1, 9, "c", nil), meta1[:len(meta1)-2]...), ErrMalformed, Header{}},
		{"unknown key", header(9999, 0, 9, "c", nil), ErrUnknownKey, Header{Key: 9999, CorrelationID: 9}},
		{"version 999", header(18, 999, 9, "c", nil), ErrUnsupportedVersion, Header{Key: 18, Version: 999, CorrelationID: 9}},
		{"negative version", header(0, -1, 9, "c", nil), ErrUnsupportedVersion, Header{Key: 0, Version: -1, CorrelationID: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, req, err := ParseRequest(tc.frame)
			if !errors.Is(err, tc.want) || req != nil {
				t.Fatalf("ParseRequest = %v, %v; want %v", req, err, tc.want)
			}
			if tc.want == ErrMalformed {
				return
			}
			if h.Key != tc.hdr.Key || h.Version != tc.hdr.Version || h.CorrelationID != tc.hdr.CorrelationID ||
				h.ClientID == nil || *h.ClientID != "c" {
				t.Fatalf("header %+v, want %+v with client id c", h, tc.hdr)
			}
		})
	}
}
