package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup (key 11), versions 0-9.
//
// Behaviour: a member with no member ID gets one; on v4+ (KIP-394) a dynamic member first gets
// MEMBER_ID_REQUIRED with the generated ID and must rejoin with it, so a member whose first response
// is lost does not linger. A static member (group.instance.id, v5+, KIP-345) that rejoins with no
// member ID replaces its old member ID; in Stable, if the selected protocol would not change, it gets
// the current generation at once and its old assignment from SyncGroup, without a rebalance (a v9+
// leader gets the members and SkipAssignment, KIP-814). Otherwise the call parks until the join phase
// ends: every member has rejoined, or the rebalance timeout drops the dynamic members that did not.
// The leader's response carries every member's metadata for the selected protocol.
//
// Errors: INVALID_GROUP_ID (empty group), INVALID_SESSION_TIMEOUT, UNKNOWN_MEMBER_ID (unknown member ID
// or group), FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL (empty protocol type or list, or nothing
// in common with the members), COORDINATOR_NOT_AVAILABLE (group being deleted, or ctx ended while
// parked), COORDINATOR_LOAD_IN_PROGRESS. cl names the sender: member IDs start with cl.ID (or the
// group.instance.id) and DescribeGroups reports cl.ID and cl.Host.
//
// Version notes: v1 adds the rebalance timeout (v0 uses the session timeout), v4 MEMBER_ID_REQUIRED,
// v5 group.instance.id, v7 protocol type in the response and a nullable protocol name, v9 SkipAssignment.
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, r *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	c.mu.Lock()
	res, wait := c.joinLocked(cl, r)
	c.mu.Unlock()
	if wait != nil {
		select {
		case res = <-wait:
		case <-ctx.Done():
			res = joinResult{code: kerr.CoordinatorNotAvailable.Code, memberID: r.MemberID, generation: -1}
		}
	}
	res.fill(resp)
	return resp
}

// joinResult is a JoinGroup outcome; fill shapes it into the request's version.
type joinResult struct {
	code         int16
	memberID     string
	generation   int32
	protocolType *string
	protocol     *string
	leader       string
	skip         bool
	members      []kmsg.JoinGroupResponseMember
}

func (res joinResult) fill(resp *kmsg.JoinGroupResponse) {
	resp.ErrorCode = res.code
	resp.MemberID = res.memberID
	resp.Generation = res.generation
	if res.code != 0 {
		resp.Generation = -1
	}
	resp.ProtocolType = res.protocolType
	resp.Protocol = res.protocol // kmsg writes nil as "" before v7
	resp.LeaderID = res.leader
	resp.SkipAssignment = res.skip
	resp.Members = res.members
}

func joinFailed(code int16, memberID string) (joinResult, chan joinResult) {
	return joinResult{code: code, memberID: memberID, generation: -1}, nil
}

// joinLocked answers at once (nil channel) or parks the member and returns the channel its answer
// will arrive on.
func (c *Coordinator) joinLocked(cl Client, r *kmsg.JoinGroupRequest) (joinResult, chan joinResult) {
	if code := c.availableLocked(); code != 0 {
		return joinFailed(code, r.MemberID)
	}
	if r.Group == "" {
		return joinFailed(kerr.InvalidGroupID.Code, r.MemberID)
	}
	if s := ms(r.SessionTimeoutMillis); s < c.cfg.MinSessionTimeout || s > c.cfg.MaxSessionTimeout {
		return joinFailed(kerr.InvalidSessionTimeout.Code, r.MemberID)
	}
	g := c.groups[r.Group]
	created := g == nil
	if created {
		if r.MemberID != "" {
			return joinFailed(kerr.UnknownMemberID.Code, r.MemberID)
		}
		g = c.newGroupLocked(r.Group)
	}
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			return joinFailed(kerr.InconsistentGroupProtocol.Code, r.MemberID) // a live consumer-protocol group
		}
		g.cg = nil // an empty consumer group becomes a classic group
	}
	var res joinResult
	var wait chan joinResult
	if r.MemberID == "" {
		res, wait = c.joinNewMemberLocked(cl, g, r)
	} else {
		res, wait = c.joinExistingMemberLocked(cl, g, r)
	}
	if created && wait == nil && g.idle() {
		delete(c.groups, g.name) // a failed first join leaves nothing behind
	}
	return res, wait
}

func (c *Coordinator) joinNewMemberLocked(cl Client, g *group, r *kmsg.JoinGroupRequest) (joinResult, chan joinResult) {
	if g.state == stateDead {
		return joinFailed(kerr.CoordinatorNotAvailable.Code, "")
	}
	if !g.supportsProtocols(r.ProtocolType, r.Protocols) {
		return joinFailed(kerr.InconsistentGroupProtocol.Code, "")
	}
	if r.InstanceID != nil {
		id := newMemberID(*r.InstanceID)
		if old, ok := g.static[*r.InstanceID]; ok {
			return c.replaceStaticLocked(g, r, old, id)
		}
		return c.addMemberLocked(cl, g, r, id)
	}
	id := newMemberID(cl.ID)
	if r.Version >= 4 {
		c.schedulePendingLocked(g, id, ms(r.SessionTimeoutMillis))
		return joinFailed(kerr.MemberIDRequired.Code, id)
	}
	return c.addMemberLocked(cl, g, r, id)
}

