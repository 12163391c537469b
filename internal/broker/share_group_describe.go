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
// Authorized operations are not computed (INT32_MIN). Errors per group:
// GROUP_ID_NOT_FOUND for a group that is not a share group.
//
// Authorization (with an authorizer): DESCRIBE on each group, else
// GROUP_AUTHORIZATION_FAILED.
func (b *Broker) handleShareGroupDescribe(_ context.Context, reqInfo wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ShareGroupDescribeRequest)
	resp := r.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range r.GroupIDs {
		sg := kmsg.NewShareGroupDescribeResponseGroup()
		sg.GroupID = id
		if !b.authorized(reqInfo, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			sg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		info, ok := b.shares.Describe(id, b.shareTopics())
		if !ok {
			sg.ErrorCode = kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, sg)
			continue
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
		resp.Groups = append(resp.Groups, sg)
	}
	return now(resp)
}
