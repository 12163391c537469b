package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/wire"
)

// DeleteShareGroupOffsets (key 92), versions 0-0 (KIP-932).
//
// Behaviour: the share state of every partition of each named topic is
// forgotten (internal/share's DeleteTopicState), so consumption restarts
// at share.auto.offset.reset. Errors for the whole request:
// INVALID_REQUEST (no group ID), GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (the
// group has members); per topic UNKNOWN_TOPIC_OR_PARTITION. With an
// authorizer, DELETE on the group is needed, else GROUP_AUTHORIZATION_FAILED,
// and READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it (Kafka's
// KafkaApis).
func (b *Broker) handleDeleteShareGroupOffsets(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if r.GroupID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return now(resp)
	}
	if !b.authorized(info, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, r.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp)
	}
	if !b.shares.Has(r.GroupID) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return now(resp)
	}
	for _, rt := range r.Topics {
		t, known := b.catalog.Get(rt.Topic)
		st := kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: rt.Topic, TopicID: t.ID}
		if !b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
		} else if !known {
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else if err := b.shares.DeleteTopicState(ctx, r.GroupID, rt.Topic); err != nil {
			if err == kerr.NonEmptyGroup || err == kerr.GroupIDNotFound {
				resp.ErrorCode, resp.ErrorMessage = errCode(err), errMsg(err)
				resp.Topics = nil
				return now(resp)
			}
			st.ErrorCode, st.ErrorMessage = errCode(err), errMsg(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}
