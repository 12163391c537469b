package verify

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// shareFetchMax is how many records a share member asks for per
// ShareFetch and per poll. With ShareMaxRecordsStrict the client fetches
// only while polled (no prefetch) and at most this many, so the records a
// member holds are the ones its last poll returned: what the history saw.
const shareFetchMax = 50

// shareAckTimeout bounds one FlushAcks; past it the poll's acknowledgements
// have an unknown outcome.
const shareAckTimeout = 10 * time.Second

// isPoison reports whether a share record id is poison: its members always
// release it, so it must end archived at the delivery-count limit. One
// record in 50 per producer.
func isPoison(id string) bool {
	_, seq, ok := splitID(id)
	return ok && seq%50 == 25
}

// runShareMember is one member of a share group (KIP-932) on spec.Topics[0].
// Per poll it emits a deliver event for every record (one write, before any
// acknowledgement, so a crash after the poll still shows the delivery),
// spends spec.ProcDelay, acknowledges every record (poison: release; else
// 10 % release, 10 % reject, 80 % accept; spec.Drain: accept all but
// poison), flushes the acknowledgements and emits a share-ack event per
// record saying whether the broker confirmed it: FlushAcks returned and
// the ack callback reported no error for the record's partition. Anything
// else (flush timed out, the session or broker died, a partition error) is
// an unknown outcome: the ack may or may not have taken effect.
//
// Every record of a poll is acknowledged before the next poll: franz-go
// accepts a poll's unacknowledged records when polled again.
func runShareMember(ctx context.Context, spec WorkerSpec, stop <-chan struct{}, emit Emit) error {
	var mu sync.Mutex
	failed := map[int32]error{}
	opts := append(baseOpts(spec),
		kgo.ConsumeTopics(spec.Topics[0]),
		kgo.ShareGroup(spec.Group),
		kgo.ShareMaxRecords(shareFetchMax),
		kgo.ShareMaxRecordsStrict(),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					failed[r.Partition] = r.Err
				}
			}
		}))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pollCtx, cancel := untilStop(ctx, stop)
	defer cancel()
	rng := workerRand(spec)
	for {
		mu.Lock()
		clear(failed)
		mu.Unlock()
		fs := cl.PollRecords(pollCtx, shareFetchMax)
		if fs.IsClientClosed() {
			return nil
		}
		recs := fs.Records()
		if len(recs) == 0 {
			if pollCtx.Err() != nil {
				return nil
			}
			continue
		}
		evs := make([]Event, 0, len(recs))
		for _, r := range recs {
			id, _ := parseValue(r.Value)
			evs = append(evs, Event{Kind: KindDeliver, ID: id, Topic: r.Topic, Part: r.Partition, Off: r.Offset, Gen: r.DeliveryCount()})
		}
		emit(evs...)
		if !sleepCtx(ctx, spec.ProcDelay) {
			return nil // crashed holding the records
		}
		acks := make([]AckType, len(recs))
		for i, r := range recs {
			acks[i] = shareAckFor(evs[i].ID, spec.Drain, rng.IntN(100))
			r.Ack(kgo.AckStatus(acks[i]))
		}
		// Not pollCtx: a graceful stop still flushes this poll's acks.
		fctx, fcancel := context.WithTimeout(ctx, shareAckTimeout)
		flushErr := cl.FlushAcks(fctx)
		fcancel()
		if ctx.Err() != nil {
			return nil // crashed mid-flush: the outcome was never learned
		}
		mu.Lock()
		for i := range evs {
			e := &evs[i]
			e.Kind, e.Ack = KindShareAck, acks[i]
			switch err := failed[e.Part]; {
			case flushErr != nil:
				e.Err = "flush: " + flushErr.Error()
			case err != nil:
				e.Err = fmt.Sprintf("partition %d: %v", e.Part, err)
			default:
				e.Commit = true
			}
		}
		mu.Unlock()
		emit(evs...)
	}
}

// shareAckFor picks the acknowledgement of one delivery; x is uniform in
// [0, 100).
func shareAckFor(id string, drain bool, x int) AckType {
	switch {
	case isPoison(id):
		return AckRelease
	case drain:
		return AckAccept
	case x < 10:
		return AckRelease
	case x < 20:
		return AckReject
	}
	return AckAccept
}
