package broker

import (
	"context"
	"fmt"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions (key 37), versions 0-3.
//
// Behaviour: raises a topic's partition count; a count not above the current
// one is INVALID_PARTITIONS; a manual assignment must name only this node.
// ValidateOnly checks without changing anything.
//
// Authorization (with an authorizer): ALTER on the topic, else
// TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) handleCreatePartitions(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		err := error(kerr.TopicAuthorizationFailed)
		if b.authorized(info, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic, rt.Topic) {
			err = b.createPartitions(rt, r.ValidateOnly)
		}
		st.ErrorCode = errCode(err)
		st.ErrorMessage = errMsg(err)
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}

func (b *Broker) createPartitions(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	t, ok := b.catalog.Get(rt.Topic)
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	if rt.Count <= t.Partitions {
		return fmt.Errorf("%w: topic has %d partitions; new count %d must be larger", kerr.InvalidPartitions, t.Partitions, rt.Count)
	}
	if rt.Count > 100000 {
		return fmt.Errorf("%w: count %d too large", kerr.InvalidPartitions, rt.Count)
	}
	if rt.Assignment != nil && int32(len(rt.Assignment)) != rt.Count-t.Partitions {
		return fmt.Errorf("%w: assignment has %d entries for %d new partitions", kerr.InvalidReplicaAssignment, len(rt.Assignment), rt.Count-t.Partitions)
	}
	for _, a := range rt.Assignment {
		for _, r := range a.Replicas {
			if r != b.cfg.NodeID {
				return fmt.Errorf("%w: broker %d does not exist", kerr.InvalidReplicaAssignment, r)
			}
		}
	}
	if validateOnly {
		return nil
	}
	t.Partitions = rt.Count
	if err := b.catalog.Update(t); err != nil {
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	if err := b.openTopic(t); err != nil {
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	return nil
}
