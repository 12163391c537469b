package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/txn"
	"github.com/kawa-broker/kawa/internal/wire"
)

// EndTxn (key 26), versions 0-5.
//
// Behaviour: commits or aborts the producer's transaction
// (txn.Coordinator.EndTxn): the decision is durable in __transaction_state
// before the answer; the COMMIT/ABORT markers are then written to every
// partition of the transaction and its groups' staged offsets are committed
// or dropped. Until that completes, the next transaction's requests wait
// briefly or get CONCURRENT_TRANSACTIONS. A retry of an end that completed
// is answered with success. Errors: INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED, INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS,
// COORDINATOR_NOT_AVAILABLE.
//
// Version notes: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2
// (KIP-588). v3 is flexible. v5 is transaction version 2 (KIP-890 part 2):
// the epoch is bumped at every EndTxn and the response carries the producer
// ID and epoch to use next (a new producer ID with epoch 0 when the epoch is
// exhausted); aborting with no transaction open is allowed. Older versions
// keep the epoch and answer ID and epoch -1.
//
// Authorization (with an authorizer): WRITE on the transactional ID, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func (b *Broker) handleEndTxn(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.EndTxnRequest)
	return func() (kmsg.Response, error) {
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		if !b.authorized(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, r.TransactionalID) {
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.TransactionalIDAuthorizationFailed.Code, -1, -1
			return resp, nil
		}
		pe, err := b.txn.EndTxn(ctx, r.TransactionalID, txn.ProducerIDEpoch{ProducerID: r.ProducerID, Epoch: r.ProducerEpoch}, r.Commit, r.Version >= 5)
		resp.ErrorCode = txnCode(err, r.Version, 2)
		resp.ProducerID, resp.ProducerEpoch = pe.ProducerID, pe.Epoch
		return resp, nil
	}
}
