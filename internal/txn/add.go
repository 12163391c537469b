package txn

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AddPartitions answers AddPartitionsToTxn (v0-v3, and v4+ entries that are
// not verify-only): it adds tps to the producer's transaction, opening one
// if none is (the transaction's timeout starts then), and returns once that
// is durable. Partitions already in an Ongoing transaction are answered at
// once. The broker checks that the partitions exist before calling.
//
// Errors (for every partition alike): INVALID_REQUEST,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS
// (markers of the previous transaction still being written),
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pe ProducerIDEpoch, tps []TopicPartition) error {
	return c.add(ctx, id, pe, func(m *Metadata) bool {
		added := false
		for _, tp := range tps {
			if _, ok := m.Partitions[tp]; !ok {
				m.Partitions[tp] = struct{}{}
				added = true
			}
		}
		return added
	})
}

// AddOffsets answers AddOffsetsToTxn: it adds group to the transaction, so
// the producer may stage offsets for it (TxnOffsetCommit) and EndTxn
// completes them. Errors as AddPartitions.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pe ProducerIDEpoch, group string) error {
	if group == "" {
		return kerr.InvalidGroupID
	}
	return c.add(ctx, id, pe, func(m *Metadata) bool {
		if _, ok := m.Groups[group]; ok {
			return false
		}
		m.Groups[group] = struct{}{}
		return true
	})
}

// add moves the transaction to Ongoing with what addTo adds; addTo reports
// whether it added anything.
func (c *Coordinator) add(ctx context.Context, id string, pe ProducerIDEpoch, addTo func(*Metadata) bool) error {
	if id == "" {
		return kerr.InvalidRequest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.lookupLocked(ctx, id, staleProducer(pe, false))
	if err != nil {
		return closedErr(err)
	}
	if t == nil || t.cur.Epoch < 0 {
		return kerr.InvalidProducerIDMapping
	}
	if err := checkProducer(t.cur, pe); err != nil {
		return err
	}
	if !canTransit(t.cur.State, Ongoing) {
		return fmt.Errorf("%w: cannot add to a transaction in state %s", kerr.InvalidTxnState, t.cur.State)
	}
	next := t.cur.clone()
	if !addTo(&next) && next.State == Ongoing {
		return nil
	}
	if next.State != Ongoing {
		next.State, next.Fenced, next.StartMs, next.NextProducerID = Ongoing, false, c.nowMs(), -1
	}
	return storeErr(c.transitLocked(t, Ongoing, next))
}

// Verify answers the verify-only form of AddPartitionsToTxn (v4+, KIP-890
// part 1): for each partition nil if it is in the producer's Ongoing
// transaction, else TRANSACTION_ABORTABLE. A wrong producer or state is
// returned as err for all of them: INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED, CONCURRENT_TRANSACTIONS.
func (c *Coordinator) Verify(id string, pe ProducerIDEpoch, tps []TopicPartition) (map[TopicPartition]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.verifyLocked(id, pe)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]error, len(tps))
	for _, tp := range tps {
		out[tp] = nil
		if _, ok := t.cur.Partitions[tp]; !ok || t.cur.State != Ongoing {
			out[tp] = kerr.TransactionAbortable
		}
	}
	return out, nil
}

func (c *Coordinator) verifyLocked(id string, pe ProducerIDEpoch) (*txn, error) {
	if c.closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	t := c.txns[id]
	if t == nil || t.cur.Epoch < 0 {
		return nil, kerr.InvalidProducerIDMapping
	}
	if err := checkProducer(t.cur, pe); err != nil {
		return nil, err
	}
	if t.cur.State == PrepareCommit || t.cur.State == PrepareAbort {
		return nil, kerr.ConcurrentTransactions
	}
	return t, nil
}

// Pin is the KIP-890 part 1 check of a transactional produce to tp (and
// PinGroup of a TxnOffsetCommit to a group): the producer must hold the
// current epoch of id and tp must be in its Ongoing transaction. On success
// the transaction is pinned until release is called: its markers are not
// written before, so the verified write always lands ahead of the marker that
// ends its transaction and can never be left after it (the hanging
// transaction of BL-08). Call release right after the append; do not hold it
// across waits the coordinator could need to finish first.
//
// Errors: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (the broker answers a
// produce with INVALID_PRODUCER_EPOCH), CONCURRENT_TRANSACTIONS (the
// transaction is ending), TRANSACTION_ABORTABLE (not added),
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Pin(id string, pe ProducerIDEpoch, tp TopicPartition) (release func(), err error) {
	return c.pin(id, pe, func(m Metadata) bool { _, ok := m.Partitions[tp]; return ok })
}

// PinGroup is Pin for a TxnOffsetCommit to group (added by AddOffsetsToTxn).
func (c *Coordinator) PinGroup(id string, pe ProducerIDEpoch, group string) (release func(), err error) {
	return c.pin(id, pe, func(m Metadata) bool { _, ok := m.Groups[group]; return ok })
}

func (c *Coordinator) pin(id string, pe ProducerIDEpoch, in func(Metadata) bool) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.verifyLocked(id, pe)
	if err != nil {
		return nil, err
	}
	if t.cur.State != Ongoing || !in(t.cur) {
		return nil, kerr.TransactionAbortable
	}
	t.pins++
	released := false
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if released {
			return
		}
		released = true
		if t.pins--; t.pins == 0 && t.unpinned != nil {
			close(t.unpinned)
			t.unpinned = nil
		}
	}, nil
}

// unpinnedLocked returns a channel closed once t has no pins.
func (t *txn) unpinnedLocked() <-chan struct{} {
	if t.pins == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if t.unpinned == nil {
		t.unpinned = make(chan struct{})
	}
	return t.unpinned
}
