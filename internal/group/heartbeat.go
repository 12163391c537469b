package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat (key 12), versions 0-4.
//
// Behaviour: a valid heartbeat restarts the member's session timer. During PreparingRebalance it also
// answers REBALANCE_IN_PROGRESS, which is how members learn they must rejoin; in CompletingRebalance
// and Stable it answers NONE.
//
// Errors: UNKNOWN_MEMBER_ID (unknown group or member, Empty group), FENCED_INSTANCE_ID,
// ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_GROUP_ID.
//
// Version notes: v3 adds group.instance.id (KIP-345).
func (c *Coordinator) Heartbeat(_ context.Context, r *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	c.mu.Lock()
	resp.ErrorCode = c.heartbeatLocked(r)
	c.mu.Unlock()
	return resp
}

func (c *Coordinator) heartbeatLocked(r *kmsg.HeartbeatRequest) int16 {
	if code := c.availableLocked(); code != 0 {
		return code
	}
	if r.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.groups[r.Group]
	switch {
	case g == nil:
		return kerr.UnknownMemberID.Code
	case g.state == stateDead:
		return kerr.CoordinatorNotAvailable.Code
	}
	if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
		return code
	}
	if r.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[r.MemberID]
	switch g.state {
	case statePreparingRebalance:
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		return kerr.RebalanceInProgress.Code
	case stateCompletingRebalance, stateStable:
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		return 0
	}
	return kerr.UnknownMemberID.Code
}

// LeaveGroup (key 13), versions 0-5.
//
// Behaviour: removes members and rebalances the rest. v3+ (KIP-345) removes a batch, each member
// answered on its own; a static member can be removed by group.instance.id alone (empty member ID),
// as an administrator does. A member ID handed out with MEMBER_ID_REQUIRED but never used is simply
// forgotten.
//
// Errors: per member UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID; top level UNKNOWN_MEMBER_ID (unknown
// group), COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID. Before v3 the
// single member's error is the top-level error.
//
// Version notes: v3 batches members, v5 adds a reason per member (logged).
func (c *Coordinator) LeaveGroup(_ context.Context, r *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := r.Members
	if r.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
	}
	c.mu.Lock()
	code, members := c.leaveLocked(r.Group, leaving)
	c.mu.Unlock()
	resp.ErrorCode = code
	if r.Version >= 3 {
		resp.Members = members
	} else if code == 0 && len(members) == 1 {
		resp.ErrorCode = members[0].ErrorCode
	}
	return resp
}

func (c *Coordinator) leaveLocked(name string, leaving []kmsg.LeaveGroupRequestMember) (int16, []kmsg.LeaveGroupResponseMember) {
	if code := c.availableLocked(); code != 0 {
		return code, nil
	}
	if name == "" {
		return kerr.InvalidGroupID.Code, nil
	}
	g := c.groups[name]
	switch {
	case g == nil:
		return kerr.UnknownMemberID.Code, nil
	case g.state == stateDead:
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	out := make([]kmsg.LeaveGroupResponseMember, 0, len(leaving))
	removed := 0
	for _, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = l.MemberID, l.InstanceID
		rm.ErrorCode = c.leaveOneLocked(g, l)
		if rm.ErrorCode == 0 {
			removed++
			c.cfg.Logger.Info("group: member left", "group", name, "member", l.MemberID, "reason", deref(l.Reason))
		}
		out = append(out, rm)
	}
	if removed > 0 {
		switch g.state {
		case stateStable, stateCompletingRebalance:
			c.maybePrepareRebalanceOrCompleteJoinLocked(g)
		case statePreparingRebalance:
			c.maybeCompleteJoinPhaseLocked(g)
		}
	}
	return 0, out
}

func (c *Coordinator) leaveOneLocked(g *group, l kmsg.LeaveGroupRequestMember) int16 {
	if l.MemberID == "" {
		if l.InstanceID == nil {
			return kerr.UnknownMemberID.Code
		}
		id, ok := g.static[*l.InstanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		g.remove(g.members[id])
		return 0
	}
	if p, ok := g.pending[l.MemberID]; ok {
		stopTimer(&p.timer)
		delete(g.pending, l.MemberID)
		return 0
	}
	if code := g.validateMember(l.MemberID, l.InstanceID); code != 0 {
		return code
	}
	g.remove(g.members[l.MemberID])
	return 0
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
