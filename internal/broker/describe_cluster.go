package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster (key 60), versions 0-1 (KIP-700).
//
// Authorization: none beyond authentication, as in Kafka (the
// authorized-operations field, KIP-430, is left at "not requested").
func (b *Broker) handleDescribeCluster(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	if r.Version >= 1 && r.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return now(resp)
	}
	resp.EndpointType = 1
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.cfg.NodeID
	host, port := b.advertised(info)
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: b.cfg.NodeID, Host: host, Port: port}}
	return now(resp)
}
