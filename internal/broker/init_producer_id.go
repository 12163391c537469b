package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId (key 22), versions 0-4, idempotent producers only.
//
// Behaviour: without a transactional.id, allocates a new cluster-unique
// producer ID (from blocks persisted before use, never reused after a
// restart) with epoch 0. KIP-360 (v3+): a client that presents its current
// producer ID and epoch keeps its producer ID and gets the epoch bumped, so
// it can reset sequences after UNKNOWN_PRODUCER_ID or
// OUT_OF_ORDER_SEQUENCE_NUMBER; at epoch 32767 it gets a new producer ID
// instead (the epoch never wraps). A producer ID this broker never issued is
// INVALID_PRODUCER_ID_MAPPING.
//
// With a transactional.id the transaction coordinator answers (txn.go).
//
// Authorization (with an authorizer; KafkaApis.handleInitProducerIdRequest):
// a transactional producer needs WRITE on its transactional ID, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an idempotent one IDEMPOTENT_WRITE
// on the cluster or WRITE on at least one topic (authorizeByResourceType,
// where a matching DENY dominates an ALLOW), else
// CLUSTER_AUTHORIZATION_FAILED.
func (b *Broker) handleInitProducerID(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if b.authz != nil {
		switch {
		case r.TransactionalID != nil:
			if !b.authorized(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *r.TransactionalID) {
				resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				return now(resp)
			}
		case !b.authorizedQuiet(info, kmsg.ACLOperationIdempotentWrite, kmsg.ACLResourceTypeCluster, acl.ClusterName) &&
			!b.authorizedAnyOf(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic):
			b.denied(info, kmsg.ACLOperationIdempotentWrite, kmsg.ACLResourceTypeCluster, acl.ClusterName)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return now(resp)
		}
	}
	if r.TransactionalID != nil {
		return b.initTransactional(ctx, r, resp)
	}
	if r.ProducerID >= 0 && r.ProducerEpoch >= 0 {
		if !b.pids.Issued(r.ProducerID) {
			resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
			return now(resp)
		}
		if r.ProducerEpoch < 32767 {
			resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch+1
			return now(resp)
		}
	}
	id, err := b.pids.Next()
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		b.lg.Error("producer ID allocation failed", "err", err)
		return now(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return now(resp)
}
