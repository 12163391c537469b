package broker

import (
	"context"
	"math"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/group"
	"github.com/kawa-broker/kawa/internal/wire"
)

// The classic consumer-group APIs are answered by the group coordinator
// (internal/group); these handlers only hand requests to it. Versions,
// behaviour and KIPs are documented on the coordinator's methods (checked
// against the table in apis.go by TestAPITable); TxnOffsetCommit, which the
// transaction coordinator verifies first, is in txn_offset_commit.go.

// Authorization (with an authorizer), as KafkaApis: OffsetCommit needs READ
// on the group (else every partition is GROUP_AUTHORIZATION_FAILED) and READ
// on each topic (else its partitions are TOPIC_AUTHORIZATION_FAILED, the
// others are committed); OffsetFetch DESCRIBE on the group (the group's
// error) and DESCRIBE on each topic (asked-for topics get
// TOPIC_AUTHORIZATION_FAILED, an all-topics fetch leaves them out);
// JoinGroup, SyncGroup, Heartbeat and LeaveGroup READ on the group;
// DescribeGroups and ConsumerGroupDescribe DESCRIBE on each group, checked
// before the coordinator describes anything (a refused group is
// GROUP_AUTHORIZATION_FAILED with no state, listed first, as Kafka does; the
// authorized operations they report are the principal's); ListGroups
// lists every group with DESCRIBE on the cluster, else only the groups the
// principal may DESCRIBE; DeleteGroups DELETE on each group; OffsetDelete
// DELETE on the group and READ on each topic; ConsumerGroupHeartbeat READ on
// the group and DESCRIBE on every subscribed topic (else
// TOPIC_AUTHORIZATION_FAILED).

func (b *Broker) handleOffsetCommit(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.OffsetCommitRequest)
	if b.authz == nil {
		return later(func() kmsg.Response { return b.groups.OffsetCommit(ctx, r) })
	}
	groupOK := b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, r.Group)
	var refused []kmsg.OffsetCommitResponseTopic
	allowed := r.Topics[:0:0]
	for _, t := range r.Topics {
		code := kerr.GroupAuthorizationFailed.Code
		if groupOK {
			// An unknown topic ID is left to the coordinator (UNKNOWN_TOPIC_ID).
			if name, known := b.topicNameOf(t.Topic, t.TopicID, r.Version >= 10); !known ||
				b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) {
				allowed = append(allowed, t)
				continue
			}
			code = kerr.TopicAuthorizationFailed.Code
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 {
		return later(func() kmsg.Response { return b.groups.OffsetCommit(ctx, r) })
	}
	r.Topics = allowed
	return later(func() kmsg.Response {
		var resp *kmsg.OffsetCommitResponse
		if groupOK && len(allowed) > 0 {
			resp = b.groups.OffsetCommit(ctx, r)
		} else {
			resp = r.ResponseKind().(*kmsg.OffsetCommitResponse)
		}
		resp.Topics = append(resp.Topics, refused...)
		return resp
	})
}

// topicNameOf is the name of a topic a request names by name or, when byID
// (the versions with topic IDs), by ID; known is false for an unknown ID.
func (b *Broker) topicNameOf(name string, id [16]byte, byID bool) (_ string, known bool) {
	if !byID {
		return name, true
	}
	if t, ok := b.catalog.ByID(id); ok {
		return t.Name, true
	}
	return name, false
}

func (b *Broker) handleOffsetFetch(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.OffsetFetchRequest)
	return later(func() kmsg.Response {
		resp := b.groups.OffsetFetch(ctx, r)
		if b.authz == nil {
			return resp
		}
		if r.Version < 8 {
			if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, r.Group) {
				resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
				if r.Version < 2 { // no top-level error before v2: each partition carries it
					for i := range resp.Topics {
						for j := range resp.Topics[i].Partitions {
							p := &resp.Topics[i].Partitions[j]
							p.Offset, p.Metadata, p.ErrorCode = -1, nil, kerr.GroupAuthorizationFailed.Code
						}
					}
				} else {
					resp.Topics = nil
				}
				return resp
			}
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Topic) {
					if r.Topics == nil {
						continue // all topics: leave it out
					}
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
					}
				}
				kept = append(kept, t)
			}
			resp.Topics = kept
			return resp
		}
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
				g.ErrorCode, g.Topics = kerr.GroupAuthorizationFailed.Code, nil
				continue
			}
			all := i < len(r.Groups) && r.Groups[i].Topics == nil
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if name, known := b.topicNameOf(t.Topic, t.TopicID, r.Version >= 10); known &&
					!b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
					if all {
						continue
					}
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
					}
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
		return resp
	})
}

