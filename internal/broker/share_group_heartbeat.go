package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/wire"
)

// ShareGroupHeartbeat (key 76), versions 1-1 (KIP-932; v0 was the early
// access version and is not advertised).
//
// Behaviour: member epoch 0 joins (or rejoins) with the member ID the
// client generated (KIP-1082), -1 leaves and releases the member's acquired
// records, anything else heartbeats. The assignment is every partition of
// every subscribed topic (see internal/share) and is sent on every
// heartbeat, so a client always holds the current one. Errors, as Kafka's
// GroupMetadataManager: INVALID_REQUEST (group or member ID empty or blank,
// member epoch below -1, a join without subscription), GROUP_ID_NOT_FOUND
// (a leave or heartbeat naming no share group), UNKNOWN_MEMBER_ID (a
// leave or heartbeat of a member not in the group), FENCED_MEMBER_EPOCH.
//
// Authorization (with an authorizer): READ on the group
// (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic
// (TOPIC_AUTHORIZATION_FAILED).
func (b *Broker) handleShareGroupHeartbeat(_ context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ShareGroupHeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if !b.groupRead(info, r.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp)
	}
	for _, t := range r.SubscribedTopicNames {
		if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t) {
			resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return now(resp)
		}
	}
	a, err := b.shares.Heartbeat(r.GroupID, r.MemberID, r.MemberEpoch, r.SubscribedTopicNames, b.shareTopics())
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMsg(err)
		return func() (kmsg.Response, error) { return resp, nil }
	}
	if a.MemberEpoch >= 0 {
		cl := groupClient(info) // the classic groups' form: Kafka's "/host"
		b.shares.SetMemberClient(r.GroupID, a.MemberID, cl.ID, cl.Host)
	}
	resp.MemberID = kmsg.StringPtr(a.MemberID)
	resp.MemberEpoch = a.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(share.DefaultHeartbeatInterval.Milliseconds())
	if a.MemberEpoch >= 0 {
		resp.Assignment = &kmsg.ShareGroupHeartbeatResponseAssignment{}
		resp.Assignment.TopicPartitions = b.shareAssignment(a.Partitions)
	}
	return func() (kmsg.Response, error) { return resp, nil }
}

// shareAssignment turns topic -> partitions into the wire's topic-ID form,
// sorted by topic name so answers are stable.
func (b *Broker) shareAssignment(parts map[string][]int32) []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition {
	names := make([]string, 0, len(parts))
	for t := range parts {
		names = append(names, t)
	}
	sort.Strings(names)
	out := []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
	for _, name := range names {
		t, ok := b.catalog.Get(name)
		if !ok {
			continue
		}
		out = append(out, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: t.ID, Partitions: parts[name]})
	}
	return out
}
