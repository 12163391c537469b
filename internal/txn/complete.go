package txn

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/producer"
)

// retryBackoff bounds the wait between attempts to write a marker, complete
// a group or write the Complete record.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// complete finishes a decided transaction: it waits for pinned writes, writes
// every marker and completes every group (retrying until each succeeds or
// Close), then records CompleteCommit/CompleteAbort. m is the
// PrepareCommit/PrepareAbort metadata. A decision once recorded is always
// completed, by this goroutine or, after a crash, by the next Load.
func (c *Coordinator) complete(t *txn, m Metadata) {
	defer c.wg.Done()
	c.mu.Lock()
	unpinned := t.unpinnedLocked()
	c.mu.Unlock()
	if !c.wait(unpinned) || !c.wait(c.cfg.StallMarkers) {
		return
	}
	commit := m.State == PrepareCommit
	if !c.writeMarkers(t.id, m, commit) || !c.completeGroups(t.id, m, commit) {
		return
	}
	next := completed(m)
	for backoff := minBackoff; ; backoff = min(2*backoff, maxBackoff) {
		c.mu.Lock()
		err := c.transitLocked(t, next.State, next)
		c.mu.Unlock()
		if err == nil || !c.sleep(backoff) {
			return
		}
	}
}

// completed is the Complete state after m's markers: the transaction's
// partitions and groups are cleared and, if a TV2 end exhausted the epoch,
// the transactional.id moves to its next producer ID with epoch 0 (LastEpoch
// keeps the last epoch the client saw, for retries).
func completed(m Metadata) Metadata {
	next := m.clone()
	next.State = CompleteAbort
	if m.State == PrepareCommit {
		next.State = CompleteCommit
	}
	clear(next.Partitions)
	clear(next.Groups)
	if m.NextProducerID >= 0 {
		next.PrevProducerID, next.ProducerID, next.Epoch = m.ProducerID, m.NextProducerID, 0
		next.NextProducerID = -1
	}
	return next
}

// wait blocks until ch is closed (nil: not at all) or Close; false on Close.
func (c *Coordinator) wait(ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// sleep waits d or until Close; false on Close.
func (c *Coordinator) sleep(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// writeMarkers writes m's marker to every partition of the transaction in
// parallel (each waits for its own fsync) and reports whether all are done.
func (c *Coordinator) writeMarkers(id string, m Metadata, commit bool) bool {
	info := producer.MarkerInfo{
		ProducerID: m.ProducerID, Epoch: m.Epoch, CoordinatorEpoch: c.cfg.CoordinatorEpoch,
		Commit: commit, TxnVersion: m.TxnVersion,
	}
	var wg sync.WaitGroup
	ok := make([]bool, len(m.Partitions))
	for i, tp := range m.SortedPartitions() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = c.retry(func() error { return c.writeMarker(id, tp, info) })
		}()
	}
	wg.Wait()
	for _, v := range ok {
		if !v {
			return false
		}
	}
	return true
}

// writeMarker writes one marker; a partition that is gone, or that a newer
// marker already closed for this producer, is done.
func (c *Coordinator) writeMarker(id string, tp TopicPartition, info producer.MarkerInfo) error {
	err := c.markers.WriteMarker(c.ctx, tp, info)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		c.lg.Info("transaction marker skipped: partition gone", "transactional_id", id, "topic", tp.Topic, "partition", tp.Partition)
		return nil
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.TransactionCoordinatorFenced):
		c.lg.Warn("transaction marker skipped: producer already moved on", "transactional_id", id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return nil
	}
	c.lg.Warn("transaction marker write failed, retrying", "transactional_id", id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
	return err
}

// completeGroups applies the end to every group's staged offsets.
func (c *Coordinator) completeGroups(id string, m Metadata, commit bool) bool {
	for _, g := range m.SortedGroups() {
		ok := c.retry(func() error {
			err := c.groups.CompleteTxn(c.ctx, g, m.ProducerID, commit)
			if err != nil {
				c.lg.Warn("completing group offsets failed, retrying", "transactional_id", id, "group", g, "err", err)
			}
			return err
		})
		if !ok {
			return false
		}
	}
	return true
}

// retry runs fn until it succeeds (true) or Close (false).
func (c *Coordinator) retry(fn func() error) bool {
	for backoff := minBackoff; ; backoff = min(2*backoff, maxBackoff) {
		if fn() == nil {
			return true
		}
		if !c.sleep(backoff) {
			return false
		}
	}
}

// scheduleTimeoutLocked arms t's transaction.timeout.ms, counted from the
// transaction's start, once per transaction.
func (c *Coordinator) scheduleTimeoutLocked(t *txn) {
	if t.timer != nil || c.closed {
		return
	}
	start := t.cur.StartMs
	d := time.Duration(start+int64(t.cur.TimeoutMs)-c.nowMs()) * time.Millisecond
	t.timer = time.AfterFunc(max(d, 0), func() { c.onTimeout(t, start) })
}

// onTimeout aborts t's transaction that started at start if it is still
// open: the epoch is bumped (the producer is fenced: INVALID_PRODUCER_EPOCH
// on produce, PRODUCER_FENCED on EndTxn) and its holder may re-initialise
// with its old epoch (KIP-588). A transition in flight postpones it briefly.
func (c *Coordinator) onTimeout(t *txn, start int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.txns[t.id] != t || t.cur.State != Ongoing || t.cur.StartMs != start {
		return
	}
	// Close sets closed under mu before it waits, so this Add cannot race
	// its Wait.
	c.wg.Add(1)
	defer c.wg.Done()
	t.timer = nil
	if t.pending != noState {
		t.timer = time.AfterFunc(minBackoff, func() { c.onTimeout(t, start) })
		return
	}
	c.lg.Info("aborting timed out transaction", "transactional_id", t.id, "producer_id", t.cur.ProducerID, "epoch", t.cur.Epoch, "timeout_ms", t.cur.TimeoutMs)
	if err := c.fenceLocked(t, t.cur.Epoch); err != nil && t.cur.State == Ongoing && t.timer == nil {
		t.timer = time.AfterFunc(maxBackoff, func() { c.onTimeout(t, start) })
	}
}
