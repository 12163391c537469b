package group

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupType is the ListGroups v5+ type of classic groups (KIP-848 calls the protocol "classic");
// consumer-protocol groups are "consumer".
const groupType = "classic"

// ListGroups (key 16), versions 0-5.
//
// Behaviour: lists every group, including Empty groups that only hold offsets (simple groups have an
// empty protocol type), in name order. Groups being deleted are not listed.
//
// Errors: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (top level).
//
// Version notes: v4 states filter (KIP-518), v5 types filter (KIP-848); both match case-insensitively.
func (c *Coordinator) ListGroups(_ context.Context, r *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp.ErrorCode = c.availableLocked(); resp.ErrorCode != 0 {
		return resp
	}
	for _, g := range c.groups {
		if g.state == stateDead {
			continue
		}
		st, typ := g.state.String(), groupType
		if g.cg != nil {
			st, typ = g.cg.state(), consumerProtocol
		}
		if len(r.TypesFilter) > 0 && !slices.ContainsFunc(r.TypesFilter, eqFold(typ)) {
			continue
		}
		if len(r.StatesFilter) > 0 && !slices.ContainsFunc(r.StatesFilter, eqFold(st)) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.name, g.protocolType, st, typ
		resp.Groups = append(resp.Groups, lg)
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return cmp.Compare(a.Group, b.Group) })
	return resp
}

func eqFold(s string) func(string) bool {
	return func(t string) bool { return strings.EqualFold(s, t) }
}

// groupOperations is the authorized-operations bitfield of a group with no ACLs: READ, DELETE and
// DESCRIBE (Kafka's AclOperation codes 3, 6 and 8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

// DescribeGroups (key 15), versions 0-6.
//
// Behaviour: state, protocol type and members (client ID and host from WithClient). Only a Stable
// group shows its protocol and each member's metadata and assignment, as in Kafka. An unknown group
// is described as Dead.
//
// Errors: GROUP_ID_NOT_FOUND for an unknown group or a KIP-848 consumer group, which Kafka does not
// describe here (v6+, KIP-1043; earlier versions answer NONE and state Dead),
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
//
// Version notes: v3 authorized operations, v4 group.instance.id, v6 error message.
func (c *Coordinator) DescribeGroups(_ context.Context, r *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range r.Groups {
		dg := c.describeLocked(r.Version, name)
		dg.AuthorizedOperations = math.MinInt32 // Kafka's "not requested"
		if r.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) describeLocked(version int16, name string) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = name
	if dg.ErrorCode = c.availableLocked(); dg.ErrorCode != 0 {
		return dg
	}
	g := c.groups[name]
	if g == nil || g.state == stateDead || g.cg != nil {
		// Kafka describes classic groups only: a consumer-protocol group (KIP-848) is answered like an
		// unknown one, Dead, and from v6 GROUP_ID_NOT_FOUND (KIP-1043); ConsumerGroupDescribe
		// describes it.
		dg.State = stateDead.String()
		if version >= 6 {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + name + " not found."
			if g != nil && g.cg != nil {
				msg = "Group " + name + " is not a classic group."
			}
			dg.ErrorMessage = &msg
		}
		return dg
	}
	dg.State, dg.ProtocolType = g.state.String(), g.protocolType
	stable := g.state == stateStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		if stable {
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.protocol), m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// DeleteGroups (key 42), versions 0-2.
//
// Behaviour: deletes Empty groups with their committed and staged offsets. Success is returned only
// after tombstones for every offset and for the group are durable, so a deleted group stays deleted
// across a restart (BL-18). While the tombstones are being stored the group is Dead: joins and commits
// get COORDINATOR_NOT_AVAILABLE and retry, then find no group.
//
// Errors per group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, COORDINATOR_NOT_AVAILABLE (store failed),
// COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) DeleteGroups(ctx context.Context, r *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	writes := make([]*write, len(r.Groups))
	c.mu.Lock()
	for i, name := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		dg.ErrorCode, writes[i] = c.deleteGroupLocked(name)
		resp.Groups = append(resp.Groups, dg)
	}
	c.mu.Unlock()
	for i, w := range writes {
		if w != nil {
			if err := w.wait(ctx); err != nil {
				resp.Groups[i].ErrorCode = storeErrorCode(err)
			}
		}
	}
	return resp
}

func (c *Coordinator) deleteGroupLocked(name string) (int16, *write) {
	if code := c.availableLocked(); code != 0 {
		return code, nil
	}
	g := c.groups[name]
	switch {
	case g == nil || g.state == stateDead:
		return kerr.GroupIDNotFound.Code, nil
	case g.state != stateEmpty, g.cg != nil && len(g.cg.members) > 0:
		return kerr.NonEmptyGroup.Code, nil
	}
	return 0, c.removeGroupLocked(g)
}

// removeGroupLocked turns g Dead and queues tombstones for all it holds, including keys whose writes are
// still queued (they will be stored before the tombstones). The group leaves the map once the
// tombstones are stored, or returns to Empty if they are not.
func (c *Coordinator) removeGroupLocked(g *group) *write {
	keys := make(map[string]bool)
	for tp := range g.offsets {
		keys[string(offsetKey(g.name, tp))] = true
	}
	for pid, st := range g.txn {
		for tp := range st.offsets {
			keys[string(stagedKey(g.name, pid, tp))] = true
		}
	}
	for k := range g.inflight {
		keys[k] = true
	}
	keys[string(groupKey(g.name))] = true // the version-1 record a group may still have
	keys[string(groupMetadataKey(g.name))] = true
	for k := range g.cgWritten {
		keys[k] = true
	}
	recs := make([]Record, 0, len(keys))
	for k := range keys {
		recs = append(recs, Record{Key: []byte(k)})
	}
	slices.SortFunc(recs, func(a, b Record) int { return strings.Compare(string(a.Key), string(b.Key)) })
	g.transition(stateDead, c.now())
	return c.enqueueLocked(g, recs, func(int64) {
		if c.groups[g.name] == g {
			delete(c.groups, g.name)
		}
	}, func() {
		g.transition(stateEmpty, c.now())
	})
}

