package proxy

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys whose responses carry broker addresses.
const (
	keyMetadata        = 3
	keyFindCoordinator = 10
	keyDescribeCluster = 60
)

// rewrites reports whether responses to key carry broker addresses.
func rewrites(key int16) bool {
	return key == keyMetadata || key == keyFindCoordinator || key == keyDescribeCluster
}

// rewriteAddrs returns the response frame b (size prefix included) with
// every broker host and port replaced by host and port. key and version are
// those of the request b answers.
func rewriteAddrs(b []byte, key, version int16, host string, port int32) ([]byte, error) {
	req := kmsg.RequestForKey(key)
	resp := kmsg.ResponseForKey(key)
	req.SetVersion(version)
	resp.SetVersion(version)
	hdr := 4 + 4 // size prefix, correlation ID
	if req.IsFlexible() {
		n, err := skipTags(b[hdr:])
		if err != nil {
			return nil, err
		}
		hdr += n
	}
	if err := resp.ReadFrom(b[hdr:]); err != nil {
		return nil, fmt.Errorf("proxy: decode %s v%d response: %w", kmsg.NameForKey(key), version, err)
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = host, port
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Host != "" {
			r.Host, r.Port = host, port
		}
		for i := range r.Coordinators {
			if r.Coordinators[i].Host != "" {
				r.Coordinators[i].Host, r.Coordinators[i].Port = host, port
			}
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = host, port
		}
	}
	out := append([]byte(nil), b[:hdr]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}
