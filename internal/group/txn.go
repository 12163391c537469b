package group

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit (key 28), versions 0-5. v6 (topic IDs) is handled here but not advertised by the broker.
//
// Behaviour: stages offsets for the producer's open transaction (KIP-98). Staged offsets are durable
// but invisible to OffsetFetch until CompleteTxn commits them; meanwhile a require_stable OffsetFetch
// answers UNSTABLE_OFFSET_COMMIT for their partitions. From v3 (KIP-447) a request carrying a
// generation, member or instance ID is checked against the group like a member's OffsetCommit, so a
// zombie that lost its partitions in a rebalance cannot commit for them (BL-17). Unlike OffsetCommit,
// any group state is accepted (transactions commit across rebalances, BL-15).
//
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (v6), OFFSET_METADATA_TOO_LARGE,
// and for every partition: ILLEGAL_GENERATION (also: unknown group with a generation),
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INVALID_PRODUCER_EPOCH (an older epoch than the one staged),
// INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS; on a consumer group
// (KIP-848) the generation is the member epoch, checked by KIP-1251's rule (validateConsumerCommit),
// and a stale one is ILLEGAL_GENERATION as in Kafka (TxnOffsetCommit has no STALE_MEMBER_EPOCH); a
// request naming no member (generation -1, no member or instance ID) is accepted in any state, as
// Kafka's is.
//
// NB: whether the producer really has an open transaction that added this group (AddOffsetsToTxn) is
// the transaction coordinator's check, made by the broker before calling here.
//
// Version notes: v2 leader epochs, v3 generation, member and instance ID (KIP-447), v6 topic IDs.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, r *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	now := c.now()
	topics := make([]kmsg.OffsetCommitRequestTopic, len(r.Topics))
	for i, t := range r.Topics {
		topics[i] = kmsg.OffsetCommitRequestTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			topics[i].Partitions = append(topics[i].Partitions, kmsg.OffsetCommitRequestTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata})
		}
	}
	parts, out := c.commitParts(r.Version >= 6, topics, func(p kmsg.OffsetCommitRequestTopicPartition) offset {
		o := offset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: deref(p.Metadata), commitTime: now}
		if r.Version < 2 {
			o.leaderEpoch = -1
		}
		return o
	})
	c.commit(ctx, parts, func() *write { return c.txnCommitLocked(r, parts) })
	for _, t := range out {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition(p))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *Coordinator) txnCommitLocked(r *kmsg.TxnOffsetCommitRequest, parts []*commitPart) *write {
	if code := c.availableLocked(); code != 0 {
		setPending(parts, code)
		return nil
	}
	if r.Group == "" {
		setPending(parts, kerr.InvalidGroupID.Code)
		return nil
	}
	gen, memberID, instanceID := r.Generation, r.MemberID, r.InstanceID
	if r.Version < 3 {
		gen, memberID, instanceID = -1, "", nil
	}
	g := c.groups[r.Group]
	if g == nil {
		switch {
		case !anyPending(parts):
			return nil
		case gen >= 0:
			setPending(parts, kerr.IllegalGeneration.Code)
			return nil
		}
		g = c.newGroupLocked(r.Group)
	}
	code := g.validateOffsetCommit(memberID, instanceID, gen, true, r.Version, parts)
	if st := g.txn[r.ProducerID]; code == 0 && st != nil && r.ProducerEpoch < st.epoch {
		code = kerr.InvalidProducerEpoch.Code
	}
	if code != 0 {
		setPending(parts, code)
		return nil
	}
	return c.stageLocked(g, r.ProducerID, r.ProducerEpoch, parts)
}

// stageLocked queues the pending parts as staged records of producer pid.
func (c *Coordinator) stageLocked(g *group, pid int64, epoch int16, parts []*commitPart) *write {
	var recs []Record
	var accepted []*commitPart
	for _, p := range parts {
		if !p.pending() {
			continue
		}
		if !c.storableLocked(p) {
			continue
		}
		recs = append(recs, Record{Key: stagedKey(g.name, pid, p.tp), Value: encodeStagedValue(epoch, p.o)})
		accepted = append(accepted, p)
	}
	if len(recs) == 0 {
		return nil
	}
	g.txnWrites[pid]++
	done := func() {
		if g.txnWrites[pid]--; g.txnWrites[pid] <= 0 {
			delete(g.txnWrites, pid)
		}
	}
	return c.enqueueLocked(g, recs, func(pos int64) {
		done()
		for i, p := range accepted {
			o := p.o
			o.pos = pos + int64(i)
			g.stage(pid, epoch, p.tp, o)
		}
	}, done)
}