func (c *Coordinator) joinExistingMemberLocked(cl Client, g *group, r *kmsg.JoinGroupRequest) (joinResult, chan joinResult) {
	id := r.MemberID
	if g.state == stateDead {
		return joinFailed(kerr.CoordinatorNotAvailable.Code, id)
	}
	if !g.supportsProtocols(r.ProtocolType, r.Protocols) {
		return joinFailed(kerr.InconsistentGroupProtocol.Code, id)
	}
	if p, ok := g.pending[id]; ok {
		if r.InstanceID != nil { // pending IDs are only handed to dynamic members
			return joinFailed(kerr.UnknownMemberID.Code, id)
		}
		stopTimer(&p.timer)
		delete(g.pending, id)
		return c.addMemberLocked(cl, g, r, id)
	}
	if code := g.validateMember(id, r.InstanceID); code != 0 {
		return joinFailed(code, id)
	}
	m := g.members[id]
	switch g.state {
	case statePreparingRebalance:
		return c.updateMemberLocked(g, m, r)
	case stateCompletingRebalance:
		if !m.matches(r.Protocols) {
			return c.updateMemberLocked(g, m, r)
		}
		// Same metadata: the member probably lost the first response; repeat it.
		res := c.currentJoinResult(g, id)
		if id == g.leader {
			res.members = g.joinMembers()
		}
		return res, nil
	case stateStable:
		// A rejoining leader forces a rebalance: it may have seen metadata changes (new partitions)
		// that no member metadata shows.
		if id == g.leader || !m.matches(r.Protocols) {
			return c.updateMemberLocked(g, m, r)
		}
		return c.currentJoinResult(g, id), nil
	}
	return joinFailed(kerr.UnknownMemberID.Code, id)
}

// newMember builds the member a JoinGroup describes.
func newMember(cl Client, r *kmsg.JoinGroupRequest, id string) *member {
	m := &member{id: id, instanceID: r.InstanceID, clientID: cl.ID, clientHost: cl.Host,
		protocolType: r.ProtocolType, isNew: true}
	setJoinFields(m, r)
	return m
}

// setJoinFields copies what a JoinGroup may change about a member.
func setJoinFields(m *member, r *kmsg.JoinGroupRequest) {
	m.protocols = dedupProtocols(r.Protocols)
	m.sessionTimeout = ms(r.SessionTimeoutMillis)
	m.rebalanceTimeout = ms(r.RebalanceTimeoutMillis)
	if r.Version == 0 || r.RebalanceTimeoutMillis <= 0 {
		m.rebalanceTimeout = m.sessionTimeout // v0 has no rebalance timeout
	}
}

func (c *Coordinator) addMemberLocked(cl Client, g *group, r *kmsg.JoinGroupRequest, id string) (joinResult, chan joinResult) {
	m := newMember(cl, r, id)
	if g.state == statePreparingRebalance && g.prevState == stateEmpty {
		g.newMemberAdded = true
	}
	g.add(m)
	ch := make(chan joinResult, 1)
	g.setAwaitingJoin(m, ch)
	// A parked new member cannot heartbeat, and a client that gave up would leave it behind, so a
	// JoinGroup that never completes drops the member after NewMemberJoinTimeout.
	c.scheduleHeartbeatLocked(g, m, c.cfg.NewMemberJoinTimeout)
	c.maybePrepareRebalanceOrCompleteJoinLocked(g)
	return joinResult{}, ch
}

func (c *Coordinator) updateMemberLocked(g *group, m *member, r *kmsg.JoinGroupRequest) (joinResult, chan joinResult) {
	setJoinFields(m, r)
	ch := make(chan joinResult, 1)
	g.setAwaitingJoin(m, ch)
	c.maybePrepareRebalanceOrCompleteJoinLocked(g)
	return joinResult{}, ch
}

// replaceStaticLocked gives a restarted static member (KIP-345) the place of its old member ID, which
// is fenced from now on.
func (c *Coordinator) replaceStaticLocked(g *group, r *kmsg.JoinGroupRequest, oldID, newID string) (joinResult, chan joinResult) {
	oldLeader := g.leader
	m := g.rekeyStatic(oldID, newID)
	setJoinFields(m, r)
	c.scheduleHeartbeatLocked(g, m, m.sessionTimeout) // the old ID's session timer is gone with it
	ch := make(chan joinResult, 1)
	g.setAwaitingJoin(m, ch)

	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocol {
			c.maybePrepareRebalanceOrCompleteJoinLocked(g)
			break
		}
		res := c.currentJoinResult(g, newID)
		if r.Version >= 9 {
			if newID == g.leader {
				res.members, res.skip = g.joinMembers(), true
			}
		} else {
			res.leader = oldLeader // an old leader must not think it leads and reassign
		}
		g.completeJoin(m, res)
		// The stored group must name the new member ID, or a restart would fence it (Kafka's
		// updateStaticMemberAndRebalance stores the group too).
		c.storeGroupLocked(g, g.assignmentsOf(), g.stateSince, nil, nil)
	case stateCompletingRebalance:
		// The leader may already be assigning to the old member ID: rebalance so the new one is seen.
		c.prepareRebalanceLocked(g)
	default:
		c.maybeCompleteJoinPhaseLocked(g)
	}
	return joinResult{}, ch
}
