package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/meta"
	"github.com/kawa-broker/kawa/internal/wire"
)

// Metadata (key 3), versions 0-12.
//
// Behaviour: one broker (this node) leads every partition with epoch 0;
// replicas and ISR are this node. A null topic list (v1+), or an empty one at
// v0, means all topics. Unknown topics are created with broker defaults when
// auto.create.topics.enable is on and the request allows it
// (AllowAutoTopicCreation, v4+; always at v0-v3); otherwise they get
// UNKNOWN_TOPIC_OR_PARTITION. Topics may be named by topic ID (v10+, KIP-516).
// Authorized-operations fields (KIP-430) are left at "not requested".
//
// Authorization (with an authorizer; KafkaApis.handleTopicMetadataRequest):
// a request for all topics lists only those the principal may DESCRIBE; a
// named topic (or topic ID) without DESCRIBE is TOPIC_AUTHORIZATION_FAILED
// whether it exists or not, so names do not leak; auto-creating needs
// CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) handleMetadata(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	host, port := b.advertised(info)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: host, Port: port}}
	resp.ClusterID = &b.clusterID
	resp.ControllerID = b.cfg.NodeID
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		for _, t := range b.catalog.List() {
			if b.authorizedQuiet(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
				resp.Topics = append(resp.Topics, b.topicMetadata(t))
			}
		}
		return now(resp)
	}
	autoCreate := b.cfg.AutoCreateTopics && (r.Version < 4 || r.AllowAutoTopicCreation)
	for _, rt := range r.Topics {
		resp.Topics = append(resp.Topics, b.lookupTopicMetadata(info, rt, autoCreate))
	}
	return now(resp)
}

func (b *Broker) lookupTopicMetadata(info wire.RequestInfo, rt kmsg.MetadataRequestTopic, autoCreate bool) kmsg.MetadataResponseTopic {
	refused := func() kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		return mt
	}
	if rt.Topic == nil {
		t, ok := b.catalog.ByID(rt.TopicID)
		if ok && !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
			return refused()
		}
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicID.Code
			return mt
		}
		return b.topicMetadata(t)
	}
	name := *rt.Topic
	if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
		return refused()
	}
	t, ok := b.catalog.Get(name)
	if !ok {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = rt.Topic
		if err := validTopicName(name); err != nil {
			mt.ErrorCode = kerr.InvalidTopicException.Code
			return mt
		}
		if !autoCreate {
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			return mt
		}
		if !b.authorizedQuiet(info, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, acl.ClusterName) &&
			!b.authorized(info, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, name) {
			return refused()
		}
		var err error
		if t, err = b.ensureTopic(name, -1); err != nil {
			mt.ErrorCode = errCode(err)
			return mt
		}
	}
	return b.topicMetadata(t)
}

func (b *Broker) topicMetadata(t meta.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	parts := b.partitions(t.Name)
	for i := range t.Partitions {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = i
		p.Leader = b.cfg.NodeID
		switch {
		case int(i) >= len(parts):
			// NB: the catalog entry is written before the partitions open
			// (CreateTopics, CreatePartitions), so a concurrent Metadata
			// can see the topic first. Listing it with no partitions made
			// kafka-go's Writer divide by zero; Kafka answers a partition
			// without a leader yet like this.
			p.ErrorCode = kerr.LeaderNotAvailable.Code
			p.Leader = -1
		case parts[i] == nil, parts[i].Err() != nil:
			// Not opened (corrupt on disk) or offline after a sticky
			// write/fsync error: Kafka lists a partition of an offline log
			// dir like this.
			p.ErrorCode = kerr.KafkaStorageError.Code
			p.OfflineReplicas = []int32{b.cfg.NodeID}
		}
		p.LeaderEpoch = 0
		p.Replicas = []int32{b.cfg.NodeID}
		p.ISR = []int32{b.cfg.NodeID}
		mt.Partitions = append(mt.Partitions, p)
	}
	return mt
}
