package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/wire"
)

// AlterShareGroupOffsets (key 91), versions 0-0 (KIP-932).
//
// Behaviour: each partition's share-partition start offset is set to
// start_offset and its in-flight state dropped (internal/share's
// SetStartOffset), creating the share group if needed. Errors:
// INVALID_REQUEST (no group ID) for the whole request; per partition
// UNKNOWN_TOPIC_OR_PARTITION, NON_EMPTY_GROUP (the group has members),
// INVALID_REQUEST (negative offset). With an authorizer, READ on the group
// is needed, else GROUP_AUTHORIZATION_FAILED, and READ on each topic, else
// TOPIC_AUTHORIZATION_FAILED for its partitions (Kafka's KafkaApis).
func (b *Broker) handleAlterShareGroupOffsets(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if r.GroupID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return now(resp)
	}
	if !b.groupRead(info, r.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp)
	}
	for _, rt := range r.Topics {
		t, known := b.catalog.Get(rt.Topic)
		st := kmsg.AlterShareGroupOffsetsResponseTopic{Topic: rt.Topic, TopicID: t.ID}
		deniedTopic := !b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			if deniedTopic {
				err = kerr.TopicAuthorizationFailed
			} else if !known || rp.Partition < 0 || rp.Partition >= t.Partitions {
				err = kerr.UnknownTopicOrPartition
			} else {
				err = b.shares.SetStartOffset(ctx, r.GroupID, share.TP{Topic: rt.Topic, Partition: rp.Partition}, rp.StartOffset)
			}
			sp.ErrorCode, sp.ErrorMessage = errCode(err), errMsg(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}
