package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/log"
)

// TestReadCorruptionKeepsChain: a batch damaged on disk after recovery is
// reported by Read as KAFKA_STORAGE_ERROR, and the log's ErrCorruption is
// still in the chain (the partition used to flatten the cause with %v).
func TestReadCorruptionKeepsChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := open(t, dir)
	defer p.Close()
	appendBatch(t, p, txBatch(-1, -1, -1, 3, false))
	appendBatch(t, p, txBatch(-1, -1, -1, 2, false))
	seg, err := os.OpenFile(filepath.Join(dir, "00000000000000000000.log"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seg.WriteAt([]byte{7}, 16); err != nil { // the first batch's magic
		t.Fatal(err)
	}
	seg.Close()
	_, err = p.Read(0, 1<<20, ReadUncommitted)
	if !errors.Is(err, kerr.KafkaStorageError) || !errors.Is(err, log.ErrCorruption) {
		t.Fatalf("Read of a damaged batch = %v; want KafkaStorageError wrapping log.ErrCorruption", err)
	}
	var ce *log.CorruptionError
	if !errors.As(err, &ce) || ce.Pos != 0 {
		t.Fatalf("Read error %v: want a *log.CorruptionError at position 0", err)
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke != kerr.KafkaStorageError {
		t.Fatalf("errors.As(%v) = %v; the broker must see KAFKA_STORAGE_ERROR first", err, ke)
	}
}

// TestWakeOnAppendIsSynchronous: with a policy that acknowledges from the page
// cache the append itself publishes the new HW and closes the wake channel
// before it returns (it used to start a goroutine per append to do so).
func TestWakeOnAppendIsSynchronous(t *testing.T) {
	t.Parallel()
	p, err := Open("t", 0, t.TempDir(), Options{Log: log.Options{Fsync: log.FsyncNever, RetentionMs: -1, RetentionBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 3 {
		wake := p.Wake()
		res := appendBatch(t, p, txBatch(-1, -1, -1, 2, false))
		select {
		case <-wake:
		default:
			t.Fatalf("append %d: wake channel still open after Append returned", i)
		}
		if hw := p.HighWatermark(); hw != res.LastOffset+1 {
			t.Fatalf("append %d: HW %d, want %d", i, hw, res.LastOffset+1)
		}
	}
}
