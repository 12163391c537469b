package group

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrClosed is returned by Load and CompleteTxn after Close; writes still queued at Close fail with it.
var ErrClosed = errors.New("group: coordinator closed")

// write is one state change waiting to become durable. Changes reach memory only after their records
// are stored, and in queue order (which is log order), so memory is always what a replay of the stored
// log would build. NB: a change is validated when queued but applied later; anything queued in between
// must not invalidate it (see group.inflight and the barrier in CompleteTxn).
type write struct {
	g     *group // owner of the records' keys, for inflight bookkeeping; nil for barriers
	recs  []Record
	apply func(pos int64) // under c.mu, after Append succeeded; pos is the log position of recs[0]
	fail  func()          // under c.mu, after Append failed; may be nil
	done  chan error      // buffered 1; receives the Append result after apply/fail ran
}

// wait blocks until w is stored (nil), failed, or ctx ends.
func (w *write) wait(ctx context.Context) error {
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueueLocked queues recs for the writer and marks their keys in flight on g.
func (c *Coordinator) enqueueLocked(g *group, recs []Record, apply func(pos int64), fail func()) *write {
	w := &write{g: g, recs: recs, apply: apply, fail: fail, done: make(chan error, 1)}
	if g != nil {
		for _, r := range recs {
			g.inflight[string(r.Key)]++
		}
	}
	if c.closed {
		c.finishLocked([]*write{w}, ErrClosed)
		return w
	}
	c.queue = append(c.queue, w)
	c.wake.Signal()
	return w
}

// runWriter is the writer goroutine: it takes everything queued, stores it with one Append (so
// concurrent commits share an fsync), then applies or fails each write in order.
func (c *Coordinator) runWriter() {
	defer close(c.writerDone)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.queue) == 0 && !c.closed {
			c.wake.Wait()
		}
		if c.closed {
			batch := c.queue
			c.queue = nil
			c.finishLocked(batch, ErrClosed)
			return
		}
		batch := c.queue
		c.queue = nil
		c.appending = true
		c.mu.Unlock()
		err := c.appendBatch(batch)
		c.mu.Lock()
		c.appending = false
		c.finishLocked(batch, err)
	}
}

func (c *Coordinator) appendBatch(batch []*write) error {
	var recs []Record
	for _, w := range batch {
		recs = append(recs, w.recs...)
	}
	if len(recs) == 0 {
		return nil // only barriers
	}
	err := c.store.Append(c.writerCtx, recs)
	if err != nil {
		c.cfg.Logger.Error("group: append to __consumer_offsets failed", "records", len(recs), "err", err)
	}
	return err
}

func (c *Coordinator) finishLocked(batch []*write, err error) {
	for _, w := range batch {
		if w.g != nil {
			for _, r := range w.recs {
				k := string(r.Key)
				if w.g.inflight[k]--; w.g.inflight[k] <= 0 {
					delete(w.g.inflight, k)
				}
			}
		}
		pos := c.nextPos
		if err == nil {
			c.nextPos += int64(len(w.recs))
		}
		switch {
		case err == nil && w.apply != nil:
			w.apply(pos)
		case err != nil && w.fail != nil:
			w.fail()
		}
		w.done <- err
	}
}

// barrierLocked queues an empty write: once it is done, every write queued before it is done too.
func (c *Coordinator) barrierLocked() *write {
	return c.enqueueLocked(nil, nil, nil, nil)
}

// storeErrorCode is the Kafka code a request gets when its records could not be stored. Clients retry
// COORDINATOR_NOT_AVAILABLE after looking the coordinator up again, which is the right reaction to a
// transient storage failure (Kafka maps most append errors the same way).
func storeErrorCode(err error) int16 {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// schedule arms fn to run under c.mu after d, replacing the timer in *slot. A callback that lost a race
// with a Stop or a reschedule finds *slot no longer holding its timer and does nothing. Callers hold c.mu.
func (c *Coordinator) schedule(slot **time.Timer, d time.Duration, fn func()) {
	stopTimer(slot)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed || *slot != t {
			return
		}
		*slot = nil
		fn()
	})
	*slot = t
}

func stopTimer(slot **time.Timer) {
	if *slot != nil {
		(*slot).Stop()
		*slot = nil
	}
}