// ErrLoading is CompleteTxn's answer while Load runs; the transaction coordinator retries markers.
var ErrLoading = errors.New("group: coordinator loading __consumer_offsets")

// CompleteTxn applies a transaction marker to group's offsets staged by producerID: commit makes each
// the committed offset unless a plain OffsetCommit of that partition was stored after it was staged
// (that later commit stays, as in Kafka), abort drops them so the committed offsets stay. It applies in any
// group state, including mid-rebalance (BL-15), returns once the change is durable, and is idempotent:
// a marker for a producer with nothing staged is a no-op, so the transaction coordinator may resend it.
// Errors: ctx's, the Store's (the staged offsets then stay, and the caller retries), ErrLoading while
// Load runs, ErrClosed after Close.
func (c *Coordinator) CompleteTxn(ctx context.Context, group string, producerID int64, commit bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return ErrClosed
		case c.loading:
			return ErrLoading
		}
		g := c.groups[group]
		if g == nil {
			return nil
		}
		if g.txnWrites[producerID] == 0 {
			w := c.completeTxnLocked(g, producerID, commit)
			if w == nil {
				return nil
			}
			c.mu.Unlock()
			err := w.wait(ctx)
			c.mu.Lock()
			return err
		}
		// A staged write of this producer is still queued: let it land first, so the marker covers
		// every staged key. A marker that missed one would leave it UNSTABLE forever (BL-15).
		w := c.barrierLocked()
		c.mu.Unlock()
		err := w.wait(ctx)
		c.mu.Lock()
		if err != nil {
			return err
		}
	}
}

func (c *Coordinator) completeTxnLocked(g *group, pid int64, commit bool) *write {
	st := g.txn[pid]
	if st == nil || g.state == stateDead { // a Dead group's staged offsets are being tombstoned already
		return nil
	}
	// The records state the outcome per key, so the latest record of each key is the state and a
	// compacted __consumer_offsets replays the same (issue 13): each winning staged offset of a commit as
	// the partition's committed offset record, a tombstone for every staged key, then the marker (which
	// replay then finds nothing staged to apply to; logs written before these records still need it).
	tps := make([]topicPartition, 0, len(st.offsets))
	for tp := range st.offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	var recs []Record
	var won []topicPartition // recs[i] is the offset record of won[i]
	if commit {
		for _, tp := range tps {
			if cur, ok := g.offsets[tp]; !ok || cur.pos < st.offsets[tp].pos {
				recs = append(recs, Record{Key: offsetKey(g.name, tp), Value: encodeOffsetValue(st.offsets[tp])})
				won = append(won, tp)
			}
		}
	}
	for _, tp := range tps {
		recs = append(recs, Record{Key: stagedKey(g.name, pid, tp)})
	}
	recs = append(recs, Record{Key: markerKey(g.name, pid), Value: encodeMarkerValue(commit)})
	return c.enqueueLocked(g, recs, func(pos int64) {
		// As replay will: each won offset is the committed one from its record on, whatever was
		// committed while this write was queued (it is earlier in the log).
		for i, tp := range won {
			o := st.offsets[tp]
			o.pos = pos + int64(i)
			g.offsets[tp] = o
		}
		delete(g.txn, pid)
	}, nil)
}

// stage records a transactional offset of producer pid, as a stored staged record does.
func (g *group) stage(pid int64, epoch int16, tp topicPartition, o offset) {
	st := g.txn[pid]
	if st == nil {
		st = &staged{epoch: epoch, offsets: make(map[topicPartition]offset)}
		g.txn[pid] = st
	}
	st.epoch = max(st.epoch, epoch)
	st.offsets[tp] = o
}

// unstage drops producer pid's staged offset of tp, as a stored staged tombstone does.
func (g *group) unstage(pid int64, tp topicPartition) {
	if st := g.txn[pid]; st != nil {
		delete(st.offsets, tp)
		if len(st.offsets) == 0 {
			delete(g.txn, pid)
		}
	}
}

// completeTxn applies a stored marker of producer pid. On commit each staged offset replaces the
// committed one only if its record is the later of the two in the log (Kafka's rule, see offset.pos):
// a plain OffsetCommit written after the TxnOffsetCommit wins. Abort drops the staged offsets. Replay
// and the live path both come here, so memory and a restart agree.
func (g *group) completeTxn(pid int64, commit bool) {
	st := g.txn[pid]
	if st == nil {
		return
	}
	if commit {
		for tp, o := range st.offsets {
			if cur, ok := g.offsets[tp]; !ok || cur.pos < o.pos {
				g.offsets[tp] = o
			}
		}
	}
	delete(g.txn, pid)
}