// groupRead reports whether the request may act in group as a member (READ
// on the group).
func (b *Broker) groupRead(info wire.RequestInfo, group string) bool {
	return b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, group)
}

// asMember runs a member request (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup) when the principal may READ group; otherwise it answers
// refused, which carries GROUP_AUTHORIZATION_FAILED.
func (b *Broker) asMember(info wire.RequestInfo, group string, refused kmsg.Response, run func() kmsg.Response) reply {
	if !b.groupRead(info, group) {
		return later(func() kmsg.Response { return refused })
	}
	return later(run)
}

func (b *Broker) handleJoinGroup(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.JoinGroupRequest)
	refused := r.ResponseKind().(*kmsg.JoinGroupResponse)
	refused.ErrorCode, refused.Generation = kerr.GroupAuthorizationFailed.Code, -1
	cl := groupClient(info)
	return b.asMember(info, r.Group, refused, func() kmsg.Response { return b.groups.JoinGroup(ctx, cl, r) })
}

func (b *Broker) handleHeartbeat(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.HeartbeatRequest)
	refused := r.ResponseKind().(*kmsg.HeartbeatResponse)
	refused.ErrorCode = kerr.GroupAuthorizationFailed.Code
	return b.asMember(info, r.Group, refused, func() kmsg.Response { return b.groups.Heartbeat(ctx, r) })
}

func (b *Broker) handleLeaveGroup(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.LeaveGroupRequest)
	refused := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	refused.ErrorCode = kerr.GroupAuthorizationFailed.Code
	return b.asMember(info, r.Group, refused, func() kmsg.Response { return b.groups.LeaveGroup(ctx, r) })
}

func (b *Broker) handleSyncGroup(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.SyncGroupRequest)
	refused := r.ResponseKind().(*kmsg.SyncGroupResponse)
	refused.ErrorCode = kerr.GroupAuthorizationFailed.Code
	return b.asMember(info, r.Group, refused, func() kmsg.Response { return b.groups.SyncGroup(ctx, r) })
}

func (b *Broker) handleDescribeGroups(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeGroupsRequest)
	return later(func() kmsg.Response {
		resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		resp.Groups = describeAuthorized(b, info, r.Groups, r.IncludeAuthorizedOperations,
			func(name string) kmsg.DescribeGroupsResponseGroup {
				g := kmsg.NewDescribeGroupsResponseGroup() // Kafka's groupError: no state, no members
				g.Group, g.ErrorCode, g.AuthorizedOperations = name, kerr.GroupAuthorizationFailed.Code, math.MinInt32
				return g
			},
			func(allowed []string) []kmsg.DescribeGroupsResponseGroup {
				ar := *r
				ar.Groups = allowed
				return b.groups.DescribeGroups(ctx, &ar).Groups
			},
			func(g *kmsg.DescribeGroupsResponseGroup) (string, int16, *int32) {
				return g.Group, g.ErrorCode, &g.AuthorizedOperations
			})
		return resp
	})
}

