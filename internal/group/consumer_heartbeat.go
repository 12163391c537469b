package group

import (
	"context"
	"maps"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat (key 68), versions 0-1.
//
// Behaviour (KIP-848): member epoch 0 joins (v1: with the client-generated member ID; an empty one
// gets a broker-generated ID), a positive epoch heartbeats, -1 leaves and -2 is a static member's
// leave: its assignment is kept for the session timeout so the same group.instance.id can rejoin
// with epoch 0 and get it back. A dynamic member still in the group that sends epoch 0 (a join
// whose answer it never read, e.g. lost in a broker crash) keeps its member epoch and assignment
// and gets the whole assignment back, with no group epoch bump unless its subscription changed
// (Kafka since KAFKA-19233). Subscriptions are topic names or (v1) an RE2 regex matched against
// whole topic names. The server assignor ("uniform" or "range", Config.ConsumerAssignor by default)
// computes the target assignment at each group epoch; the member reconciles as documented on
// consumerGroup: revocation before assignment, and a partition is only granted once its previous
// holder released it. The assignment (topic IDs and partitions) is in the response when it changed,
// on a join, or when the owned partitions the request reports differ from it.
// HeartbeatIntervalMillis is Config.ConsumerHeartbeatInterval; a member silent for
// Config.ConsumerSessionTimeout, or that does not revoke within its rebalance timeout, is fenced.
// An Empty classic group (offsets only) becomes a consumer group.
//
// Errors: INVALID_REQUEST (missing group, member ID or subscription on a join), UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH (an epoch other than the member's current or previous one; rejoin with 0),
// UNRELEASED_INSTANCE_ID (the instance ID is held by a live member), GROUP_MAX_SIZE_REACHED (a join
// beyond Config.ConsumerMaxSize members), UNSUPPORTED_ASSIGNOR,
// INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND (a non-empty classic group of that name),
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE. cl is the sender, recorded on a joining
// member for DescribeGroups.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, cl Client, r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	c.mu.Lock()
	code, msg := c.consumerHeartbeatLocked(cl, r, resp)
	var w *write
	if g := c.groups[r.Group]; g != nil && g.cg != nil && c.availableLocked() == 0 {
		w = c.persistConsumerLocked(g) // even after an error: a rejoin may have removed the old member
	}
	c.mu.Unlock()
	if w != nil && code == 0 {
		if err := w.wait(ctx); err != nil {
			code, msg = storeErrorCode(err), "group state not stored"
		}
	}
	if code != 0 {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		resp.MemberID, resp.MemberEpoch, resp.Assignment = nil, 0, nil
	}
	return resp
}

