package log

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestFlushMessages: with FsyncNever, flush.messages=N fsyncs in Append once N records are unflushed
// (Kafka's UnifiedLog.append), counting records, not batches, and starting over after each fsync (2+2
// records reach 3 and 4); without it no append fsyncs.
func TestFlushMessages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		every int64
		want  int64
	}{{0, 0}, {3, 2}, {1, 5}, {4, 2}, {11, 0}} {
		l := openLog(t, "/f", Options{FS: vfs.NewMem(), Fsync: FsyncNever, FlushMessages: c.every})
		for i := 0; i < 5; i++ {
			if _, err := l.Append(mkBatch(1, 1, 10, 'a')); err != nil { // two records per batch
				t.Fatal(err)
			}
		}
		if got := l.Stats().Fsyncs; got != c.want {
			t.Errorf("flush.messages=%d: %d fsyncs after 10 records in 5 batches, want %d", c.every, got, c.want)
		}
	}
}

// TestFlushAfter: with FsyncNever, flush.ms=d fsyncs unflushed data on the next tick of d (virtual time),
// and not before; a tick with nothing unflushed does not fsync.
func TestFlushAfter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := openLog(t, "/f", Options{FS: vfs.NewMem(), Fsync: FsyncNever, FlushAfter: time.Second})
		if _, err := l.Append(mkBatch(0, 1, 10, 'a')); err != nil {
			t.Fatal(err)
		}
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if got := l.Stats().Fsyncs; got != 0 {
			t.Fatalf("%d fsyncs before flush.ms passed, want 0", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := l.Stats().Fsyncs; got != 1 {
			t.Fatalf("%d fsyncs once flush.ms passed, want 1", got)
		}
		time.Sleep(3 * time.Second) // three more ticks, nothing new to flush
		synctest.Wait()
		if got := l.Stats().Fsyncs; got != 1 {
			t.Fatalf("%d fsyncs after idle ticks, want still 1", got)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
