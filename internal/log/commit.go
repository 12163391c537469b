package log

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// commitState is the group-commit and sticky-error state shared by the writer, the sync goroutine and waiters.
type commitState struct {
	mu        sync.Mutex    // guards the fields below it
	durable   atomic.Int64  // FsyncAlways: offset below which data is fsynced (written under mu)
	fsynced   int64         // offset below which data is fsynced, whatever the policy
	syncedLen int64         // value of appended at the last fsync
	err       error         // sticky write/fsync error
	closed    bool          // set by Close after its final fsync
	changed   chan struct{} // closed and replaced whenever durable, err or closed change

	appended    atomic.Int64 // bytes appended since Open (written under Log.mu)
	fsyncs      atomic.Int64
	fsyncedSize atomic.Int64

	kick       chan struct{} // capacity 1: "there are new appends" (FsyncAlways)
	notify     chan struct{} // capacity 1: "the durable end may have moved"; nil without OnDurable
	stop       chan struct{} // closed by Close
	done       chan struct{} // closed when the sync goroutine exits
	notifyDone chan struct{} // closed when the notifier goroutine exits (at once without OnDurable)
	notified   int64         // last value passed to OnDurable; owned by the notifier goroutine
}

func (c *commitState) init(end int64, notify bool) {
	c.durable.Store(end)
	c.fsynced = end
	c.notified = end
	c.changed = make(chan struct{})
	c.kick = make(chan struct{}, 1)
	if notify {
		c.notify = make(chan struct{}, 1)
	}
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
	c.notifyDone = make(chan struct{})
	if !notify {
		close(c.notifyDone)
	}
}

func (c *commitState) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// sticky returns the sticky error, if any.
func (c *commitState) sticky() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail records err as the sticky error (the first one wins), wakes every waiter and returns the sticky error.
func (c *commitState) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		c.broadcastLocked()
	}
	return c.err
}

// noteFsynced records that data below end (appendedLen bytes since Open) is on disk.
func (c *commitState) noteFsynced(end, appendedLen int64, p FsyncPolicy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fsyncs.Add(1)
	if appendedLen > c.syncedLen {
		c.fsyncedSize.Add(appendedLen - c.syncedLen)
		c.syncedLen = appendedLen
	}
	if end <= c.fsynced {
		return
	}
	c.fsynced = end
	if p == FsyncAlways {
		c.durable.Store(end)
		c.broadcastLocked()
		c.kickNotify()
	}
}

func (c *commitState) kickSync() { poke(c.kick) }

// kickNotify wakes the notifier goroutine, if there is one.
func (c *commitState) kickNotify() {
	if c.notify != nil {
		poke(c.notify)
	}
}

// poke sends on a capacity-1 channel without blocking: one pending wake-up covers any number of events.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// syncLoop is the log's sync goroutine: it fsyncs the active segment when the policy asks (FsyncAlways: whenever
// there are unsynced appends; FsyncInterval: on each tick). Appends that arrive while an fsync runs are covered
// together by the next one: that is the group commit.
func (l *Log) syncLoop() {
	c := &l.commit
	defer close(c.done)
	var tick <-chan time.Time
	if l.o.Fsync == FsyncInterval {
		t := time.NewTicker(l.o.FsyncInterval)
		defer t.Stop()
		tick = t.C
	}
	var flush <-chan time.Time // FlushAfter (flush.ms) with FsyncNever or FsyncInterval
	if l.o.Fsync != FsyncAlways && l.o.FlushAfter > 0 {
		t := time.NewTicker(l.o.FlushAfter)
		defer t.Stop()
		flush = t.C
	}
	var retry <-chan time.Time // set while an fsync waits for a file descriptor
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
			l.syncOrRetry(&retry)
		case <-tick:
			l.syncOrRetry(&retry)
		case <-flush:
			l.syncOrRetry(&retry)
		case <-retry:
			retry = nil
			l.syncOrRetry(&retry)
		}
	}
}