func (c *Coordinator) consumerHeartbeatLocked(cl Client, r *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) (int16, string) {
	if code := c.availableLocked(); code != 0 {
		return code, ""
	}
	if r.Group == "" {
		return kerr.InvalidRequest.Code, "GroupId can't be empty"
	}
	if r.MemberEpoch < -2 {
		return kerr.InvalidRequest.Code, "MemberEpoch is invalid"
	}
	if r.MemberEpoch != 0 && r.MemberID == "" {
		return kerr.InvalidRequest.Code, "MemberId can't be empty"
	}
	var re *regexp.Regexp
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *r.SubscribedTopicRegex + ")$"); err != nil {
			return kerr.InvalidRegularExpression.Code, err.Error()
		}
	}
	if r.MemberEpoch == 0 && r.SubscribedTopicNames == nil && re == nil {
		return kerr.InvalidRequest.Code, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request"
	}
	if a := r.ServerAssignor; a != nil && *a != "" && *a != assignorUniform && *a != assignorRange {
		return kerr.UnsupportedAssignor.Code, "assignor " + *a + " is not supported"
	}
	g := c.groups[r.Group]
	if g != nil && g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code, "" // being deleted; retried, it finds no group
	}
	if g == nil {
		if r.MemberEpoch != 0 {
			return kerr.UnknownMemberID.Code, ""
		}
		g = c.newGroupLocked(r.Group)
	}
	if g.cg == nil {
		switch {
		case g.state != stateEmpty || len(g.members) > 0:
			return kerr.GroupIDNotFound.Code, "group " + r.Group + " is a classic group"
		case r.MemberEpoch != 0:
			return kerr.UnknownMemberID.Code, "" // only a join converts an empty classic group
		}
		g.cg = newConsumerGroup()
		g.protocolType = consumerProtocol
	}
	cg := g.cg
	if r.MemberEpoch < 0 {
		return c.consumerLeaveLocked(g, r, resp)
	}
	m, code := c.consumerMemberLocked(cl, g, r)
	if code != 0 {
		return code, ""
	}
	// Subscription and assignor changes bump the group epoch.
	bump := false
	if r.SubscribedTopicNames != nil || r.SubscribedTopicRegex != nil {
		names := slices.Sorted(slices.Values(r.SubscribedTopicNames))
		rx := ""
		if re != nil {
			rx = *r.SubscribedTopicRegex
			names = nil
		}
		if !slices.Equal(names, m.names) || rx != m.regex {
			m.names, m.regex, m.re = names, rx, re
			bump = true
		}
	}
	if r.ServerAssignor != nil && *r.ServerAssignor != m.assignor {
		m.assignor = *r.ServerAssignor
		bump = true
	}
	if bump {
		cg.epoch++ // once per heartbeat, however many things changed (Kafka's bumpGroupEpoch)
	}
	if r.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = ms(r.RebalanceTimeoutMillis)
	}
	c.schedule(&m.sessionTimer, c.cfg.ConsumerSessionTimeout, func() { c.fenceConsumerLocked(g, m, "session timeout") })
	c.refreshTargetLocked(cg)
	owned := c.ownedPartitions(r.Topics)
	changed := c.reconcileLocked(g, m, owned)
	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	if changed || r.MemberEpoch == 0 || !m.sent || (owned != nil && !ownedMatches(owned, m.assigned)) {
		resp.Assignment = c.assignmentOf(m)
		m.sent = true
	}
	return 0, ""
}

// consumerMemberLocked finds or creates the member of a heartbeat and checks its epoch.
func (c *Coordinator) consumerMemberLocked(cl Client, g *group, r *kmsg.ConsumerGroupHeartbeatRequest) (*consumerMember, int16) {
	cg := g.cg
	m := cg.members[r.MemberID]
	if r.MemberEpoch > 0 {
		switch {
		case m == nil:
			return nil, kerr.UnknownMemberID.Code
		case r.MemberEpoch > m.epoch:
			return nil, kerr.FencedMemberEpoch.Code
		case r.MemberEpoch < m.epoch:
			owned := c.ownedPartitions(r.Topics)
			if r.MemberEpoch != m.prevEpoch || (owned != nil && !ownedSubset(owned, m.assigned, m.revoking)) {
				return nil, kerr.FencedMemberEpoch.Code
			}
		}
		return m, 0
	}
	// Epoch 0: a join, or the rejoin of a fenced member or a static member.
	if m != nil && m.instanceID == nil && r.InstanceID == nil && m.epoch >= 0 {
		// A dynamic member still in the group rejoining with epoch 0 (its join or heartbeat answer
		// was lost, e.g. in a broker crash, or the client gave up its partitions) keeps its place,
		// member epoch and assignment, and gets the whole assignment back; only a subscription
		// change bumps the group epoch. Kafka's throwIfConsumerGroupMemberEpochIsInvalid accepts
		// epoch 0 for an existing member since KAFKA-19233 (apache/kafka#21305), and the rest of the
		// heartbeat proceeds as for any heartbeat.
		m.rackID, m.clientID, m.host = r.RackID, cl.ID, cl.Host
		return m, 0
	}
	if m != nil {
		c.removeConsumerLocked(g, m) // a static member's rejoin under its old member ID starts over
	}
	id := r.MemberID
	if id == "" {
		id = newMemberID("")[1:]
	}
	m = &consumerMember{
		id: id, instanceID: r.InstanceID, rackID: r.RackID, clientID: cl.ID, host: cl.Host,
		rebalanceTimeout: c.cfg.ConsumerSessionTimeout,
		assigned:         map[topicPartition]int32{}, revoking: map[topicPartition]bool{},
	}
	takesOver := false // a static member's instance coming back takes its old place
	if r.InstanceID != nil {
		_, takesOver = cg.static[*r.InstanceID]
	}
	if max := c.cfg.ConsumerMaxSize; max > 0 && !takesOver && len(cg.members) >= max {
		return nil, kerr.GroupMaxSizeReached.Code // Kafka: the group has reached its maximum capacity
	}
	if r.InstanceID != nil {
		if prev, ok := cg.static[*r.InstanceID]; ok {
			old := cg.members[prev]
			if old != nil && old.epoch != -2 {
				return nil, kerr.UnreleasedInstanceID.Code
			}
			if old != nil { // a static member back after its -2 leave takes over its assignment
				stopTimer(&old.sessionTimer)
				stopTimer(&old.revokeTimer)
				delete(cg.members, prev)
				cg.dirty[prev] = true
				m.epoch, m.prevEpoch = old.prevEpoch, old.prevEpoch
				m.names, m.regex, m.re, m.assignor = old.names, old.regex, old.re, old.assignor
				m.assigned, m.revoking = old.assigned, old.revoking
				for tp, o := range cg.owner {
					if o == prev {
						cg.owner[tp] = id
					}
				}
				cg.target[id] = cg.target[prev]
				delete(cg.target, prev)
			}
		}
		cg.static[*r.InstanceID] = id
	}
	cg.members[id] = m // its subscription bumps the group epoch
	return m, 0
}

