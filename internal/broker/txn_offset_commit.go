package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/txn"
	"github.com/kawa-broker/kawa/internal/wire"
)

// TxnOffsetCommit (key 28), versions 0-5.
//
// Behaviour: the transaction coordinator first verifies that the producer
// holds the current epoch of its transactional.id and added the group to its
// Ongoing transaction (AddOffsetsToTxn; KIP-890 part 1), and pins the
// transaction so its end cannot overtake the staged offsets (BL-15); then the
// group coordinator stages the offsets, with the KIP-447 generation and
// member checks from v3 (group.Coordinator.TxnOffsetCommit). Verification
// errors, for every partition: INVALID_PRODUCER_EPOCH (fenced),
// INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE (v5+; INVALID_TXN_STATE
// before) when the group was not added, COORDINATOR_LOAD_IN_PROGRESS while
// the transaction is ending or the coordinator is busy (clients retry).
//
// Version notes: v5 is transaction version 2 (KIP-890 part 2): the broker
// first adds the group to the transaction itself (as AddOffsetsToTxn would),
// so clients skip AddOffsetsToTxn; v0-v4 require it. v6 (topic IDs) is not advertised.
//
// Authorization (with an authorizer; KafkaApis.handleTxnOffsetCommitRequest):
// WRITE on the transactional ID (else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else
// GROUP_AUTHORIZATION_FAILED), READ on each topic (else its partitions are
// TOPIC_AUTHORIZATION_FAILED and the others are staged).
func (b *Broker) handleTxnOffsetCommit(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	if code := b.txnGroupAuthorized(info, r.TransactionalID, r.Group); code != 0 {
		return later(func() kmsg.Response { return txnOffsetCommitError(r, code) })
	}
	var refused *kmsg.TxnOffsetCommitResponse
	if b.authz != nil {
		denied := *r
		denied.Topics = nil
		allowed := r.Topics[:0:0]
		for _, t := range r.Topics {
			if b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
				allowed = append(allowed, t)
			} else {
				denied.Topics = append(denied.Topics, t)
			}
		}
		if len(denied.Topics) > 0 {
			refused = txnOffsetCommitError(&denied, kerr.TopicAuthorizationFailed.Code)
			r.Topics = allowed
		}
	}
	return later(func() kmsg.Response {
		resp := b.txnOffsetCommit(ctx, r)
		if refused != nil {
			resp.Topics = append(resp.Topics, refused.Topics...)
		}
		return resp
	})
}

// txnGroupAuthorized checks WRITE on a transactional ID and READ on a group
// and returns the code of the first refusal, 0 when both are allowed.
func (b *Broker) txnGroupAuthorized(info wire.RequestInfo, txnID, group string) int16 {
	switch {
	case !b.authorized(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, txnID):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, group):
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}

func (b *Broker) txnOffsetCommit(ctx context.Context, r *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	pe := txn.ProducerIDEpoch{ProducerID: r.ProducerID, Epoch: r.ProducerEpoch}
	if r.Version >= 5 {
		if err := b.txn.AddOffsets(ctx, r.TransactionalID, pe, r.Group); err != nil {
			return txnOffsetCommitError(r, txnOffsetCommitCode(err, r.Version))
		}
	}
	release, err := b.txn.PinGroup(r.TransactionalID, pe, r.Group)
	if err != nil {
		return txnOffsetCommitError(r, txnOffsetCommitCode(err, r.Version))
	}
	defer release()
	return b.groups.TxnOffsetCommit(ctx, r)
}

func txnOffsetCommitCode(err error, version int16) int16 {
	switch {
	case errors.Is(err, kerr.ProducerFenced):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, kerr.TransactionAbortable) && version < 5:
		return kerr.InvalidTxnState.Code
	case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.CoordinatorNotAvailable):
		return kerr.CoordinatorLoadInProgress.Code
	}
	return errCode(err)
}

// txnOffsetCommitError answers every partition of r with code.
func txnOffsetCommitError(r *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
