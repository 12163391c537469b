package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ProducerIDEpoch is a producer ID and epoch handed to a client.
type ProducerIDEpoch struct {
	ProducerID int64
	Epoch      int16
}

// InitProducerID answers InitProducerId for a transactional.id (KIP-98,
// KIP-360). The first call allocates a producer ID with epoch 0; a later call
// bumps the epoch, which fences every holder of an older one. If a
// transaction is open it is aborted first under a bumped epoch and the caller
// gets CONCURRENT_TRANSACTIONS to retry once the abort completed (Kafka's
// PrepareEpochFence). An epoch at or past MaxEpoch-1 is never bumped: the
// transactional.id moves to a new producer ID with epoch 0.
//
// expected (KIP-360, InitProducerId v3+; ProducerID -1 when absent) is the
// caller's current producer ID and epoch: it keeps its producer ID if it is
// the current holder (or the previous one retrying), else PRODUCER_FENCED.
//
// Errors: INVALID_REQUEST (empty id), INVALID_TRANSACTION_TIMEOUT (timeout
// <= 0 or above Config.MaxTimeout), PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
// COORDINATOR_NOT_AVAILABLE (log write failed, or closed).
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, expected ProducerIDEpoch) (ProducerIDEpoch, error) {
	none := ProducerIDEpoch{ProducerID: -1, Epoch: -1}
	if id == "" {
		return none, kerr.InvalidRequest
	}
	if timeout <= 0 || timeout > c.cfg.MaxTimeout {
		return none, fmt.Errorf("%w: transaction.timeout.ms %d must be in (0, %d]", kerr.InvalidTransactionTimeout, timeout.Milliseconds(), c.cfg.MaxTimeout.Milliseconds())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.lookupLocked(ctx, id, nil) // KIP-588 recovery waits for the abort
	if err != nil {
		return none, closedErr(err)
	}
	if t == nil {
		pid, err := c.ids.Next()
		if err != nil {
			return none, fmt.Errorf("%w: producer ID allocation: %v", kerr.CoordinatorNotAvailable, err)
		}
		// In memory only until a transition is durable; epoch -1 marks it
		// as never handed out.
		t = newTxn(id, Metadata{ProducerID: pid, PrevProducerID: -1, NextProducerID: -1, Epoch: -1, LastEpoch: -1, StartMs: -1, UpdateMs: c.nowMs()}.clone())
		c.txns[id] = t
	}
	m := t.cur
	hasExpected := expected.ProducerID >= 0 && expected.Epoch >= 0
	if hasExpected && !validHolder(m, expected) {
		return none, kerr.ProducerFenced
	}
	if m.State == Ongoing {
		// Abort the open transaction under a bumped epoch. A current holder
		// asking (KIP-360) is remembered as the last epoch so its retry
		// succeeds; a new instance asking leaves no such holder.
		last := int16(-1)
		if hasExpected && expected.Epoch == m.Epoch {
			last = m.Epoch
		}
		if err := c.fenceLocked(t, last); err != nil {
			return none, err
		}
		return none, kerr.ConcurrentTransactions
	}
	next, ret, err := c.initTransition(m, expected, hasExpected)
	if err != nil || ret {
		return ProducerIDEpoch{next.ProducerID, next.Epoch}, err
	}
	next.TimeoutMs = int32(timeout.Milliseconds())
	if err := c.transitLocked(t, Empty, next); err != nil {
		return none, storeErr(err)
	}
	return ProducerIDEpoch{next.ProducerID, next.Epoch}, nil
}

// validHolder is Kafka's isValidProducerId: the expected producer ID is the
// current one, or the metadata is fresh (epoch -1, a client recovering from
// UNKNOWN_PRODUCER_ID), or it is the ID before a rotation and its epoch was
// exhausted (a retry of the call that rotated).
func validHolder(m Metadata, e ProducerIDEpoch) bool {
	return m.Epoch == -1 || e.ProducerID == m.ProducerID || (e.ProducerID == m.PrevProducerID && exhausted(e.Epoch))
}

// initTransition computes InitProducerId's new metadata for a state with no
// open transaction (Empty, CompleteCommit, CompleteAbort). ret reports an
// answer with nothing to write (a retry of a call that already succeeded).
func (c *Coordinator) initTransition(m Metadata, e ProducerIDEpoch, hasExpected bool) (next Metadata, ret bool, err error) {
	if !canTransit(m.State, Empty) {
		return Metadata{}, false, fmt.Errorf("%w: InitProducerId in state %s", kerr.InvalidTxnState, m.State)
	}
	if hasExpected && e.ProducerID != m.ProducerID && m.Epoch != -1 {
		// The previous producer ID retrying the call that rotated it.
		if e.Epoch == m.LastEpoch {
			return m, true, nil
		}
		return Metadata{}, false, kerr.ProducerFenced
	}
	holder := !hasExpected || m.Epoch == -1 || e.Epoch == m.Epoch
	switch {
	case holder && exhausted(m.Epoch):
		return c.rotate(m, hasExpected)
	case holder:
		next := emptied(m)
		next.Epoch = m.Epoch + 1
		next.LastEpoch = -1
		if hasExpected {
			next.LastEpoch = m.Epoch
		}
		return next, false, nil
	case e.Epoch == m.LastEpoch && m.Epoch == MaxEpoch:
		// A recognised holder after a fence that used the last epoch.
		return c.rotate(m, true)
	case e.Epoch == m.LastEpoch:
		// A retry of a call that succeeded, or the holder the coordinator
		// fenced on its behalf (KIP-360) or on timeout (KIP-588): it gets
		// the current epoch, which no one else holds.
		return m, true, nil
	}
	return Metadata{}, false, kerr.ProducerFenced
}

// rotate moves the transactional.id to a new producer ID with epoch 0
// (epoch exhaustion; it never wraps).
func (c *Coordinator) rotate(m Metadata, recordLast bool) (Metadata, bool, error) {
	pid, err := c.ids.Next()
	if err != nil {
		return Metadata{}, false, fmt.Errorf("%w: producer ID allocation: %v", kerr.CoordinatorNotAvailable, err)
	}
	next := emptied(m)
	next.PrevProducerID, next.ProducerID, next.Epoch, next.LastEpoch = m.ProducerID, pid, 0, -1
	if recordLast {
		next.LastEpoch = m.Epoch
		if m.Epoch == MaxEpoch && m.LastEpoch >= 0 {
			next.LastEpoch = m.LastEpoch // the epoch the client last saw
		}
	}
	c.lg.Info("producer epoch exhausted, new producer ID", "old_producer_id", m.ProducerID, "producer_id", pid)
	return next, false, nil
}

// emptied is m in state Empty with no transaction.
func emptied(m Metadata) Metadata {
	m = m.clone()
	m.State, m.Fenced, m.NextProducerID, m.StartMs = Empty, false, -1, -1
	clear(m.Partitions)
	clear(m.Groups)
	return m
}
