package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/wire"
)

// FindCoordinator (key 10), versions 0-4.
//
// Behaviour: this node coordinates every group (key type 0) and every
// transactional.id (key type 1). v4+ answers a batch of keys (KIP-699).
// Other key types are INVALID_REQUEST.
//
// Authorization (with an authorizer), before anything else is looked at
// (Redpanda PR #5370 answered first): DESCRIBE on the group
// (GROUP_AUTHORIZATION_FAILED) or on the transactional ID
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) named by the key.
func (b *Broker) handleFindCoordinator(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(keyType int8, key string) (node int32, host string, port int32, code int16) {
		switch {
		case keyType == 0 && !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key):
			return -1, "", -1, kerr.GroupAuthorizationFailed.Code
		case keyType == 1 && !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key):
			return -1, "", -1, kerr.TransactionalIDAuthorizationFailed.Code
		}
		if code := b.coordinatorAvailable(keyType); code != 0 {
			return -1, "", -1, code
		}
		host, port = b.advertised(info)
		return b.cfg.NodeID, host, port, 0
	}
	if r.Version >= 4 {
		for _, key := range r.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Host, c.Port, c.ErrorCode = answer(r.CoordinatorType, key)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return now(resp)
	}
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = answer(r.CoordinatorType, r.CoordinatorKey)
	return now(resp)
}