// OffsetDelete (key 47), version 0.
//
// Behaviour: deletes committed offsets of partitions the group does not consume: any partition of an
// Empty group, and partitions of topics no member subscribes to in a consumer group. Success is
// returned once the tombstones are durable. A partition without an offset answers NONE.
//
// Errors: top level GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with members),
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE; per partition GROUP_SUBSCRIBED_TO_TOPIC.
func (c *Coordinator) OffsetDelete(ctx context.Context, r *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	c.mu.Lock()
	code, w := c.offsetDeleteLocked(r, resp)
	c.mu.Unlock()
	resp.ErrorCode = code
	if code != 0 {
		resp.Topics = nil
		return resp
	}
	if w != nil {
		if err := w.wait(ctx); err != nil {
			resp.ErrorCode, resp.Topics = storeErrorCode(err), nil
		}
	}
	return resp
}

func (c *Coordinator) offsetDeleteLocked(r *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse) (int16, *write) {
	if code := c.availableLocked(); code != 0 {
		return code, nil
	}
	g := c.groups[r.Group]
	switch {
	case g == nil || g.state == stateDead:
		return kerr.GroupIDNotFound.Code, nil
	case g.state != stateEmpty && g.protocolType != consumerProtocol:
		return kerr.NonEmptyGroup.Code, nil
	}
	var recs []Record
	var deleted []topicPartition
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		subscribed := g.state != stateEmpty && g.subscribedTo(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			tp := topicPartition{t.Topic, p.Partition}
			key := offsetKey(g.name, tp)
			_, committed := g.offsets[tp]
			switch {
			case subscribed:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case committed || g.inflight[string(key)] > 0:
				recs = append(recs, Record{Key: key})
				deleted = append(deleted, tp)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	return 0, c.enqueueLocked(g, recs, func(int64) {
		for _, tp := range deleted {
			delete(g.offsets, tp)
		}
	}, nil)
}

// DeleteTopicOffsets removes, from every group, the committed and staged offsets of the topics for
// which gone reports true: Kafka's GroupCoordinator.onPartitionsDeleted, so a topic deleted and created
// again starts with no committed offsets (OffsetFetch answers -1). The broker calls it after deleting a
// topic, and at start for topics the catalog no longer has (a crash between the two steps). It returns
// once the tombstones are durable. Errors: ctx's, the Store's, ErrLoading, ErrClosed.
func (c *Coordinator) DeleteTopicOffsets(ctx context.Context, gone func(topic string) bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.loading:
		return ErrLoading
	}
	var last *write
	for _, g := range c.groups {
		if g.state == stateDead { // its tombstones are queued already
			continue
		}
		if w := c.deleteTopicOffsetsLocked(g, gone); w != nil {
			last = w
		}
	}
	if last == nil {
		return nil
	}
	c.mu.Unlock()
	err := last.wait(ctx) // writes finish in queue order, so the last one done means all are
	c.mu.Lock()
	return err
}

// deleteTopicOffsetsLocked queues tombstones for g's committed and staged offsets of gone topics,
// including writes still queued (they are stored before the tombstones).
func (c *Coordinator) deleteTopicOffsetsLocked(g *group, gone func(string) bool) *write {
	var offsets []topicPartition
	seen := make(map[topicPartition]bool)
	for tp := range g.offsets {
		if gone(tp.topic) {
			offsets, seen[tp] = append(offsets, tp), true
		}
	}
	type stagedTP struct {
		pid int64
		tp  topicPartition
	}
	var stagedTPs []stagedTP
	seenStaged := make(map[stagedTP]bool)
	for pid, st := range g.txn {
		for tp := range st.offsets {
			if gone(tp.topic) {
				stagedTPs, seenStaged[stagedTP{pid, tp}] = append(stagedTPs, stagedTP{pid, tp}), true
			}
		}
	}
	for k := range g.inflight {
		dk, err := decodeKey([]byte(k))
		if err != nil || !gone(dk.tp.topic) {
			continue
		}
		switch s := (stagedTP{dk.producerID, dk.tp}); {
		case dk.kind == kindOffset && !seen[dk.tp]:
			offsets, seen[dk.tp] = append(offsets, dk.tp), true
		case dk.kind == kindStaged && !seenStaged[s]:
			stagedTPs, seenStaged[s] = append(stagedTPs, s), true
		}
	}
	if len(offsets) == 0 && len(stagedTPs) == 0 {
		return nil
	}
	recs := make([]Record, 0, len(offsets)+len(stagedTPs))
	for _, tp := range offsets {
		recs = append(recs, Record{Key: offsetKey(g.name, tp)})
	}
	for _, s := range stagedTPs {
		recs = append(recs, Record{Key: stagedKey(g.name, s.pid, s.tp)})
	}
	c.cfg.Logger.Info("group: deleting offsets of deleted topics", "group", g.name, "partitions", len(offsets), "staged", len(stagedTPs))
	return c.enqueueLocked(g, recs, func(int64) {
		for _, tp := range offsets {
			delete(g.offsets, tp)
		}
		for _, s := range stagedTPs {
			g.unstage(s.pid, s.tp)
		}
	}, nil)
}
