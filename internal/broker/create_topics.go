package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/wire"
)

// CreateTopics (key 19), versions 2-7.
//
// Behaviour: NumPartitions -1 and ReplicationFactor -1 take broker defaults
// (KIP-464). Replication factor above 1 is INVALID_REPLICATION_FACTOR (one
// node). A manual ReplicaAssignment is accepted only if every replica is this
// node. Configs are validated against the topic-config registry
// (internal/config: every Kafka 4.x topic config with its type, range and
// cross-config rules; INVALID_CONFIG naming the config and the problem). ValidateOnly checks without creating. v5+ returns the
// resulting configs, partition count and replication factor (KIP-525); v7+
// the topic ID (KIP-516). Duplicate names in one request: INVALID_REQUEST.
// With an authorizer, CREATE on the cluster or on the topic is needed, else
// TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) handleCreateTopics(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		var err error
		if b.authorizedQuiet(info, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, acl.ClusterName) ||
			b.authorized(info, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, rt.Topic) {
			err = b.createOne(rt, r.ValidateOnly, seen[rt.Topic] > 1, &st)
		} else {
			err = kerr.TopicAuthorizationFailed
		}
		st.ErrorCode = errCode(err)
		if err != nil && r.Version >= 1 {
			st.ErrorMessage = errMsg(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}

func (b *Broker) createOne(rt kmsg.CreateTopicsRequestTopic, validateOnly, dup bool, st *kmsg.CreateTopicsResponseTopic) error {
	if dup {
		return fmt.Errorf("%w: topic %q appears more than once in the request", kerr.InvalidRequest, rt.Topic)
	}
	partitions := rt.NumPartitions
	if len(rt.ReplicaAssignment) > 0 {
		if partitions != -1 || rt.ReplicationFactor != -1 {
			return fmt.Errorf("%w: both replica assignment and partition count/replication factor given", kerr.InvalidRequest)
		}
		for _, ra := range rt.ReplicaAssignment {
			for _, r := range ra.Replicas {
				if r != b.cfg.NodeID {
					return fmt.Errorf("%w: broker %d does not exist", kerr.InvalidReplicaAssignment, r)
				}
			}
		}
		partitions = int32(len(rt.ReplicaAssignment))
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		if c.Value == nil {
			continue
		}
		configs[c.Name] = *c.Value
	}
	if len(configs) == 0 {
		configs = nil
	}
	t, err := b.newTopic(rt.Topic, partitions, rt.ReplicationFactor, configs)
	if err != nil {
		return err
	}
	if !validateOnly {
		if t, err = b.createTopic(t); err != nil {
			return err
		}
	}
	st.TopicID = t.ID
	st.NumPartitions = t.Partitions
	st.ReplicationFactor = 1
	tc := b.topicConfig(t)
	for _, d := range config.Defs {
		if _, set := t.Configs[d.Name]; d.Internal && !set {
			continue
		}
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = d.Name
		v := d.Get(tc)
		c.Value = &v
		c.Source = int8(b.topicConfigSynonyms(d, t, tc)[0].source)
		st.Configs = append(st.Configs, c)
	}
	return nil
}
