package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The rebalance state machine, after Kafka's GroupMetadataManager for classic groups. Every function
// here runs under c.mu, from a request or from a timer.
//
//	Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
//	                   ▲        │ no members left: Empty                         │ leader's SyncGroup
//	                   └────────┴──── join, leave, session or sync expiry ◀── Stable

// maybePrepareRebalanceOrCompleteJoinLocked starts a rebalance if the state allows one, else tries to
// finish the join phase in progress.
func (c *Coordinator) maybePrepareRebalanceOrCompleteJoinLocked(g *group) {
	if g.canRebalance() {
		c.prepareRebalanceLocked(g)
	} else {
		c.maybeCompleteJoinPhaseLocked(g)
	}
}

// prepareRebalanceLocked moves g to PreparingRebalance. Members parked in SyncGroup get
// REBALANCE_IN_PROGRESS and rejoin. The first rebalance of an Empty group waits
// InitialRebalanceDelay (extended while members keep arriving) so a starting fleet joins as one.
func (c *Coordinator) prepareRebalanceLocked(g *group) {
	if g.state == stateCompletingRebalance {
		c.resetAndPropagateLocked(g, kerr.RebalanceInProgress.Code)
	}
	stopTimer(&g.syncTimer)
	clear(g.pendingSync)
	initial := g.state == stateEmpty
	if initial {
		delay := c.cfg.InitialRebalanceDelay
		c.scheduleInitialJoinLocked(g, delay, max(g.rebalanceTimeout()-delay, 0))
	}
	g.transition(statePreparingRebalance, c.now())
	c.cfg.Logger.Debug("group: preparing rebalance", "group", g.name, "generation", g.generation)
	if !initial {
		c.maybeCompleteJoinElseScheduleLocked(g)
	}
}

func (c *Coordinator) scheduleInitialJoinLocked(g *group, delay, remaining time.Duration) {
	c.schedule(&g.joinTimer, delay, func() {
		if g.newMemberAdded && remaining != 0 {
			g.newMemberAdded = false
			next := min(c.cfg.InitialRebalanceDelay, remaining)
			c.scheduleInitialJoinLocked(g, next, max(remaining-delay, 0))
			return
		}
		c.completeJoinLocked(g)
	})
}

func (c *Coordinator) maybeCompleteJoinElseScheduleLocked(g *group) {
	if g.allJoined() {
		c.completeJoinLocked(g)
		return
	}
	c.schedule(&g.joinTimer, g.rebalanceTimeout(), func() { c.completeJoinLocked(g) })
}

// maybeCompleteJoinPhaseLocked finishes the join phase once everyone has joined, except during the
// initial delay, whose timer finishes it.
func (c *Coordinator) maybeCompleteJoinPhaseLocked(g *group) {
	if g.state != statePreparingRebalance || g.prevState == stateEmpty || !g.allJoined() {
		return
	}
	c.completeJoinLocked(g)
}

// completeJoinLocked ends the join phase: dynamic members that did not rejoin are dropped, the
// generation advances and every parked JoinGroup is answered (the leader's with all members'
// metadata). Static members that did not rejoin keep their place (KIP-345).
func (c *Coordinator) completeJoinLocked(g *group) {
	stopTimer(&g.joinTimer)
	for _, m := range g.sortedMembers() {
		if m.joinCh == nil && m.instanceID == nil {
			g.remove(m)
		}
	}
	if g.state == stateDead {
		return
	}
	if !c.electJoinedLeader(g) && len(g.members) > 0 {
		// Nobody rejoined: wait for the session timeouts to clear the group out.
		c.schedule(&g.joinTimer, g.rebalanceTimeout(), func() { c.completeJoinLocked(g) })
		return
	}
	g.initNextGeneration(c.now())
	c.persistGroupLocked(g)
	if g.state == stateEmpty {
		return
	}
	c.cfg.Logger.Info("group: stabilized generation", "group", g.name, "generation", g.generation,
		"members", len(g.members), "protocol", g.protocol)
	for _, m := range g.sortedMembers() {
		res := c.currentJoinResult(g, m.id)
		if m.id == g.leader {
			res.members = g.joinMembers()
		}
		g.completeJoin(m, res)
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	gen := g.generation
	c.schedule(&g.syncTimer, g.rebalanceTimeout(), func() { c.expirePendingSyncLocked(g, gen) })
}

// electJoinedLeader keeps the leader if it rejoined, else picks the earliest rejoined member.
func (c *Coordinator) electJoinedLeader(g *group) bool {
	if g.leader == "" {
		return false
	}
	if l := g.members[g.leader]; l != nil && l.joinCh != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.joinCh != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// currentJoinResult is a successful JoinGroup answer for the current generation, without members.
func (c *Coordinator) currentJoinResult(g *group, memberID string) joinResult {
	return joinResult{
		memberID:     memberID,
		generation:   g.generation,
		protocolType: strPtr(g.protocolType),
		protocol:     strPtr(g.protocol),
		leader:       g.leader,
	}
}

// expirePendingSyncLocked drops members that did not send SyncGroup within the rebalance timeout of
// generation gen, and rebalances.
func (c *Coordinator) expirePendingSyncLocked(g *group, gen int32) {
	if gen != g.generation || len(g.pendingSync) == 0 {
		return
	}
	if g.state != stateCompletingRebalance && g.state != stateStable {
		return
	}
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			c.cfg.Logger.Info("group: member did not sync in time", "group", g.name, "member", id)
			g.remove(m)
		}
	}
	c.prepareRebalanceLocked(g)
}

