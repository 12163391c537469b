package verify

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runConsumer is one member of a queue's consumer group. Processing a batch
// means emitting its proc events (one write) and spending spec.ProcDelay.
// at-most-once commits before processing and drops the batch if the commit
// fails; at-least-once processes, then commits. Rebalances are held off
// between poll and commit (BlockRebalanceOnPoll), so a commit never races a
// revocation inside one batch.
func runConsumer(ctx context.Context, spec WorkerSpec, stop <-chan struct{}, emit Emit) error {
	opts := append(baseOpts(spec), groupOpts(spec, spec.Topics[0])...)
	opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pollCtx, cancel := untilStop(ctx, stop)
	defer cancel()
	topicIDs := &topicIDs{adm: kadm.NewClient(cl), ids: map[string][16]byte{}}
	for {
		_, before := cl.GroupMetadata()
		fs := cl.PollRecords(pollCtx, 500)
		if pollCtx.Err() != nil || fs.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		recs := fs.Records()
		if len(recs) > 0 {
			if !consumeBatch(ctx, cl, spec, recs, before, topicIDs, emit) {
				return nil // crashed mid-batch
			}
		}
		cl.AllowRebalance()
	}
}

// consumeBatch processes and commits one polled batch in the semantic's
// order. It returns false if ctx ended (a crash) part way. genBefore is the
// generation before the poll: if the member rejoined while polling, which
// generation the records belong to is unknown, so the batch is not
// committed (at-most-once then drops it).
func consumeBatch(ctx context.Context, cl *kgo.Client, spec WorkerSpec, recs []*kgo.Record, genBefore int32, topicIDs *topicIDs, emit Emit) bool {
	member, gen := cl.GroupMetadata()
	commit := func() error {
		if genBefore > 0 && genBefore != gen { // classic generations start at 1
			return fmt.Errorf("generation moved from %d to %d during the poll", genBefore, gen)
		}
		return commitFenced(ctx, cl, spec.Group, member, gen, recs, topicIDs)
	}
	if spec.Semantic == AtMostOnce {
		err := commit()
		emit(commitEvents(recs, gen, err)...)
		if err != nil {
			return ctx.Err() == nil // commit failed: drop the batch (at most once)
		}
		if !sleepCtx(ctx, spec.ProcDelay) {
			return false
		}
		emit(procEvents(recs, gen, ReadUncommitted)...)
		return true
	}
	emit(procEvents(recs, gen, ReadUncommitted)...)
	if !sleepCtx(ctx, spec.ProcDelay) {
		return false
	}
	err := commit()
	emit(commitEvents(recs, gen, err)...)
	return ctx.Err() == nil
}

// commitFenced commits one past the last record of each partition of recs
// with the member ID and generation the records were polled under.
//
// NB: kgo's CommitRecords sends the client's current generation. A broker
// restart forgets the group's members, the client rejoins (a lost
// assignment, which BlockRebalanceOnPoll does not hold off) and a commit
// of records polled before would go out under the new generation and be
// accepted, possibly moving the committed offset of a partition that now
// belongs to another member backwards. The first runs of kawa verify
// caught exactly that as at-most-once duplicates. A stale generation makes
// the broker refuse the commit instead (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID).
//
// OffsetCommit v10 names topics by ID (KIP-848), so the topic IDs from
// Metadata go along with the names.
func commitFenced(ctx context.Context, cl *kgo.Client, group, member string, gen int32, recs []*kgo.Record, topicIDs *topicIDs) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	idx := map[string]int{}
	for _, r := range recs {
		i, ok := idx[r.Topic]
		if !ok {
			i = len(req.Topics)
			idx[r.Topic] = i
			t := kmsg.NewOffsetCommitRequestTopic()
			id, err := topicIDs.lookup(ctx, r.Topic)
			if err != nil {
				return err
			}
			t.Topic, t.TopicID = r.Topic, id
			req.Topics = append(req.Topics, t)
		}
		t := &req.Topics[i]
		j := slices.IndexFunc(t.Partitions, func(p kmsg.OffsetCommitRequestTopicPartition) bool { return p.Partition == r.Partition })
		if j < 0 {
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition = r.Partition
			t.Partitions = append(t.Partitions, p)
			j = len(t.Partitions) - 1
		}
		if p := &t.Partitions[j]; r.Offset+1 > p.Offset {
			p.Offset, p.LeaderEpoch = r.Offset+1, r.LeaderEpoch
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// topicIDs caches topic IDs from Metadata.
type topicIDs struct {
	adm *kadm.Client
	ids map[string][16]byte
}

// lookup returns the ID of topic; a broker without topic IDs gives zero,
// and then also does not take OffsetCommit v10.
func (t *topicIDs) lookup(ctx context.Context, topic string) ([16]byte, error) {
	if id, ok := t.ids[topic]; ok {
		return id, nil
	}
	details, err := t.adm.ListTopics(ctx, topic)
	if err != nil {
		return [16]byte{}, err
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return [16]byte{}, fmt.Errorf("metadata of %s: %v", topic, d.Err)
	}
	t.ids[topic] = d.ID
	return d.ID, nil
}

// procEvents records that recs were processed.
func procEvents(recs []*kgo.Record, gen int32, iso Isolation) []Event {
	evs := make([]Event, 0, len(recs))
	for _, r := range recs {
		id, _ := parseValue(r.Value)
		evs = append(evs, Event{Kind: KindProc, ID: id, Topic: r.Topic, Part: r.Partition, Off: r.Offset, Gen: gen, Iso: iso})
	}
	return evs
}

// commitEvents records the per-partition offsets a commit of recs carried:
// one past the last record of each partition.
func commitEvents(recs []*kgo.Record, gen int32, err error) []Event {
	type tp struct {
		t string
		p int32
	}
	next := map[tp]int64{}
	var order []tp
	for _, r := range recs {
		k := tp{r.Topic, r.Partition}
		if _, ok := next[k]; !ok {
			order = append(order, k)
		}
		if r.Offset+1 > next[k] {
			next[k] = r.Offset + 1
		}
	}
	evs := make([]Event, 0, len(order))
	for _, k := range order {
		evs = append(evs, Event{Kind: KindCommit, Topic: k.t, Part: k.p, Off: next[k], Gen: gen, Err: errString(err)})
	}
	return evs
}
