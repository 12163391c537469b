package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAppendResponse(t *testing.T) {
	t.Parallel()
	apiVersions := func() kmsg.Response {
		r := kmsg.NewPtrApiVersionsResponse()
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MaxVersion = 18, 4
		r.ApiKeys = append(r.ApiKeys, k)
		return r
	}
	metadata := func() kmsg.Response {
		r := kmsg.NewPtrMetadataResponse()
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 9092
		r.Brokers = append(r.Brokers, b)
		return r
	}
	for _, tc := range []struct {
		name    string
		key     int16
		version int16
		resp    func() kmsg.Response
		tagByte bool
	}{
		{"api versions v0", 18, 0, apiVersions, false},
		{"api versions v3 keeps header v0", 18, 3, apiVersions, false},
		{"api versions v4 keeps header v0", 18, 4, apiVersions, false},
		{"metadata v1, header v0", 3, 1, metadata, false},
		{"metadata v9, header v1", 3, 9, metadata, true},
		{"metadata v12, header v1", 3, 12, metadata, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := []byte("existing")
			resp := tc.resp()
			out := AppendResponse(append([]byte(nil), prefix...), Header{Key: tc.key, Version: tc.version, CorrelationID: 0x01020304}, resp)
			if !bytes.HasPrefix(out, prefix) {
				t.Fatal("dst prefix lost")
			}
			frame := out[len(prefix):]
			if size := binary.BigEndian.Uint32(frame); int(size) != len(frame)-4 {
				t.Fatalf("size %d, frame has %d bytes after it", size, len(frame)-4)
			}
			if corr := binary.BigEndian.Uint32(frame[4:]); corr != 0x01020304 {
				t.Fatalf("correlation id %#x", corr)
			}
			body := frame[8:]
			if tc.tagByte {
				if body[0] != 0 {
					t.Fatalf("tagged-field byte %d, want 0", body[0])
				}
				body = body[1:]
			}
			want := tc.resp()
			want.SetVersion(tc.version)
			if resp.GetVersion() != tc.version || !bytes.Equal(body, want.AppendTo(nil)) {
				t.Fatalf("body %x, want %x", body, want.AppendTo(nil))
			}
		})
	}
}
