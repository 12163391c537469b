package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic consumer-group APIs are answered by the group coordinator
// (internal/group); this file only maps keys and versions to it. Behaviour
// and KIPs are documented on the coordinator's methods.
//
// Versions: OffsetCommit 2-10, OffsetFetch 1-10 (v10: topic IDs), JoinGroup
// 0-9, Heartbeat 0-4, LeaveGroup 0-5, SyncGroup 0-5, DescribeGroups 0-6, ListGroups 0-5,
// DeleteGroups 0-2, OffsetDelete 0, TxnOffsetCommit (txn.go).
func init() {
	register(8, 2, 10, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.OffsetCommit(ctx, req.(*kmsg.OffsetCommitRequest)) })
	})
	register(9, 1, 10, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.OffsetFetch(ctx, req.(*kmsg.OffsetFetchRequest)) })
	})
	register(11, 0, 9, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.JoinGroup(ctx, req.(*kmsg.JoinGroupRequest)) })
	})
	register(12, 0, 4, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.Heartbeat(ctx, req.(*kmsg.HeartbeatRequest)) })
	})
	register(13, 0, 5, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.LeaveGroup(ctx, req.(*kmsg.LeaveGroupRequest)) })
	})
	register(14, 0, 5, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.SyncGroup(ctx, req.(*kmsg.SyncGroupRequest)) })
	})
	register(15, 0, 6, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.DescribeGroups(ctx, req.(*kmsg.DescribeGroupsRequest)) })
	})
	register(16, 0, 5, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.ListGroups(ctx, req.(*kmsg.ListGroupsRequest)) })
	})
	register(42, 0, 2, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.DeleteGroups(ctx, req.(*kmsg.DeleteGroupsRequest)) })
	})
	register(47, 0, 0, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		return later(func() kmsg.Response { return b.groups.OffsetDelete(ctx, req.(*kmsg.OffsetDeleteRequest)) })
	})
}

// later runs fn on the connection's writer goroutine, after the replies of
// earlier requests, so group operations keep the connection's order.
func later(fn func() kmsg.Response) reply {
	return func() (kmsg.Response, error) { return fn(), nil }
}

// FindCoordinator (key 10), versions 0-4.
//
// Behaviour: this node coordinates every group (key type 0) and every
// transactional.id (key type 1). v4+ answers a batch of keys (KIP-699).
// Other key types are INVALID_REQUEST.
func init() {
	register(10, 0, 4, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.FindCoordinatorRequest)
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		answer := func(keyType int8) (node int32, host string, port int32, code int16) {
			if code := b.coordinatorAvailable(keyType); code != 0 {
				return -1, "", -1, code
			}
			return b.cfg.NodeID, b.host, b.port, 0
		}
		if r.Version >= 4 {
			for _, key := range r.CoordinatorKeys {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key = key
				c.NodeID, c.Host, c.Port, c.ErrorCode = answer(r.CoordinatorType)
				resp.Coordinators = append(resp.Coordinators, c)
			}
			return now(resp)
		}
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = answer(r.CoordinatorType)
		return now(resp)
	})
}
