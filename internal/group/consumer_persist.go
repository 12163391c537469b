package group

import (
	"bytes"
	"encoding/binary"
	"iter"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Persistence of KIP-848 groups (record bytes: consumer_records.go). Unlike classic groups, whose
// memory changes only once their records are stored, a consumer group changes in memory first, as
// Kafka's timeline state does, and every heartbeat response waits until the records of the state it
// shows are durable: persistConsumerLocked queues them (or a barrier behind whatever is still being
// stored), so no client ever acts on an epoch or assignment a restart would forget.
//
// g.cgWritten holds the value last queued for each consumer-group key of g (absent: nothing, or a
// tombstone, in the log), so only changed pieces are written. A write that fails leaves its keys
// marked unsure (cgUnsure, and a value no encoding equals), and the next write of the group writes
// them again from memory.

// unsureValue stands in cgWritten for a key whose last write failed; encoded values start with
// version 0, so it never equals one.
var unsureValue = []byte{0xff, 0xff}

// consumerRecordsLocked is every record needed to bring the log to g's consumer-group state: the
// group-level records, the records of the members marked dirty or unsure, and every target
// assignment member record when the target changed. It updates cgWritten as if they were stored.
func (c *Coordinator) consumerRecordsLocked(g *group) []Record {
	cg := g.cg
	want := map[string][]byte{}
	want[string(cgKey(cgMetadataType, g.name))] = encodeCGGroupValue(cgGroupValue{epoch: cg.epoch, metadataHash: cg.metadataHash})
	want[string(cgKey(cgPartitionMetadataType, g.name))] = nil // superseded by the metadata hash (Kafka 4.1)
	want[string(cgKey(cgTargetMetadataType, g.name))] = encodeEpochValue(cg.targetEpoch)
	for k := range g.cgWritten {
		if dk, err := decodeKey([]byte(k)); err == nil && dk.kind == kindCGRegex {
			want[k] = nil // a regex no member uses any more, unless below
		}
	}
	for rx, v := range cg.regexes {
		want[string(cgKey(cgRegexType, g.name, rx))] = encodeRegexValue(v)
	}
	members := cg.dirty
	for k := range g.cgUnsure {
		if dk, err := decodeKey([]byte(k)); err == nil && dk.member != "" {
			members[dk.member] = true
		}
	}
	for id := range members {
		mk, tk, ck := cgKey(cgMemberMetadataType, g.name, id), cgKey(cgTargetMemberType, g.name, id), cgKey(cgCurrentAssignmentType, g.name, id)
		m := cg.members[id]
		if m == nil {
			want[string(mk)], want[string(tk)], want[string(ck)] = nil, nil, nil
			continue
		}
		want[string(mk)] = encodeMemberValue(memberValueOf(m))
		want[string(tk)] = encodeTargetMemberValue(c.byTopicID(maps.Keys(cg.target[id])))
		want[string(ck)] = encodeCurrentValue(c.currentValueLocked(cg, m))
	}
	if cg.targetEpoch != cg.storedTarget {
		for id, m := range cg.members {
			if !members[id] {
				want[string(cgKey(cgTargetMemberType, g.name, m.id))] = encodeTargetMemberValue(c.byTopicID(maps.Keys(cg.target[id])))
			}
		}
		cg.storedTarget = cg.targetEpoch
	}
	clear(cg.dirty)
	clear(g.cgUnsure)
	var recs []Record
	for k, v := range want {
		old, written := g.cgWritten[k]
		if (v == nil && !written) || (v != nil && written && sameBytes(old, v)) {
			continue
		}
		recs = append(recs, Record{Key: []byte(k), Value: v})
		if v == nil {
			delete(g.cgWritten, k)
		} else {
			g.cgWritten[k] = v
		}
	}
	// Kafka's order within a change: group epoch, metadata, members, target, current assignments.
	// Replay does not depend on it (the records of one change share one batch), but logs read alike.
	slices.SortFunc(recs, func(a, b Record) int { return strings.Compare(string(a.Key), string(b.Key)) })
	return recs
}

// persistConsumerLocked queues g's changed consumer-group records (after tombstones of its classic
// group record if it was a classic group until now: Kafka's conversion of an empty group) and returns what the caller's
// response must wait for: their write, a barrier behind writes still being stored, or nil when the
// log already holds everything memory shows.
func (c *Coordinator) persistConsumerLocked(g *group) *write {
	var recs []Record
	classic := g.persisted // a classic group record to tombstone: the group was converted
	if classic {
		recs = append(recs, Record{Key: groupKey(g.name)}, Record{Key: groupMetadataKey(g.name)})
		g.persisted = false
	}
	recs = append(recs, c.consumerRecordsLocked(g)...)
	if len(recs) == 0 {
		if len(c.queue) == 0 && !c.appending {
			return nil
		}
		return c.barrierLocked()
	}
	return c.enqueueLocked(g, recs, nil, func() {
		g.persisted = g.persisted || classic
		for _, r := range recs {
			if isCGKey(r.Key) {
				g.cgWritten[string(r.Key)] = unsureValue
				g.cgUnsure[string(r.Key)] = true
			}
		}
	})
}

// cgTombstonesLocked tombstones every consumer-group record of g in the log and forgets them: the
// group is being deleted or becoming a classic group.
func cgTombstonesLocked(g *group) []Record {
	recs := make([]Record, 0, len(g.cgWritten))
	for k := range g.cgWritten {
		recs = append(recs, Record{Key: []byte(k)})
	}
	slices.SortFunc(recs, func(a, b Record) int { return strings.Compare(string(a.Key), string(b.Key)) })
	clear(g.cgWritten)
	clear(g.cgUnsure)
	return recs
}

func isCGKey(k []byte) bool {
	return len(k) >= 2 && isCGType(binary.BigEndian.Uint16(k))
}

func memberValueOf(m *consumerMember) cgMemberValue {
	v := cgMemberValue{
		instanceID: m.instanceID, rackID: m.rackID, clientID: m.clientID, host: m.host,
		names: m.names, rebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds()),
	}
	if m.regex != "" {
		v.regex = &m.regex
	}
	if m.assignor != "" {
		v.assignor = &m.assignor
	}
	return v
}

