package group

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit (key 8), versions 2-10. The coordinator also answers v0-v1, which the broker does not advertise.
//
// Behaviour: success is returned only after the offsets are durable in __consumer_offsets (BL-19); an
// offset that failed to store is not visible either. A commit with generation -1 and no member (an
// admin, or a consumer without group management) is accepted while the group is Empty and creates a
// simple group if needed. A member's commit checks member, instance and generation, and restarts the
// member's session timer while Stable or PreparingRebalance (consumers commit before rejoining).
//
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (Config.TopicExists), UNKNOWN_TOPIC_ID (v10),
// OFFSET_METADATA_TOO_LARGE, and the group's error for every partition: UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, ILLEGAL_GENERATION (also: unknown group before v9), GROUP_ID_NOT_FOUND (unknown
// group, v9+), REBALANCE_IN_PROGRESS (CompletingRebalance), COORDINATOR_NOT_AVAILABLE (group being
// deleted, or the store failed), COORDINATOR_LOAD_IN_PROGRESS. On a consumer group (KIP-848) the
// generation is the member epoch, checked by validateConsumerCommit (KIP-1251): STALE_MEMBER_EPOCH,
// UNKNOWN_MEMBER_ID, and UNSUPPORTED_VERSION for a member committing below v9.
//
// Version notes: v1 adds generation, member and a commit timestamp; v2-v4 a retention time; v6 leader
// epochs; v7 group.instance.id; v10 topic IDs.
func (c *Coordinator) OffsetCommit(ctx context.Context, r *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	now := c.now()
	var parts []*commitPart
	parts, resp.Topics = c.commitParts(r.Version >= 10, r.Topics, func(p kmsg.OffsetCommitRequestTopicPartition) offset {
		return commitOffset(r, p, now)
	})
	c.commit(ctx, parts, func() *write { return c.offsetCommitLocked(r, parts) })
	return resp
}

// commitParts turns a commit request's topics into commitParts and the
// response's topics, whose error codes commit fills in: one path for
// OffsetCommit and TxnOffsetCommit (which converts its topics to
// OffsetCommit's). Topics are resolved by ID when byID.
func (c *Coordinator) commitParts(byID bool, topics []kmsg.OffsetCommitRequestTopic,
	offsetOf func(kmsg.OffsetCommitRequestTopicPartition) offset) ([]*commitPart, []kmsg.OffsetCommitResponseTopic) {
	var parts []*commitPart
	out := make([]kmsg.OffsetCommitResponseTopic, len(topics))
	for ti, t := range topics {
		rt := &out[ti]
		*rt = kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, code := c.topicName(byID, t.Topic, t.TopicID)
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			parts = append(parts, c.newCommitPart(name, code, p.Partition, offsetOf(p), &rp.ErrorCode))
		}
	}
	return parts, out
}

// commitPart is one partition of a commit on its way to the log.
type commitPart struct {
	tp   topicPartition
	o    offset
	code int16
	dst  *int16 // the partition's error code in the response
}

// commit runs the parts of one OffsetCommit or TxnOffsetCommit: locked
// decides under c.mu what to write (and sets the codes of parts refused),
// then the write is waited for outside the lock and every part's code is
// set in its response.
func (c *Coordinator) commit(ctx context.Context, parts []*commitPart, locked func() *write) {
	c.mu.Lock()
	w := locked()
	c.mu.Unlock()
	waitCommit(ctx, w, parts)
	for _, p := range parts {
		*p.dst = p.code
	}
}

func (p *commitPart) pending() bool { return p.code == 0 }

func (c *Coordinator) newCommitPart(topic string, topicCode int16, partition int32, o offset, dst *int16) *commitPart {
	p := &commitPart{tp: topicPartition{topic, partition}, o: o, code: topicCode, dst: dst}
	if p.code == 0 && c.cfg.TopicExists != nil && !c.cfg.TopicExists(topic, partition) {
		p.code = kerr.UnknownTopicOrPartition.Code
	}
	return p
}

// topicName resolves a request's topic: by ID from v10 (KIP-848's OffsetCommit), else by name.
func (c *Coordinator) topicName(byID bool, name string, id [16]byte) (string, int16) {
	if !byID {
		return name, 0
	}
	if c.cfg.TopicName != nil {
		if n, ok := c.cfg.TopicName(id); ok {
			return n, 0
		}
	}
	return "", kerr.UnknownTopicID.Code
}

// commitOffset is the stored form of one committed partition.
func commitOffset(r *kmsg.OffsetCommitRequest, p kmsg.OffsetCommitRequestTopicPartition, now time.Time) offset {
	o := offset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: deref(p.Metadata), commitTime: now}
	if r.Version < 6 {
		o.leaderEpoch = -1
	}
	if r.Version == 1 && p.Timestamp != -1 {
		o.commitTime = time.UnixMilli(p.Timestamp)
	}
	if r.Version >= 2 && r.Version <= 4 && r.RetentionTimeMillis != -1 {
		o.expireTime = now.Add(time.Duration(r.RetentionTimeMillis) * time.Millisecond)
	}
	return o
}

