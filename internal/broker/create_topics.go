package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
)

// CreateTopics (key 19), versions 2-7.
//
// Behaviour: NumPartitions -1 and ReplicationFactor -1 take broker defaults
// (KIP-464). Replication factor above 1 is INVALID_REPLICATION_FACTOR (one
// node). A manual ReplicaAssignment is accepted only if every replica is this
// node. Configs are validated against the topic-config registry
// (INVALID_CONFIG). ValidateOnly checks without creating. v5+ returns the
// resulting configs, partition count and replication factor (KIP-525); v7+
// the topic ID (KIP-516). Duplicate names in one request: INVALID_REQUEST.
func init() {
	register(19, 2, 7, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
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
			err := b.createOne(rt, r.ValidateOnly, seen[rt.Topic] > 1, &st)
			st.ErrorCode = errCode(err)
			if err != nil && r.Version >= 1 {
				st.ErrorMessage = errMsg(err)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return now(resp)
	})
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
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = d.Name
		v := d.Get(tc)
		c.Value = &v
		c.Source = int8(sourceDefault)
		if _, ok := t.Configs[d.Name]; ok {
			c.Source = int8(sourceDynamicTopic)
		}
		st.Configs = append(st.Configs, c)
	}
	return nil
}

// DeleteTopics (key 20), versions 1-6.
//
// Behaviour: deletes by name, or by topic ID from v6 (KIP-516). Unknown
// topics get UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by ID). Internal
// topics cannot be deleted. Deletion removes the catalog entry durably, then
// the partition directories.
func init() {
	register(20, 1, 6, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.DeleteTopicsRequest)
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		names := r.TopicNames
		type target struct {
			name *string
			id   [16]byte
		}
		var targets []target
		if r.Version >= 6 {
			for _, t := range r.Topics {
				targets = append(targets, target{name: t.Topic, id: t.TopicID})
			}
		} else {
			for i := range names {
				targets = append(targets, target{name: &names[i]})
			}
		}
		for _, tg := range targets {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.TopicID = tg.id
			var err error
			if tg.name == nil || *tg.name == "" {
				t, ok := b.catalog.ByID(tg.id)
				if !ok {
					err = kerr.UnknownTopicID
				} else {
					name := t.Name
					st.Topic = &name
					err = b.deleteTopic(name)
				}
			} else {
				st.Topic = tg.name
				if t, ok := b.catalog.Get(*tg.name); ok {
					st.TopicID = t.ID
				}
				err = b.deleteTopic(*tg.name)
			}
			st.ErrorCode = errCode(err)
			if r.Version >= 5 && err != nil {
				st.ErrorMessage = errMsg(err)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return now(resp)
	})
}

// CreatePartitions (key 37), versions 0-3.
//
// Behaviour: raises a topic's partition count; a count not above the current
// one is INVALID_PARTITIONS; a manual assignment must name only this node.
// ValidateOnly checks without changing anything.
func init() {
	register(37, 0, 3, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.CreatePartitionsRequest)
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic = rt.Topic
			err := b.createPartitions(rt, r.ValidateOnly)
			st.ErrorCode = errCode(err)
			st.ErrorMessage = errMsg(err)
			resp.Topics = append(resp.Topics, st)
		}
		return now(resp)
	})
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