// byTopicID groups partitions by topic ID (topics without an ID, i.e. deleted, are left out), in
// topic-ID order with partitions sorted.
func (c *Coordinator) byTopicID(tps iter.Seq[topicPartition]) []cgTopicPartitions {
	byTopic := map[string][]int32{}
	for tp := range tps {
		byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
	}
	out := make([]cgTopicPartitions, 0, len(byTopic))
	for topic, ps := range byTopic {
		id, ok := [16]byte{}, false
		if c.cfg.TopicID != nil {
			id, ok = c.cfg.TopicID(topic)
		}
		if !ok {
			continue
		}
		slices.Sort(ps)
		out = append(out, cgTopicPartitions{id: id, name: topic, partitions: ps})
	}
	slices.SortFunc(out, func(a, b cgTopicPartitions) int { return bytes.Compare(a.id[:], b.id[:]) })
	return out
}

func (c *Coordinator) currentValueLocked(cg *consumerGroup, m *consumerMember) cgCurrentValue {
	v := cgCurrentValue{epoch: m.epoch, prevEpoch: m.prevEpoch, state: memberStable}
	switch {
	case len(m.revoking) > 0:
		v.state = memberUnrevokedPartitions
	case !sameSet(m.assigned, cg.target[m.id]):
		v.state = memberUnreleasedPartitions
	}
	v.assigned = c.byTopicID(maps.Keys(m.assigned))
	v.revoking = c.byTopicID(maps.Keys(m.revoking))
	for i, t := range v.assigned {
		v.assigned[i].epochs = make([]int32, len(t.partitions))
		for j, p := range t.partitions {
			v.assigned[i].epochs[j] = m.assigned[topicPartition{t.name, p}]
		}
	}
	return v
}

