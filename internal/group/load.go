package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Load replays the __consumer_offsets log, oldest record first and each in turn, and replaces the
// coordinator's groups with what it describes: a later value for a key replaces the earlier one, a
// tombstone deletes its key, and a transaction marker completes the producer's staged offsets by the
// same rule as CompleteTxn. recs is the log from its start, whole or compacted (a record's position is its index
// in recs: only the order of positions matters, and compaction keeps it; every record states its key's latest
// state, so the latest record of each key replays to the same groups). Groups come
// back with their protocol type, generation, committed offsets and staged transactional offsets
// (whose markers the transaction coordinator re-sends); a group whose assignment was stored comes back
// Stable with its members, leader and assignments, and each member's session timer starts now
// (Kafka's onGroupLoaded), so members carry on through heartbeats without a rebalance. Other groups
// come back Empty and their members rejoin. Requests that arrive while
// Load runs get COORDINATOR_LOAD_IN_PROGRESS. Records that do not decode are skipped and reported in
// the returned error (ErrCorrupt); everything else is still loaded. Call Load before serving.
func (c *Coordinator) Load(recs []Record) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.loading = true
	c.mu.Unlock()

	groups, err := replay(recs, c.now(), c.cfg.TopicName)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextPos = int64(len(recs))
	// Kafka's onGroupLoaded: every restored member's session runs from now.
	for _, g := range groups {
		for _, m := range g.members {
			c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		}
		if g.cg != nil {
			c.scheduleConsumerTimersLocked(g)
		}
	}
	for _, g := range c.groups {
		c.unloadGroupLocked(g)
	}
	c.groups = groups
	c.loading = false
	c.cfg.Logger.Info("group: loaded __consumer_offsets", "records", len(recs), "groups", len(groups))
	return err
}

// replay builds groups from the log by applying every record in log order, as the live coordinator
// applied them: record i sits at log position i, which orders committed and staged offsets for
// transaction markers (offset.pos). Consumer-group (KIP-848) records are gathered per key and the
// group is rebuilt from the latest of each at the end (topic IDs resolved by topicName). Groups left
// holding nothing are dropped.
func replay(recs []Record, now time.Time, topicName func([16]byte) (string, bool)) (map[string]*group, error) {
	groups := make(map[string]*group)
	get := func(name string) *group {
		if g := groups[name]; g != nil {
			return g
		}
		g := newGroup(name, now)
		groups[name] = g
		return g
	}
	var errs []error
	for i, r := range recs {
		if err := replayOne(r.Key, r.Value, int64(i), get, now); err != nil {
			errs = append(errs, err)
		}
	}
	for name, g := range groups {
		restoreConsumerGroup(g, topicName)
		if !g.persisted && len(g.offsets) == 0 && len(g.txn) == 0 && len(g.cgWritten) == 0 {
			delete(groups, name)
			continue
		}
		g.subscribed = g.computeSubscribed()
	}
	if len(errs) > 0 {
		return groups, fmt.Errorf("group: %d records not loaded: %w", len(errs), errors.Join(errs...))
	}
	return groups, nil
}

// replayOne applies the record at log position pos; a nil value is a tombstone for its key.
func replayOne(key, value []byte, pos int64, get func(string) *group, now time.Time) error {
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	g := get(k.group)
	if isCGKind(k.kind) {
		if value == nil {
			delete(g.cgWritten, string(key))
			return nil
		}
		if _, err := decodeCGValue(k.kind, value); err != nil {
			return err
		}
		g.cgWritten[string(key)] = value
		return nil
	}
	if value == nil {
		switch k.kind {
		case kindOffset:
			delete(g.offsets, k.tp)
		case kindStaged:
			g.unstage(k.producerID, k.tp)
		case kindGroup, kindGroupMetadata:
			g.persisted = false
			g.protocolType, g.generation, g.stateSince = "", 0, now
			g.restoreMembers(kmsg.GroupMetadataValue{}, now)
		}
		return nil
	}
	switch k.kind {
	case kindOffset:
		o, err := decodeOffsetValue(value)
		if err != nil {
			return err
		}
		o.pos = pos
		g.offsets[k.tp] = o
	case kindStaged:
		epoch, o, err := decodeStagedValue(value)
		if err != nil {
			return err
		}
		o.pos = pos
		g.stage(k.producerID, epoch, k.tp, o)
	case kindMarker:
		commit, err := decodeMarkerValue(value)
		if err != nil {
			return err
		}
		g.completeTxn(k.producerID, commit)
	case kindGroupMetadata:
		v, err := decodeGroupMetadataValue(value)
		if err != nil {
			return err
		}
		g.persisted = true
		g.protocolType, g.generation = v.ProtocolType, v.Generation
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
		if v.CurrentStateTimestamp < 0 {
			g.stateSince = now
		}
		g.restoreMembers(v, now)
	case kindGroup:
		v, err := decodeGroupValue(value)
		if err != nil {
			return err
		}
		g.persisted = true
		g.protocolType, g.generation = v.protocolType, v.generation
		g.stateSince = v.stateSince
		if v.members > 0 {
			g.stateSince = now // it had members when the broker stopped: Empty from now on
		}
	}
	return nil
}

// restoreMembers sets g's members, protocol, leader and state from a group metadata record (Kafka's
// GroupMetadata.loadGroup): with members the group is Stable and each member keeps its subscription
// and assignment; without, it is Empty. A record with a protocol but no members was written when a
// generation had joined but not yet synced: those members rejoin, and the group counts as Empty from
// now for offset retention.
func (g *group) restoreMembers(v kmsg.GroupMetadataValue, now time.Time) {
	clear(g.members)
	clear(g.static)
	clear(g.pendingSync)
	g.leader, g.protocol, g.state = "", "", stateEmpty
	if len(v.Members) == 0 {
		if v.Protocol != nil {
			g.stateSince = now
		}
		return
	}
	g.protocol = deref(v.Protocol)
	for _, vm := range v.Members {
		m := &member{
			id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			protocolType:     v.ProtocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
			sessionTimeout:   ms(vm.SessionTimeoutMillis),
			rebalanceTimeout: ms(vm.RebalanceTimeoutMillis),
			assignment:       vm.Assignment,
		}
		if m.assignment == nil {
			m.assignment = []byte{}
		}
		g.add(m)
	}
	g.leader = deref(v.Leader)
	if g.members[g.leader] == nil {
		g.leader = g.sortedMembers()[0].id
	}
	g.state = stateStable
}
