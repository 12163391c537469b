package broker

import (
	"context"
	"strings"

	"github.com/kawa-broker/kawa/internal/group"
	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic consumer-group APIs are answered by the group coordinator
// (internal/group); these handlers only hand requests to it. Versions,
// behaviour and KIPs are documented on the coordinator's methods (checked
// against the table in apis.go by TestAPITable); TxnOffsetCommit, which the
// transaction coordinator verifies first, is in txn_offset_commit.go.

func (b *Broker) handleOffsetCommit(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response { return b.groups.OffsetCommit(ctx, req.(*kmsg.OffsetCommitRequest)) })
}

func (b *Broker) handleOffsetFetch(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response { return b.groups.OffsetFetch(ctx, req.(*kmsg.OffsetFetchRequest)) })
}

func (b *Broker) handleJoinGroup(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	cl := groupClient(info)
	return later(func() kmsg.Response { return b.groups.JoinGroup(ctx, cl, req.(*kmsg.JoinGroupRequest)) })
}

func (b *Broker) handleHeartbeat(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response { return b.groups.Heartbeat(ctx, req.(*kmsg.HeartbeatRequest)) })
}

func (b *Broker) handleLeaveGroup(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response { return b.groups.LeaveGroup(ctx, req.(*kmsg.LeaveGroupRequest)) })
}

func (b *Broker) handleSyncGroup(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response { return b.groups.SyncGroup(ctx, req.(*kmsg.SyncGroupRequest)) })
}

func (b *Broker) handleDescribeGroups(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response { return b.groups.DescribeGroups(ctx, req.(*kmsg.DescribeGroupsRequest)) })
}

func (b *Broker) handleListGroups(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response {
		r := req.(*kmsg.ListGroupsRequest)
		resp := b.groups.ListGroups(ctx, r)
		b.listShareGroups(r, resp)
		return resp
	})
}

func (b *Broker) handleDeleteGroups(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response {
		resp := b.groups.DeleteGroups(ctx, req.(*kmsg.DeleteGroupsRequest))
		b.deleteShareGroups(resp)
		return resp
	})
}

func (b *Broker) handleOffsetDelete(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response { return b.groups.OffsetDelete(ctx, req.(*kmsg.OffsetDeleteRequest)) })
}

func (b *Broker) handleConsumerGroupHeartbeat(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	cl := groupClient(info)
	return later(func() kmsg.Response {
		return b.groups.ConsumerGroupHeartbeat(ctx, cl, req.(*kmsg.ConsumerGroupHeartbeatRequest))
	})
}

func (b *Broker) handleConsumerGroupDescribe(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response {
		return b.groups.ConsumerGroupDescribe(ctx, req.(*kmsg.ConsumerGroupDescribeRequest))
	})
}

// later runs fn on the connection's writer goroutine, after the replies of
// earlier requests, so group operations keep the connection's order.
func later(fn func() kmsg.Response) reply {
	return func() (kmsg.Response, error) { return fn(), nil }
}

// groupClient is the JoinGroup sender as Kafka's coordinator records it: the
// client.id and "/" followed by the connection's remote IP (no port).
func groupClient(info wire.RequestInfo) group.Client {
	host := info.ClientAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return group.Client{ID: info.ClientID, Host: "/" + host}
}