func anyPending(parts []*commitPart) bool {
	return slices.ContainsFunc(parts, (*commitPart).pending)
}

func setPending(parts []*commitPart, code int16) {
	for _, p := range parts {
		if p.pending() {
			p.code = code
		}
	}
}

func (c *Coordinator) offsetCommitLocked(r *kmsg.OffsetCommitRequest, parts []*commitPart) *write {
	if code := c.availableLocked(); code != 0 {
		setPending(parts, code)
		return nil
	}
	gen, memberID, instanceID := r.Generation, r.MemberID, r.InstanceID
	if r.Version == 0 {
		gen, memberID, instanceID = -1, "", nil
	}
	g := c.groups[r.Group]
	if g == nil {
		switch {
		case !anyPending(parts):
			return nil
		case gen < 0:
			g = c.newGroupLocked(r.Group) // a simple group: offsets only
		case r.Version >= 9:
			setPending(parts, kerr.GroupIDNotFound.Code)
			return nil
		default:
			setPending(parts, kerr.IllegalGeneration.Code)
			return nil
		}
	}
	if code := g.validateOffsetCommit(memberID, instanceID, gen, false, r.Version, parts); code != 0 {
		setPending(parts, code)
		return nil
	}
	if m := g.members[memberID]; m != nil && (g.state == stateStable || g.state == statePreparingRebalance) {
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
	}
	return c.writeOffsetsLocked(g, parts)
}

// writeOffsetsLocked queues the pending parts as offset records; they reach g.offsets once stored.
func (c *Coordinator) writeOffsetsLocked(g *group, parts []*commitPart) *write {
	var recs []Record
	var accepted []*commitPart
	for _, p := range parts {
		if !p.pending() {
			continue
		}
		if !c.storableLocked(p) {
			continue
		}
		recs = append(recs, Record{Key: offsetKey(g.name, p.tp), Value: encodeOffsetValue(p.o)})
		accepted = append(accepted, p)
	}
	if len(recs) == 0 {
		return nil
	}
	return c.enqueueLocked(g, recs, func(pos int64) {
		for i, p := range accepted {
			o := p.o
			o.pos = pos + int64(i)
			g.offsets[p.tp] = o
		}
	}, nil)
}

// storableLocked is the last check of a pending part before its record is queued: metadata size, and
// the topic once more, under c.mu. The broker deletes a topic from its catalog before calling
// DeleteTopicOffsets, which takes c.mu, so a commit racing the deletion is either refused here or
// queued before DeleteTopicOffsets looks, which then tombstones it too.
func (c *Coordinator) storableLocked(p *commitPart) bool {
	switch {
	case len(p.o.metadata) > c.cfg.MaxMetadataSize:
		p.code = kerr.OffsetMetadataTooLarge.Code
	case c.cfg.TopicExists != nil && !c.cfg.TopicExists(p.tp.topic, p.tp.partition):
		p.code = kerr.UnknownTopicOrPartition.Code
	default:
		return true
	}
	return false
}

// waitCommit waits for w and turns a failed write into the parts' error code.
func waitCommit(ctx context.Context, w *write, parts []*commitPart) {
	if w == nil {
		return
	}
	if err := w.wait(ctx); err != nil {
		setPending(parts, storeErrorCode(err))
	}
}

// validateOffsetCommit is Kafka's ClassicGroup.validateOffsetCommit, for plain and transactional
// (KIP-447) commits of request version version; a consumer group's (KIP-848) is
// validateConsumerCommit, gen being the member epoch.
func (g *group) validateOffsetCommit(memberID string, instanceID *string, gen int32, txn bool, version int16, parts []*commitPart) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.cg != nil {
		if txn && gen < 0 && memberID == "" && instanceID == nil {
			// Kafka's ConsumerGroup.validateOffsetCommit: a TxnOffsetCommit need not name a member
			// (before v3, or a producer given only the group ID), and is then not checked.
			return 0
		}
		tps := make([]topicPartition, 0, len(parts))
		for _, p := range parts {
			if p.pending() {
				tps = append(tps, p.tp)
			}
		}
		if !txn && version < 9 && g.cg.members[memberID] != nil {
			// Kafka: a consumer-protocol member commits with OffsetCommit v9+, which carries its epoch.
			return kerr.UnsupportedVersion.Code
		}
		code := g.validateConsumerCommit(memberID, gen, tps)
		if txn && code == kerr.StaleMemberEpoch.Code {
			// Kafka's validateTransactionalOffsetCommit: TxnOffsetCommit answers a stale epoch with
			// ILLEGAL_GENERATION, which producers abort on; STALE_MEMBER_EPOCH is fatal to the Java one.
			return kerr.IllegalGeneration.Code
		}
		return code
	}
	if gen < 0 && g.state == stateEmpty {
		return 0 // not using group management
	}
	if gen >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if gen != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if !txn && g.state != stateEmpty {
		return kerr.UnknownMemberID.Code // an anonymous commit needs an Empty group
	}
	if !txn && g.state == stateCompletingRebalance {
		// The member has its new generation but not yet its assignment.
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
