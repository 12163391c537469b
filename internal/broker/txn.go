package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initTransactional answers InitProducerId with a transactional.id. The
// transaction coordinator is not built yet (issue 5), so the request is
// refused with a clear error rather than a producer ID that could not
// transact.
func (b *Broker) initTransactional(ctx context.Context, r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) reply {
	resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	return now(resp)
}

// coordinatorAvailable answers FindCoordinator's availability per key type:
// groups (0) are served; transactions (1) wait for the transaction
// coordinator (COORDINATOR_NOT_AVAILABLE); other types are INVALID_REQUEST.
func (b *Broker) coordinatorAvailable(keyType int8) int16 {
	switch keyType {
	case 0:
		return 0
	case 1:
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.InvalidRequest.Code
}