// resetAndPropagateLocked clears every assignment and answers parked SyncGroups with code.
func (c *Coordinator) resetAndPropagateLocked(g *group, code int16) {
	for _, m := range g.members {
		m.assignment = nil
	}
	c.propagateLocked(g, code)
}

// propagateLocked answers every parked SyncGroup with the member's assignment (or code).
func (c *Coordinator) propagateLocked(g *group, code int16) {
	for _, m := range g.sortedMembers() {
		res := syncResult{code: code, assignment: m.assignment}
		if code == 0 {
			res.protocolType, res.protocol = strPtr(g.protocolType), strPtr(g.protocol)
		}
		if g.completeSync(m, res) {
			// The session may have run out while the member waited; expect a heartbeat afresh.
			c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		}
	}
}

func (c *Coordinator) removePendingSyncLocked(g *group, memberID string) {
	delete(g.pendingSync, memberID)
	if len(g.pendingSync) == 0 || (g.state != stateCompletingRebalance && g.state != stateStable) {
		stopTimer(&g.syncTimer)
	}
}

// scheduleHeartbeatLocked (re)arms m's session timer.
func (c *Coordinator) scheduleHeartbeatLocked(g *group, m *member, d time.Duration) {
	c.schedule(&m.hbTimer, d, func() { c.expireHeartbeatLocked(g, m) })
}

// expireHeartbeatLocked removes a member whose session ran out, then rebalances.
func (c *Coordinator) expireHeartbeatLocked(g *group, m *member) {
	if g.state == stateDead || g.members[m.id] != m || m.satisfiedHeartbeat() {
		return
	}
	c.cfg.Logger.Info("group: member session expired", "group", g.name, "member", m.id)
	c.removeMemberAndUpdateLocked(g, m)
}

// removeMemberAndUpdateLocked removes m and moves the rebalance along.
func (c *Coordinator) removeMemberAndUpdateLocked(g *group, m *member) {
	g.remove(m)
	switch {
	case g.state == stateStable || g.state == stateCompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoinLocked(g)
	case g.state == statePreparingRebalance && g.allJoined():
		c.completeJoinLocked(g)
	}
}

// schedulePendingLocked arms the expiry of a KIP-394 member ID that was handed out but not used.
func (c *Coordinator) schedulePendingLocked(g *group, id string, d time.Duration) {
	p := &pendingMember{}
	g.pending[id] = p
	c.schedule(&p.timer, d, func() {
		if g.pending[id] != p {
			return
		}
		delete(g.pending, id)
		if g.state == statePreparingRebalance && g.allJoined() {
			c.completeJoinLocked(g)
		}
	})
}

// persistGroupLocked writes g's group record after a generation change, without members (records.go):
// they have no assignment yet. Nothing waits for it; a restart brings the group back Empty at this
// generation, so generations never go back.
func (c *Coordinator) persistGroupLocked(g *group) {
	c.storeGroupLocked(g, nil, g.stateSince, nil, func() {
		c.cfg.Logger.Warn("group: group record not stored; it is rewritten at the next generation", "group", g.name)
	})
}

// storeGroupLocked queues g's group metadata record (assignments nil: without members) and calls apply
// or fail once it is stored or failed.
func (c *Coordinator) storeGroupLocked(g *group, assignments map[string][]byte, stateSince time.Time, apply func(int64), fail func()) {
	g.persisted = true
	rec := Record{Key: groupMetadataKey(g.name), Value: groupMetadataValue(g, assignments, stateSince)}
	if g.cg != nil || len(g.cgWritten) == 0 {
		c.enqueueLocked(g, []Record{rec}, apply, fail)
		return
	}
	// A consumer group turned classic (Kafka's conversion of an empty group): the tombstones of its
	// consumer-group records go in the same batch; if it fails they are still owed.
	tombs := cgTombstonesLocked(g)
	c.enqueueLocked(g, append(tombs, rec), apply, func() {
		for _, t := range tombs {
			g.cgWritten[string(t.Key)] = unsureValue
		}
		if fail != nil {
			fail()
		}
	})
}

// assignmentsOf is the current assignment of every member, for a group record of a Stable group.
func (g *group) assignmentsOf() map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		out[id] = m.assignment
	}
	return out
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