// syncOrRetry runs syncActive; when it could not open the segment file (out of descriptors, FileCache) it
// arms *retry so the fsync is tried again without waiting for another append.
func (l *Log) syncOrRetry(retry *<-chan time.Time) {
	if err := l.syncActive(); isOpenError(err) && *retry == nil {
		*retry = time.After(10 * time.Millisecond)
	}
}

// notifyLoop is the notifier goroutine (only with OnDurable): it reports each new durable end. It is separate
// from the sync goroutine so that a slow OnDurable never delays the group-commit fsync. Close stops it and waits
// for it, so no call runs after Close returns.
func (l *Log) notifyLoop() {
	c := &l.commit
	defer close(c.notifyDone)
	for {
		select {
		case <-c.stop:
			return
		case <-c.notify:
		}
		if d := l.DurableEnd(); d > c.notified {
			c.notified = d
			l.o.OnDurable(d)
		}
	}
}

// syncActive fsyncs the active segment's .log file if data below End() is not yet fsynced. Older segments were
// fsynced when they rolled. A failure is sticky.
func (l *Log) syncActive() error {
	l.mu.RLock()
	s, end, appended := l.active, l.end.Load(), l.commit.appended.Load()
	l.mu.RUnlock()
	c := &l.commit
	c.mu.Lock()
	// In a raft log internal batches move no offset, so the appended bytes tell what is unsynced too.
	err, done := c.err, c.fsynced >= end && c.syncedLen >= appended
	c.mu.Unlock()
	if err != nil || done {
		return err
	}
	if err := s.log.DataSync(); isOpenError(err) {
		// No fsync ran: the data is unsynced, not lost, and the sync goroutine tries again.
		return err
	} else if err != nil {
		// NB: never retried: after a failed fsync the kernel may have dropped the dirty pages.
		return c.fail(fmt.Errorf("log: fsync %s: %w", s.log.Name(), err))
	}
	c.noteFsynced(end, appended, l.o.Fsync)
	return nil
}

// Err returns the log's sticky write or fsync error: nil while the log is healthy, and once a write or fsync
// failed, that error for good (the fsyncgate lesson: after a failed fsync the kernel may have dropped the dirty
// pages, so nothing written since can be trusted until a restart recovers the log from disk).
func (l *Log) Err() error { return l.commit.sticky() }

// DurableEnd is the offset below which data is durable per the policy: fsynced data for FsyncAlways, End() for
// the others.
func (l *Log) DurableEnd() int64 {
	if l.o.Fsync != FsyncAlways {
		return l.End()
	}
	return l.commit.durable.Load()
}

// WaitDurable blocks until every offset below end is durable per the policy, then returns nil. With FsyncAlways
// it waits for the group-commit fsync covering end; otherwise it returns at once. It returns the sticky write or
// fsync error if one happened before end became durable (never retried into an ack), ErrClosed if the log was
// closed first, or ctx.Err().
func (l *Log) WaitDurable(ctx context.Context, end int64) error {
	c := &l.commit
	if l.o.Fsync != FsyncAlways {
		return c.sticky()
	}
	for {
		c.mu.Lock()
		durable, err, closed, ch := c.durable.Load(), c.err, c.closed, c.changed
		c.mu.Unlock()
		switch {
		case durable >= end:
			return nil
		case err != nil:
			return err
		case closed:
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sync flushes the active segment's indexes and fsyncs its files now, whatever the policy (shutdown, tests).
func (l *Log) Sync() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	return l.syncAllLocked()
}

// syncAllLocked is Sync with wmu held.
func (l *Log) syncAllLocked() error {
	if err := l.commit.sticky(); err != nil {
		return err
	}
	s := l.active
	if err := s.syncAll(); err != nil {
		return l.failUnlessOpen(err)
	}
	l.commit.noteFsynced(l.end.Load(), l.commit.appended.Load(), l.o.Fsync)
	return nil
}
