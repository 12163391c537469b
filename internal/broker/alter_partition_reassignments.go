package broker

import (
	"context"
	"fmt"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The replica-placement admin APIs, answered for a single node: every
// partition has one replica, this node, which is always its preferred
// leader, and no reassignment is ever in progress. Admin clients and their
// test suites (segmentio/kafka-go's) call them as no-ops against a one-broker
// cluster; without them the connection was closed.

// AlterPartitionReassignments (key 45), versions 0-1 (KIP-455).
//
// Behaviour: the only replica set a partition can have is this node, so
// asking for exactly [this node] succeeds without change; any other set is
// INVALID_REPLICA_ASSIGNMENT, and cancelling (null replicas) is
// NO_REASSIGNMENT_IN_PROGRESS. Unknown partitions are
// UNKNOWN_TOPIC_OR_PARTITION.
//
// Authorization (with an authorizer): ALTER on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
func (b *Broker) handleAlterPartitionAssignments(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !b.authorizedCluster(info, kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	resp.AllowReplicationFactorChange = r.AllowReplicationFactorChange
	for _, rt := range r.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			err := b.reassign(rt.Topic, rp)
			sp.ErrorCode, sp.ErrorMessage = errCode(err), errMsg(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}

func (b *Broker) reassign(topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition) error {
	if _, err := b.lookup(topic, rp.Partition); err != nil && errCode(err) == kerr.UnknownTopicOrPartition.Code {
		return err
	}
	if rp.Replicas == nil {
		return kerr.NoReassignmentInProgress
	}
	if len(rp.Replicas) != 1 || rp.Replicas[0] != b.cfg.NodeID {
		return fmt.Errorf("%w: replicas %v; the only broker is %d", kerr.InvalidReplicaAssignment, rp.Replicas, b.cfg.NodeID)
	}
	return nil
}
