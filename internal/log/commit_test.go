package log

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestGroupCommit: 50 concurrent producers append and wait; the first fsync is held until every append is in,
// so the waiters share fsyncs: strictly fewer fsyncs than appends (here at most two), and all are released.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	const producers = 50
	var logSyncs atomic.Int32
	release := make(chan struct{})
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, logSuffix) {
			logSyncs.Add(1)
			<-release
		}
		return nil
	})
	var mu sync.Mutex
	var notified []int64
	reached := make(chan struct{})
	l := openLog(t, "/p", Options{FS: fs, OnDurable: func(end int64) {
		mu.Lock()
		notified = append(notified, end)
		mu.Unlock()
		if end == 99 {
			close(reached)
		}
	}})

	var appendMu sync.Mutex // the partition lock
	var appended, waited sync.WaitGroup
	appended.Add(producers)
	errs := make(chan error, producers)
	for i := range producers {
		waited.Go(func() {
			appendMu.Lock()
			base, err := l.Append(mkBatch(int32(i%3), int64(i), 100, byte(i)))
			appendMu.Unlock()
			appended.Done()
			if err == nil {
				err = l.WaitDurable(context.Background(), base+int64(i%3)+1)
			}
			errs <- err
		})
	}
	appended.Wait()
	close(release)
	waited.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := logSyncs.Load(); n < 1 || n > 2 {
		t.Fatalf("%d fsyncs for %d appends, want 1 or 2", n, producers)
	}
	if l.DurableEnd() != l.End() || l.End() != 99 {
		t.Fatalf("DurableEnd %d End %d, want 99", l.DurableEnd(), l.End())
	}
	if st := l.Stats(); st.Fsyncs != int64(logSyncs.Load()) || st.FsyncedSize != l.Size() {
		t.Fatalf("Stats %+v, want %d fsyncs of %d bytes", st, logSyncs.Load(), l.Size())
	}
	<-reached // OnDurable runs on the notifier goroutine, after the waiters are released
	mu.Lock()
	defer mu.Unlock()
	if len(notified) == 0 || notified[len(notified)-1] != 99 {
		t.Fatalf("OnDurable calls %v, want increasing and ending at 99", notified)
	}
	for i := 1; i < len(notified); i++ {
		if notified[i] <= notified[i-1] {
			t.Fatalf("OnDurable calls %v not increasing", notified)
		}
	}
}

// TestFsyncErrorSticky: a failed fsync is returned to every waiter and every later Append; nothing is acked.
func TestFsyncErrorSticky(t *testing.T) {
	t.Parallel()
	boom := errors.New("EIO")
	var fail atomic.Bool
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op, name string) error {
		if op == vfs.OpSync && fail.Load() {
			return boom
		}
		return nil
	})
	l := openLog(t, "/p", Options{FS: fs})
	if _, err := l.Append(mkBatch(0, 1, 10, 'a')); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if _, err := l.Append(mkBatch(0, 2, 10, 'b')); err != nil {
		t.Fatal(err) // the write itself succeeds
	}
	for range 3 {
		if err := l.WaitDurable(context.Background(), 2); !errors.Is(err, boom) {
			t.Fatalf("WaitDurable = %v, want the fsync error", err)
		}
	}
	fail.Store(false) // a later fsync would succeed, but the error stays
	if err := l.WaitDurable(context.Background(), 2); !errors.Is(err, boom) {
		t.Fatalf("WaitDurable after recovery of the disk = %v, want the sticky error", err)
	}
	if _, err := l.Append(mkBatch(0, 3, 10, 'c')); !errors.Is(err, boom) {
		t.Fatalf("Append = %v, want the sticky error", err)
	}
	if l.DurableEnd() != 1 {
		t.Fatalf("DurableEnd = %d, want 1", l.DurableEnd())
	}
	if err := l.WaitDurable(context.Background(), 1); err != nil {
		t.Fatalf("WaitDurable for already durable data = %v", err)
	}
	if err := l.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the sticky error", err)
	}
}

// TestWriteErrorSticky: a failed write fails that Append and every later one.
func TestWriteErrorSticky(t *testing.T) {
	t.Parallel()
	boom := errors.New("ENOSPC")
	var fail atomic.Bool
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op, name string) error {
		if op == vfs.OpWrite && strings.HasSuffix(name, logSuffix) && fail.Load() {
			return boom
		}
		return nil
	})
	l := openLog(t, "/p", Options{FS: fs})
	fail.Store(true)
	if _, err := l.Append(mkBatch(0, 1, 10, 'a')); !errors.Is(err, boom) {
		t.Fatalf("Append = %v", err)
	}
	fail.Store(false)
	if _, err := l.Append(mkBatch(0, 1, 10, 'a')); !errors.Is(err, boom) {
		t.Fatalf("second Append = %v, want the sticky error", err)
	}
	if l.End() != 0 {
		t.Fatalf("End = %d", l.End())
	}
	if err := l.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the sticky error", err)
	}
}

// TestWaitDurableContextAndClose: a waiter for data never written ends with its context; Close releases waiters
// for data it fsyncs and answers ErrClosed afterwards.
func TestWaitDurableContextAndClose(t *testing.T) {
	t.Parallel()
	l := openLog(t, "/p", Options{FS: vfs.NewMem()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.WaitDurable(ctx, 5) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitDurable = %v, want context.Canceled", err)
	}
	go func() { done <- l.WaitDurable(context.Background(), 5) }()
	if _, err := l.Append(mkBatch(0, 1, 10, 'a')); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitDurable across Close = %v, want ErrClosed", err)
	}
	if err := l.WaitDurable(context.Background(), 1); err != nil {
		t.Fatalf("WaitDurable for data Close fsynced = %v", err)
	}
	if _, err := l.Append(mkBatch(0, 1, 10, 'a')); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if _, err := l.Read(0, 10, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l := openLog(t, "/data/t-0", Options{FS: fs, SegmentBytes: 100})
	for i := range 5 {
		if _, err := l.Append(mkBatch(0, int64(i), 50, 'x')); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetStart(2); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("/data/t-0"); err == nil {
		t.Fatal("directory still exists")
	}
	if _, err := fs.CrashClone().Stat("/data/t-0"); err == nil {
		t.Fatal("directory removal not durable")
	}
}

// TestCloseWaitsForOnDurable: Close owns the notifier goroutine. A running OnDurable call finishes before Close
// returns, and none starts after it (the partition's Close used to return while a notifier still ran).
func TestCloseWaitsForOnDurable(t *testing.T) {
	t.Parallel()
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		synctest.Test(t, func(t *testing.T) { closeWaitsForOnDurable(t, p) })
	}
}

func closeWaitsForOnDurable(t *testing.T, p FsyncPolicy) {
	var running, afterClose atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	l := openLog(t, "/p", Options{FS: vfs.NewMem(), Fsync: p, OnDurable: func(int64) {
		if afterClose.Load() {
			t.Errorf("%v: OnDurable called after Close returned", p)
		}
		running.Store(true)
		poke(entered)
		<-release
		running.Store(false)
	}})
	if _, err := l.Append(mkBatch(0, 1, 10, 'a')); err != nil {
		t.Fatal(err)
	}
	<-entered // OnDurable is now blocked on release
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	synctest.Wait() // Close has run as far as it can
	select {
	case err := <-closed:
		t.Fatalf("%v: Close returned (%v) while OnDurable was running", p, err)
	default:
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("%v: Close = %v", p, err)
	}
	afterClose.Store(true)
	if running.Load() {
		t.Fatalf("%v: OnDurable still running after Close returned", p)
	}
}
