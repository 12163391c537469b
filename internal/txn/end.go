package txn

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// EndTxn answers EndTxn (KIP-98): it records the decision (PrepareCommit or
// PrepareAbort) durably, answers, and writes the markers in the background;
// the transaction then becomes CompleteCommit/CompleteAbort and the next
// transaction may start. Until then requests for the transactional.id wait
// (Config.BusyWait) or get CONCURRENT_TRANSACTIONS.
//
// v2 is transaction version 2 (EndTxn v5+, KIP-890 part 2): the epoch is
// bumped at every EndTxn and the new producer ID and epoch are returned, so a
// delayed request of an earlier transaction can never act on a later one;
// when the epoch is exhausted the transactional.id moves to a new producer ID
// with epoch 0. A TV2 client may also abort when no transaction is open. A
// retry of an EndTxn that completed (its old epoch) is answered with success.
// Without v2 the returned ID and epoch are -1.
//
// Errors: INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
// INVALID_TXN_STATE (e.g. commit with no transaction, commit after abort),
// CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pe ProducerIDEpoch, commit, v2 bool) (ProducerIDEpoch, error) {
	none := ProducerIDEpoch{ProducerID: -1, Epoch: -1}
	if id == "" {
		return none, kerr.InvalidRequest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.lookupLocked(ctx, id, staleProducer(pe, v2))
	if err != nil {
		return none, closedErr(err)
	}
	if t == nil || t.cur.Epoch < 0 {
		return none, kerr.InvalidProducerIDMapping
	}
	if v2 {
		return c.endV2Locked(t, pe, commit)
	}
	m := t.cur
	if err := checkProducer(m, pe); err != nil {
		return none, err
	}
	switch {
	case m.State == Ongoing:
		next := prepared(m, commit)
		next.TxnVersion = 1
		return none, storeErr(c.transitLocked(t, next.State, next))
	case m.State == CompleteCommit && commit, m.State == CompleteAbort && !commit:
		return none, nil // a retry of an EndTxn that completed
	}
	return none, fmt.Errorf("%w: %s in state %s", kerr.InvalidTxnState, endName(commit), m.State)
}

