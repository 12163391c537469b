package proxy

import (
	"fmt"

	"github.com/kawa-broker/kawa/internal/wire"
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

// rewriteAddrs returns the response frame b (without its size prefix) with
// every broker host and port replaced by host and port. key and version are
// those of the request b answers.
func rewriteAddrs(b []byte, key, version int16, host string, port int32) ([]byte, error) {
	resp := kmsg.ResponseForKey(key)
	corr, err := wire.ParseResponse(b, version, resp)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
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
	return wire.AppendResponse(nil, wire.Header{Version: version, CorrelationID: corr}, resp)[4:], nil
}