// describeAuthorized answers a describe API (DescribeGroups,
// ConsumerGroupDescribe, ShareGroupDescribe) for names as Kafka's KafkaApis does: DESCRIBE on
// each group is checked before anything is described, so the coordinator
// never sees a refused group and nothing about it (whether it exists, its
// type, its load state) reaches the answer. The refused groups come first
// (refused builds their bare GROUP_AUTHORIZATION_FAILED entry), then what
// describe answers for the others; with includeOps a described group's
// authorized operations are the principal's. fields gives a group's name,
// error code and authorized operations.
func describeAuthorized[G any](b *Broker, info wire.RequestInfo, names []string, includeOps bool,
	refused func(name string) G, describe func(allowed []string) []G, fields func(*G) (string, int16, *int32)) []G {
	allowed, out := names, []G{}
	if b.authz != nil {
		allowed = nil
		for _, g := range names {
			if b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g) {
				allowed = append(allowed, g)
			} else {
				out = append(out, refused(g))
			}
		}
	}
	if len(allowed) == 0 && len(names) > 0 {
		return out
	}
	for _, g := range describe(allowed) {
		if name, code, ops := fields(&g); includeOps && code == 0 {
			*ops = b.groupOperations(info, name, *ops)
		}
		out = append(out, g)
	}
	return out
}

func (b *Broker) handleListGroups(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	return later(func() kmsg.Response {
		r := req.(*kmsg.ListGroupsRequest)
		resp := b.groups.ListGroups(ctx, r)
		b.listShareGroups(r, resp)
		if b.authorizedQuiet(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, acl.ClusterName) {
			return resp
		}
		kept := resp.Groups[:0]
		for _, g := range resp.Groups {
			if b.authorizedQuiet(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		resp.Groups = kept
		return resp
	})
}

func (b *Broker) handleDeleteGroups(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DeleteGroupsRequest)
	var refused []kmsg.DeleteGroupsResponseGroup
	if b.authz != nil {
		allowed := r.Groups[:0:0]
		for _, g := range r.Groups {
			if b.authorized(info, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, g) {
				allowed = append(allowed, g)
				continue
			}
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			refused = append(refused, rg)
		}
		r.Groups = allowed
	}
	return later(func() kmsg.Response {
		resp := b.groups.DeleteGroups(ctx, r)
		b.deleteShareGroups(ctx, resp)
		resp.Groups = append(resp.Groups, refused...)
		return resp
	})
}

func (b *Broker) handleOffsetDelete(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.OffsetDeleteRequest)
	if b.authz == nil {
		return later(func() kmsg.Response { return b.groups.OffsetDelete(ctx, r) })
	}
	if !b.authorized(info, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return later(func() kmsg.Response { return resp })
	}
	var refused []kmsg.OffsetDeleteResponseTopic
	allowed := r.Topics[:0:0]
	for _, t := range r.Topics {
		if b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	r.Topics = allowed
	return later(func() kmsg.Response {
		resp := b.groups.OffsetDelete(ctx, r)
		if resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, refused...)
		}
		return resp
	})
}

func (b *Broker) handleConsumerGroupHeartbeat(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ConsumerGroupHeartbeatRequest)
	if b.authz != nil {
		code := int16(0)
		if !b.groupRead(info, r.Group) {
			code = kerr.GroupAuthorizationFailed.Code
		} else {
			for _, t := range r.SubscribedTopicNames {
				if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t) {
					code = kerr.TopicAuthorizationFailed.Code
					break
				}
			}
		}
		if code != 0 {
			resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = code
			resp.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(code).Error())
			return later(func() kmsg.Response { return resp })
		}
	}
	cl := groupClient(info)
	return later(func() kmsg.Response { return b.groups.ConsumerGroupHeartbeat(ctx, cl, r) })
}

func (b *Broker) handleConsumerGroupDescribe(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ConsumerGroupDescribeRequest)
	return later(func() kmsg.Response {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		resp.Groups = describeAuthorized(b, info, r.Groups, r.IncludeAuthorizedOperations,
			func(name string) kmsg.ConsumerGroupDescribeResponseGroup {
				g := kmsg.NewConsumerGroupDescribeResponseGroup()
				g.Group, g.ErrorCode, g.AuthorizedOperations = name, kerr.GroupAuthorizationFailed.Code, math.MinInt32
				return g
			},
			func(allowed []string) []kmsg.ConsumerGroupDescribeResponseGroup {
				ar := *r
				ar.Groups = allowed
				return b.groups.ConsumerGroupDescribe(ctx, &ar).Groups
			},
			func(g *kmsg.ConsumerGroupDescribeResponseGroup) (string, int16, *int32) {
				return g.Group, g.ErrorCode, &g.AuthorizedOperations
			})
		return resp
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