// restoreConsumerGroup rebuilds g.cg from the consumer-group records replay left in g.cgWritten
// (Kafka's replay of ConsumerGroup* records). Without a ConsumerGroupMetadata record there is no
// consumer group; the other records are then only remembered for tombstoning. Topic IDs resolve
// through topicName; partitions of topics that no longer resolve are dropped.
func restoreConsumerGroup(g *group, topicName func([16]byte) (string, bool)) {
	meta, ok := g.cgWritten[string(cgKey(cgMetadataType, g.name))]
	if !ok {
		return
	}
	cg := newConsumerGroup()
	gv, _ := decodeCGGroupValue(meta)
	cg.epoch, cg.metadataHash = gv.epoch, gv.metadataHash
	if v, ok := g.cgWritten[string(cgKey(cgTargetMetadataType, g.name))]; ok {
		cg.targetEpoch, _ = decodeEpochValue(v, "")
	}
	cg.storedTarget = cg.targetEpoch
	if v, ok := g.cgWritten[string(cgKey(cgPartitionMetadataType, g.name))]; ok && cg.metadataHash == 0 {
		// Written before the metadata hash: the topics it lists give the same hash, so the
		// group does not rebalance for the upgrade.
		ts, _ := decodePartitionMetadataValue(v)
		infos := make([]TopicInfo, 0, len(ts))
		for _, t := range ts {
			infos = append(infos, TopicInfo{Name: t.name, ID: t.id, Partitions: t.partitions})
		}
		cg.metadataHash = metadataHash(infos)
	}
	resolve := func(ts []cgTopicPartitions) (map[topicPartition]bool, map[topicPartition]int32) {
		set, epochs := map[topicPartition]bool{}, map[topicPartition]int32{}
		for _, t := range ts {
			name, ok := "", false
			if topicName != nil {
				name, ok = topicName(t.id)
			}
			if !ok {
				continue
			}
			for i, p := range t.partitions {
				tp := topicPartition{name, p}
				set[tp] = true
				if t.epochs != nil {
					epochs[tp] = t.epochs[i]
				} else {
					epochs[tp] = -1 // no AssignmentEpochs (written before KIP-1251): the member epoch, below
				}
			}
		}
		return set, epochs
	}
	var ids []string
	for k, v := range g.cgWritten {
		dk, err := decodeKey([]byte(k))
		switch {
		case err != nil:
		case dk.kind == kindCGMember:
			ids = append(ids, dk.member)
		case dk.kind == kindCGRegex:
			cg.regexes[dk.regex], _ = decodeRegexValue(v)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		mv, _ := decodeMemberValue(g.cgWritten[string(cgKey(cgMemberMetadataType, g.name, id))])
		m := &consumerMember{
			id: id, instanceID: mv.instanceID, rackID: mv.rackID, clientID: mv.clientID, host: mv.host,
			names: mv.names, rebalanceTimeout: ms(mv.rebalanceTimeoutMs),
			assigned: map[topicPartition]int32{}, revoking: map[topicPartition]bool{},
		}
		if mv.regex != nil && *mv.regex != "" {
			// Accepted when the member joined, so it compiles; a regex that does not (a record
			// not written by Kawa) subscribes to nothing.
			m.regex = *mv.regex
			m.re, _ = regexp.Compile("^(?:" + m.regex + ")$")
			if m.re == nil {
				m.re = regexp.MustCompile(`^\b$`) // matches no topic name
			}
			m.names = nil
		}
		if mv.assignor != nil {
			m.assignor = *mv.assignor
		}
		if v, ok := g.cgWritten[string(cgKey(cgTargetMemberType, g.name, id))]; ok {
			ts, _ := decodeTargetMemberValue(v)
			cg.target[id], _ = resolve(ts)
		}
		if v, ok := g.cgWritten[string(cgKey(cgCurrentAssignmentType, g.name, id))]; ok {
			cv, _ := decodeCurrentValue(v)
			m.epoch, m.prevEpoch = cv.epoch, cv.prevEpoch
			set, epochs := resolve(cv.assigned)
			for tp := range set {
				if e := epochs[tp]; e >= 0 {
					m.assigned[tp] = e
				} else {
					m.assigned[tp] = m.epoch
				}
			}
			m.revoking, _ = resolve(cv.revoking)
		}
		// One holder per partition. The log never holds two (a partition is granted only once its
		// holder released it), but a damaged log must not make two.
		for tp := range m.assigned {
			if _, held := cg.owner[tp]; held {
				delete(m.assigned, tp)
				continue
			}
			cg.owner[tp] = id
		}
		for tp := range m.revoking {
			if _, held := cg.owner[tp]; held {
				delete(m.revoking, tp)
				continue
			}
			cg.owner[tp] = id
		}
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
		cg.members[id] = m
	}
	g.cg = cg
	g.protocolType = consumerProtocol
	g.persisted = false                                      // the classic record, if any, is superseded
	g.restoreMembers(kmsg.GroupMetadataValue{}, time.Time{}) // a consumer group has no classic members
}

// scheduleConsumerTimersLocked starts the timers of a restored consumer group's members, as Kafka
// does on load: every session runs from now, and a member still revoking has its rebalance timeout.
// A regex without a stored resolution (a log written before Kawa stored them) is resolved now, so
// the retention sweep sees its topics subscribed before the first heartbeat.
func (c *Coordinator) scheduleConsumerTimersLocked(g *group) {
	for _, m := range g.cg.members {
		if _, ok := g.cg.regexes[m.regex]; m.re != nil && !ok && c.cfg.Topics != nil {
			c.resolveRegexesLocked(g.cg, c.cfg.Topics())
			break
		}
	}
	for _, m := range g.cg.members {
		why := "session timeout"
		if m.epoch == -2 {
			why = "static member did not rejoin"
		}
		c.schedule(&m.sessionTimer, c.cfg.ConsumerSessionTimeout, func() { c.fenceConsumerLocked(g, m, why) })
		if len(m.revoking) > 0 {
			c.schedule(&m.revokeTimer, m.rebalanceTimeout, func() { c.fenceConsumerLocked(g, m, "rebalance timeout") })
		}
	}
}