// consumerLeaveLocked is a heartbeat with epoch -1 (leave) or -2 (static leave).
func (c *Coordinator) consumerLeaveLocked(g *group, r *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) (int16, string) {
	cg := g.cg
	m := cg.members[r.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code, ""
	}
	if r.MemberEpoch == -2 && m.instanceID != nil {
		// Kept (with its partitions) until the instance rejoins or the session times out.
		m.prevEpoch, m.epoch = m.epoch, -2
		cg.dirty[m.id] = true
		stopTimer(&m.revokeTimer)
		c.schedule(&m.sessionTimer, c.cfg.ConsumerSessionTimeout, func() { c.fenceConsumerLocked(g, m, "static member did not rejoin") })
	} else {
		c.removeConsumerLocked(g, m)
		c.refreshTargetLocked(cg)
	}
	resp.MemberID = &r.MemberID
	resp.MemberEpoch = r.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	return 0, ""
}

// ownedPartitions resolves the owned partitions a heartbeat reports (nil: not reported). Topic IDs
// that no longer resolve are left out.
func (c *Coordinator) ownedPartitions(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) map[topicPartition]bool {
	if ts == nil {
		return nil
	}
	out := map[topicPartition]bool{}
	for _, t := range ts {
		name, ok := "", false
		if c.cfg.TopicName != nil {
			name, ok = c.cfg.TopicName(t.TopicID)
		}
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			out[topicPartition{name, p}] = true
		}
	}
	return out
}

func ownedMatches(owned map[topicPartition]bool, assigned map[topicPartition]int32) bool {
	if len(owned) != len(assigned) {
		return false
	}
	for tp := range owned {
		if _, ok := assigned[tp]; !ok {
			return false
		}
	}
	return true
}

func ownedSubset(owned map[topicPartition]bool, assigned map[topicPartition]int32, revoking map[topicPartition]bool) bool {
	for tp := range owned {
		if _, ok := assigned[tp]; !ok && !revoking[tp] {
			return false
		}
	}
	return true
}

// assignmentOf is m's assigned partitions by topic ID, sorted.
func (c *Coordinator) assignmentOf(m *consumerMember) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	for _, t := range c.byTopicID(maps.Keys(m.assigned)) {
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID, at.Partitions = t.id, t.partitions
		a.Topics = append(a.Topics, at)
	}
	return &a
}
