package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/wire"
)

// ShareGroupDescribe (key 77), versions 1-1 (KIP-932).
//
// Behaviour: per group its state (Empty or Stable: assignment is immediate,
// so a share group is never reconciling), group epoch (also the assignment
// epoch), assignor "simple" and members with their subscriptions and
// assignments; client_id and client_host are those of the member's last
// heartbeat.
// Errors per group: GROUP_ID_NOT_FOUND for a group that is not a share
// group.
//
// Authorization (with an authorizer): DESCRIBE on each group, checked before
// the group is looked at, else a bare GROUP_AUTHORIZATION_FAILED entry,
// listed first (describeAuthorized, as Kafka's KafkaApis). Authorized
// operations, when asked for, are the principal's (KIP-430); without an
// authorizer they are not computed (INT32_MIN).
func (b *Broker) handleShareGroupDescribe(_ context.Context, reqInfo wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ShareGroupDescribeRequest)
	resp := r.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	resp.Groups = describeAuthorized(b, reqInfo, r.GroupIDs, r.IncludeAuthorizedOperations,
		func(id string) kmsg.ShareGroupDescribeResponseGroup {
			sg := kmsg.NewShareGroupDescribeResponseGroup()
			sg.GroupID, sg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			return sg
		},
		func(allowed []string) []kmsg.ShareGroupDescribeResponseGroup {
			out := make([]kmsg.ShareGroupDescribeResponseGroup, 0, len(allowed))
			for _, id := range allowed {
				out = append(out, b.describeShareGroup(id))
			}
			return out
		},
		func(g *kmsg.ShareGroupDescribeResponseGroup) (string, int16, *int32) {
			return g.GroupID, g.ErrorCode, &g.AuthorizedOperations
		})
	return now(resp)
}

// describeShareGroup is ShareGroupDescribe's entry for group id.
func (b *Broker) describeShareGroup(id string) kmsg.ShareGroupDescribeResponseGroup {
	sg := kmsg.NewShareGroupDescribeResponseGroup()
	sg.GroupID = id
	info, ok := b.shares.Describe(id, b.shareTopics())
	if !ok {
		sg.ErrorCode = kerr.GroupIDNotFound.Code
		return sg
	}
	sg.GroupState, sg.GroupEpoch, sg.AssignmentEpoch, sg.Assignor = info.State, info.Epoch, info.Epoch, "simple"
	for _, m := range info.Members {
		sm := kmsg.NewShareGroupDescribeResponseGroupMember()
		sm.MemberID, sm.MemberEpoch, sm.SubscribedTopicNames = m.ID, m.Epoch, m.Topics
		sm.ClientID, sm.ClientHost = m.ClientID, m.Host
		names := make([]string, 0, len(m.Assignments))
		for t := range m.Assignments {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, name := range names {
			t, _ := b.catalog.Get(name)
			sm.Assignment.TopicPartitions = append(sm.Assignment.TopicPartitions, kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{
				TopicID: t.ID, Topic: name, Partitions: m.Assignments[name],
			})
		}
		sg.Members = append(sg.Members, sm)
	}
	return sg
}
