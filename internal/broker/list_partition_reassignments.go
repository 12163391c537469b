package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments (key 46), version 0 (KIP-455).
//
// Behaviour: no reassignment is ever in progress, so the answer lists no
// topics, for named partitions and for all (null topics) alike, as Kafka
// does for partitions that are not being reassigned.
//
// Authorization (with an authorizer): DESCRIBE on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
func (b *Broker) handleListPartitionReassignments(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ListPartitionReassignmentsRequest)
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !b.authorizedCluster(info, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	return now(resp)
}
