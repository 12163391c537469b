package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/wire"
)

// ShareAcknowledge (key 79), versions 1-2 (KIP-932; v2 adds KIP-1222's
// renew acknowledgements and acquisition_lock_timeout_ms).
//
// Behaviour: each acknowledgement batch is applied to records the member
// holds (ACCEPT: acknowledged, never redelivered; RELEASE: available again,
// or archived at share.delivery.count.limit; REJECT and gaps: archived;
// RENEW: the lock restarts) and the share-partition state is persisted
// before the answer. The share-session epoch is checked first (Kafka's
// acknowledgeSessionUpdate): it must be the open session's current one
// (which then moves on, as after a ShareFetch) or -1, which closes the
// session after the acknowledgements, releasing every record the member
// still holds. Errors for the whole request, which then changes nothing:
// INVALID_REQUEST (no group or member), UNKNOWN_MEMBER_ID,
// INVALID_SHARE_SESSION_EPOCH (epoch 0, or not the session's),
// SHARE_SESSION_NOT_FOUND; per partition
// INVALID_RECORD_STATE (an offset not acquired by this member: lock expired,
// already acknowledged or archived, below the share-partition start offset
// or never delivered), INVALID_REQUEST (a batch with Last < First,
// a type count that fits neither 1 nor the range, or a type other than 0-4;
// such a batch changes nothing), UNKNOWN_TOPIC_ID.
//
// Authorization (with an authorizer): READ on the group (else
// GROUP_AUTHORIZATION_FAILED) and READ on each topic (else its partitions
// are TOPIC_AUTHORIZATION_FAILED and not acknowledged).
func (b *Broker) handleShareAcknowledge(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ShareAcknowledgeRequest)
	return func() (kmsg.Response, error) { return b.shareAcknowledge(ctx, info, r), nil }
}

// shareAcknowledge answers r once its acknowledgements are durable.
func (b *Broker) shareAcknowledge(ctx context.Context, info wire.RequestInfo, r *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if r.GroupID == nil || *r.GroupID == "" || r.MemberID == nil || *r.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	groupID, memberID := *r.GroupID, *r.MemberID
	if !b.groupRead(info, groupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	resp.AcquisitionLockTimeoutMillis = int32(b.shares.LockDuration(groupID).Milliseconds())
	if err := b.shares.AckSession(groupID, memberID, r.ShareSessionEpoch); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMsg(err)
		return resp
	}
	for _, rt := range r.Topics {
		st := kmsg.ShareAcknowledgeResponseTopic{TopicID: rt.TopicID}
		t, known := b.catalog.ByID(rt.TopicID)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = b.cfg.NodeID, 0
			if !known {
				sp.ErrorCode = kerr.UnknownTopicID.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Name) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			acks := make([]share.Ack, 0, len(rp.AcknowledgementBatches))
			for _, ab := range rp.AcknowledgementBatches {
				acks = append(acks, share.Ack{First: ab.FirstOffset, Last: ab.LastOffset, Types: ab.AcknowledgeTypes})
			}
			if err := b.shares.Acknowledge(ctx, groupID, memberID, share.TP{Topic: t.Name, Partition: rp.Partition}, acks); err != nil {
				sp.ErrorCode, sp.ErrorMessage = errCode(err), errMsg(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if r.ShareSessionEpoch == share.SessionClose {
		if err := b.shares.CloseSession(ctx, groupID, memberID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = errCode(err), errMsg(err)
		}
	}
	return resp
}