func endName(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// checkProducer is the ID and epoch check of every TV1 request: an unknown
// producer ID is INVALID_PRODUCER_ID_MAPPING, except the one the
// transactional.id rotated away from, which is fenced; any other epoch than
// the current one is PRODUCER_FENCED.
func checkProducer(m Metadata, pe ProducerIDEpoch) error {
	if pe.ProducerID != m.ProducerID {
		if pe.ProducerID == m.PrevProducerID {
			return kerr.ProducerFenced
		}
		return kerr.InvalidProducerIDMapping
	}
	if pe.Epoch != m.Epoch {
		return kerr.ProducerFenced
	}
	return nil
}

// staleProducer reports, for a request from pe, whether m fences it whatever
// m's transition in flight becomes (lookupLocked answers PRODUCER_FENCED at
// once then): an epoch below the current one of its producer ID (epochs only
// grow), or the producer ID the transactional.id rotated away from. Under
// TV2 (v2) the epoch just below a bump that was not a fence, and the
// previous producer ID after a rotation, may be a retry of that EndTxn, so
// they wait for endV2Locked's retry table.
func staleProducer(pe ProducerIDEpoch, v2 bool) func(Metadata) bool {
	return func(m Metadata) bool {
		if pe.ProducerID < 0 || m.Epoch < 0 {
			return false
		}
		retryable := v2 && !m.Fenced
		switch pe.ProducerID {
		case m.ProducerID:
			return pe.Epoch < m.Epoch && !(retryable && pe.Epoch == m.Epoch-1)
		case m.PrevProducerID:
			return !retryable
		}
		return false
	}
}

// prepared is m moving to PrepareCommit or PrepareAbort.
func prepared(m Metadata, commit bool) Metadata {
	next := m.clone()
	next.State, next.Fenced = PrepareAbort, false
	if commit {
		next.State = PrepareCommit
	}
	return next
}

// endV2Locked is EndTxn under transaction version 2 (Kafka's endTransaction
// for TV2, including its retry table: a retry carries the epoch before the
// bump, or the last epoch of the producer ID before a rotation).
func (c *Coordinator) endV2Locked(t *txn, pe ProducerIDEpoch, commit bool) (ProducerIDEpoch, error) {
	none := ProducerIDEpoch{ProducerID: -1, Epoch: -1}
	m := t.cur
	current := ProducerIDEpoch{m.ProducerID, m.Epoch}
	complete := m.State == CompleteCommit || m.State == CompleteAbort
	retryOverflow := complete && !m.Fenced && pe.ProducerID == m.PrevProducerID && pe.Epoch == MaxEpoch-1 && m.Epoch == 0 && m.LastEpoch == pe.Epoch
	if pe.ProducerID != m.ProducerID && !retryOverflow {
		return none, checkProducer(m, pe)
	}
	retryBump := complete && !m.Fenced && pe.ProducerID == m.ProducerID && m.Epoch == pe.Epoch+1
	retry := retryBump || retryOverflow
	if !retry && pe.Epoch != m.Epoch {
		return none, kerr.ProducerFenced
	}
	sameOutcome := (m.State == CompleteCommit) == commit
	switch {
	case retry && sameOutcome:
		return current, nil
	case retry:
		return none, fmt.Errorf("%w: %s retried after the transaction ended the other way", kerr.InvalidTxnState, endName(commit))
	case m.State == Ongoing, !commit && canTransit(m.State, PrepareAbort):
		next, err := c.bumpedLocked(prepared(m, commit))
		if err != nil {
			return none, err
		}
		if m.State != Ongoing {
			next.StartMs = c.nowMs() // an abort with no transaction: start and end now
		}
		if err := c.transitLocked(t, next.State, next); err != nil {
			return none, storeErr(err)
		}
		if next.NextProducerID >= 0 {
			return ProducerIDEpoch{next.NextProducerID, 0}, nil
		}
		return ProducerIDEpoch{next.ProducerID, next.Epoch}, nil
	}
	return none, fmt.Errorf("%w: %s in state %s", kerr.InvalidTxnState, endName(commit), m.State)
}

// bumpedLocked gives a TV2 PrepareCommit/PrepareAbort its bumped epoch (the
// markers carry it) and, when the epoch is exhausted, the producer ID it
// moves to on completion.
func (c *Coordinator) bumpedLocked(next Metadata) (Metadata, error) {
	next.LastEpoch = next.Epoch
	next.Epoch = bump(next.Epoch)
	next.TxnVersion = 2
	next.NextProducerID = -1
	if exhausted(next.LastEpoch) {
		pid, err := c.ids.Next()
		if err != nil {
			return Metadata{}, fmt.Errorf("%w: producer ID allocation: %v", kerr.CoordinatorNotAvailable, err)
		}
		next.NextProducerID = pid
	}
	return next, nil
}

// fenceLocked aborts t's open transaction under an epoch bumped once, so the
// current holder is fenced everywhere: its EndTxn and AddPartitions fail the
// epoch check here and its produce requests fail at every partition that got
// the ABORT marker (and at the KIP-890 verification elsewhere). last is the
// epoch whose holder may still re-initialise (KIP-360/KIP-588), -1 for none.
//
// Only a durable write changes the epoch: a failed write leaves memory as it
// was, so retries of InitProducerId never bump more than once (BL-13).
func (c *Coordinator) fenceLocked(t *txn, last int16) error {
	next := prepared(t.cur, false)
	next.Epoch = bump(t.cur.Epoch)
	next.LastEpoch = last
	next.Fenced = true
	next.TxnVersion = 2
	next.NextProducerID = -1
	return storeErr(c.transitLocked(t, PrepareEpochFence, next))
}
