package log

import (
	"errors"
	"fmt"
	"time"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// Close stops the sync goroutine, trims preallocated space from the active segment, flushes the indexes, fsyncs the active segment (whatever the policy) and
// closes every file. Waiters whose data the final fsync covers are released; others get ErrClosed. Chunks from
// earlier Reads become unreadable. Later calls return ErrClosed; a sticky write or fsync error is returned.
// Close stops the notifier goroutine too and waits for a running OnDurable call to return (see
// Options.OnDurable), so no OnDurable call runs after Close returns.
func (l *Log) Close() error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	return l.closeLocked()
}

func (l *Log) closeLocked() error {
	if l.closed.Swap(true) {
		return ErrClosed
	}
	c := &l.commit
	close(c.stop)
	<-c.done
	<-c.notifyDone

	l.wmu.Lock()
	err := l.active.trim()
	if err != nil {
		err = l.commit.fail(err)
	} else {
		err = l.syncAllLocked()
	}
	l.wmu.Unlock()

	c.mu.Lock()
	c.closed = true
	c.broadcastLocked()
	c.mu.Unlock()

	l.closeDoomed(time.Time{}, true)
	l.mu.Lock()
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	errs := []error{err}
	for _, s := range segs {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// Delete closes the log and removes its directory with everything in it (DeleteTopics), then syncs the parent
// directory. It may be called after Close.
func (l *Log) Delete() error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	if err := l.closeLocked(); err != nil && !errors.Is(err, ErrClosed) {
		l.logger.Warn("log: close before delete", "dir", l.dir, "err", err)
	}
	if err := vfs.RemoveAllDurable(l.fs, l.dir); err != nil {
		return fmt.Errorf("log: delete %s: %w", l.dir, err)
	}
	return nil
}
