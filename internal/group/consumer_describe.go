package group

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe (key 69), versions 0-1.
//
// Behaviour (KIP-848): per group its state (Empty, Assigning, Reconciling, Stable), group epoch,
// target-assignment epoch, assignor and members, each with its member epoch, client ID and host,
// subscription, current assignment and target assignment (topic IDs, names and partitions). v1
// adds MemberType, always 1 (consumer protocol).
//
// Errors (per group): GROUP_ID_NOT_FOUND for an unknown group or a classic group (Kafka's answer
// for "not a consumer group"), INVALID_GROUP_ID for an empty name, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) ConsumerGroupDescribe(_ context.Context, r *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range r.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = name
		dg.AuthorizedOperations = -2147483648 // not requested
		if r.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		g := c.groups[name]
		switch {
		case c.availableLocked() != 0:
			dg.ErrorCode = c.availableLocked()
		case name == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case g == nil || g.cg == nil || g.state == stateDead:
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + name + " is not a consumer group"
			dg.ErrorMessage = &msg
		default:
			c.describeConsumerGroupLocked(g, &dg)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) describeConsumerGroupLocked(g *group, dg *kmsg.ConsumerGroupDescribeResponseGroup) {
	cg := g.cg
	dg.State, dg.Epoch, dg.AssignmentEpoch = cg.state(), cg.epoch, cg.targetEpoch
	dg.AssignorName = c.cfg.ConsumerAssignor
	for _, m := range sortedConsumers(cg) {
		if m.assignor != "" {
			dg.AssignorName = m.assignor
		}
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
		dm.ClientID, dm.ClientHost, dm.MemberType = m.clientID, m.host, 1
		dm.SubscribedTopics = slices.Clone(m.names)
		if m.regex != "" {
			rx := m.regex
			dm.SubscribedTopicRegex = &rx
		}
		current := map[topicPartition]bool{}
		for tp := range m.assigned {
			current[tp] = true
		}
		dm.Assignment = c.describeAssignment(current)
		dm.TargetAssignment = c.describeAssignment(cg.target[m.id])
		dg.Members = append(dg.Members, dm)
	}
}

// describeAssignment is set by topic (name order), partitions sorted.
func (c *Coordinator) describeAssignment(set map[topicPartition]bool) kmsg.Assignment {
	byTopic := map[string][]int32{}
	for tp := range set {
		byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
	}
	var a kmsg.Assignment
	for topic, ps := range byTopic {
		t := kmsg.AssignmentTopicPartition{Topic: topic, Partitions: slices.Sorted(slices.Values(ps))}
		if c.cfg.TopicID != nil {
			t.TopicID, _ = c.cfg.TopicID(topic)
		}
		a.TopicPartitions = append(a.TopicPartitions, t)
	}
	slices.SortFunc(a.TopicPartitions, func(x, y kmsg.AssignmentTopicPartition) int { return cmp.Compare(x.Topic, y.Topic) })
	return a
}
