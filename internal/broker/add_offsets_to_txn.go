package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/txn"
	"github.com/kawa-broker/kawa/internal/wire"
)

// AddOffsetsToTxn (key 25), versions 0-4.
//
// Behaviour: adds a consumer group to the producer's transaction (opening
// it) once that is durable (txn.Coordinator.AddOffsets); the producer may
// then stage the group's offsets with TxnOffsetCommit, and EndTxn commits or
// drops them together with the transaction's records (KIP-98). Errors:
// INVALID_GROUP_ID, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
// CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE.
//
// Version notes: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2
// (KIP-588). v3 is flexible. v4 (KIP-890) only signals that the client
// understands TRANSACTION_ABORTABLE.
//
// Authorization (with an authorizer): WRITE on the transactional ID
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
// (GROUP_AUTHORIZATION_FAILED).
func (b *Broker) handleAddOffsetsToTxn(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	return func() (kmsg.Response, error) {
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		if code := b.txnGroupAuthorized(info, r.TransactionalID, r.Group); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
		err := b.txn.AddOffsets(ctx, r.TransactionalID, txn.ProducerIDEpoch{ProducerID: r.ProducerID, Epoch: r.ProducerEpoch}, r.Group)
		resp.ErrorCode = txnCode(err, r.Version, 2)
		return resp, nil
	}
}
