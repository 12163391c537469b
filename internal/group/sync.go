package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup (key 14), versions 0-5.
//
// Behaviour: in CompletingRebalance every member's SyncGroup parks until the leader's arrives with the
// assignments; the group then turns Stable and each parked member gets its own assignment (members the
// leader left out get an empty one). In Stable a member gets its current assignment at once, which is
// how a replaced static member gets its old partitions back without a rebalance. Members that do not
// sync within the rebalance timeout are removed and the group rebalances. The assignment is handed out
// only once the group record holding it is durable in __consumer_offsets (Kafka's storeGroup), so the
// group survives a restart; if it cannot be stored the parked SyncGroups get COORDINATOR_NOT_AVAILABLE
// and the group rebalances.
//
// Errors: UNKNOWN_MEMBER_ID (unknown or Empty group, unknown member), FENCED_INSTANCE_ID,
// ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL (v5+ protocol type/name differ from the group's),
// REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID.
//
// Version notes: v3 adds group.instance.id (KIP-345), v5 protocol type and name in both directions.
func (c *Coordinator) SyncGroup(ctx context.Context, r *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	c.mu.Lock()
	res, wait := c.syncLocked(r)
	c.mu.Unlock()
	if wait != nil {
		select {
		case res = <-wait:
		case <-ctx.Done():
			res = syncResult{code: kerr.CoordinatorNotAvailable.Code}
		}
	}
	resp.ErrorCode = res.code
	resp.ProtocolType = res.protocolType
	resp.Protocol = res.protocol
	resp.MemberAssignment = res.assignment
	return resp
}

// syncResult is a SyncGroup outcome.
type syncResult struct {
	code         int16
	protocolType *string
	protocol     *string
	assignment   []byte
}

func syncFailed(code int16) (syncResult, chan syncResult) { return syncResult{code: code}, nil }

func (c *Coordinator) syncLocked(r *kmsg.SyncGroupRequest) (syncResult, chan syncResult) {
	if code := c.availableLocked(); code != 0 {
		return syncFailed(code)
	}
	if r.Group == "" {
		return syncFailed(kerr.InvalidGroupID.Code)
	}
	g := c.groups[r.Group]
	if g == nil || g.state == stateEmpty {
		return syncFailed(kerr.UnknownMemberID.Code)
	}
	if code := c.validateSyncLocked(g, r); code != 0 {
		return syncFailed(code)
	}
	m := g.members[r.MemberID]
	switch g.state {
	case stateCompletingRebalance:
		ch := make(chan syncResult, 1)
		g.completeSync(m, syncResult{code: kerr.RebalanceInProgress.Code}) // a retried SyncGroup replaces its stale twin
		m.syncCh = ch
		c.removePendingSyncLocked(g, m.id)
		if m.id == g.leader {
			c.assignLocked(g, r.GroupAssignment)
		}
		return syncResult{}, ch
	case stateStable:
		c.removePendingSyncLocked(g, m.id)
		return syncResult{protocolType: strPtr(g.protocolType), protocol: strPtr(g.protocol), assignment: m.assignment}, nil
	}
	return syncFailed(kerr.RebalanceInProgress.Code)
}

func (c *Coordinator) validateSyncLocked(g *group, r *kmsg.SyncGroupRequest) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
		return code
	}
	if r.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if inconsistent(r.ProtocolType, g.protocolType) || inconsistent(r.Protocol, g.protocol) {
		return kerr.InconsistentGroupProtocol.Code
	}
	return 0
}

// inconsistent is true when the client named a protocol (type) and it is not the group's.
func inconsistent(requested *string, actual string) bool {
	return requested != nil && actual != "" && *requested != actual
}

// assignLocked stores the leader's assignment, then applies it and answers every parked SyncGroup, as
// Kafka's doSyncGroup does: members get their assignment only once the group record holding it is
// durable, so a restart brings the group back Stable with exactly what they were told. If the record
// cannot be stored, every parked SyncGroup gets COORDINATOR_NOT_AVAILABLE and the group rebalances.
// Either outcome is dropped if the group moved on meanwhile (a join, leave or expiry).
func (c *Coordinator) assignLocked(g *group, assignments []kmsg.SyncGroupRequestGroupAssignment) {
	byMember := make(map[string][]byte, len(g.members))
	for _, a := range assignments {
		if g.members[a.MemberID] != nil {
			byMember[a.MemberID] = a.MemberAssignment
		}
	}
	for id := range g.members {
		if byMember[id] == nil {
			byMember[id] = []byte{}
		}
	}
	gen := g.generation
	current := func() bool { return !c.closed && g.generation == gen && g.state == stateCompletingRebalance }
	c.storeGroupLocked(g, byMember, c.now(), func(int64) {
		if !current() {
			return
		}
		for id, m := range g.members {
			m.assignment = byMember[id]
		}
		c.propagateLocked(g, 0)
		g.transition(stateStable, c.now())
	}, func() {
		if !current() {
			return
		}
		c.resetAndPropagateLocked(g, kerr.CoordinatorNotAvailable.Code)
		c.prepareRebalanceLocked(g)
	})
}
