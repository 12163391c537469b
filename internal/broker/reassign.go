package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The replica-placement admin APIs, answered for a single node: every
// partition has one replica, this node, which is always its preferred
// leader, and no reassignment is ever in progress. Admin clients and their
// test suites (segmentio/kafka-go's) call them as no-ops against a one-broker
// cluster; without them the connection was closed.

// ElectLeaders (key 43), versions 0-2 (KIP-183, KIP-460).
//
// Behaviour: a named partition that exists is ELECTION_NOT_NEEDED (its only
// replica already leads); an offline one (log corruption) is
// ELIGIBLE_LEADERS_NOT_AVAILABLE; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
// A null topic list means every partition, and, as in Kafka, partitions
// that need no election are then left out, so the answer is empty.
// Preferred (0) and unclean (1) elections are answered alike; another
// election type is INVALID_REQUEST (v1+ top-level error).
func init() {
	register(43, 0, 2, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.ElectLeadersRequest)
		resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		if r.Version >= 1 && r.ElectionType != 0 && r.ElectionType != 1 {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return now(resp)
		}
		for _, rt := range r.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition = p
				_, err := b.lookup(rt.Topic, p)
				switch {
				case err == nil:
					err = kerr.ElectionNotNeeded
				case errCode(err) == kerr.KafkaStorageError.Code:
					err = fmt.Errorf("%w: the only replica is offline", kerr.EligibleLeadersNotAvailable)
				}
				sp.ErrorCode, sp.ErrorMessage = errCode(err), errMsg(err)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return now(resp)
	})
}

// AlterPartitionReassignments (key 45), versions 0-1 (KIP-455).
//
// Behaviour: the only replica set a partition can have is this node, so
// asking for exactly [this node] succeeds without change; any other set is
// INVALID_REPLICA_ASSIGNMENT, and cancelling (null replicas) is
// NO_REASSIGNMENT_IN_PROGRESS. Unknown partitions are
// UNKNOWN_TOPIC_OR_PARTITION.
func init() {
	register(45, 0, 1, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
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
	})
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

// ListPartitionReassignments (key 46), version 0 (KIP-455).
//
// Behaviour: no reassignment is ever in progress, so the answer lists no
// topics, for named partitions and for all (null topics) alike, as Kafka
// does for partitions that are not being reassigned.
func init() {
	register(46, 0, 0, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.ListPartitionReassignmentsRequest)
		return now(r.ResponseKind())
	})
}
