package broker_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// smallFS mounts a tmpfs of size bytes for the test, or skips when mounting
// is not permitted (not root, no CAP_SYS_ADMIN).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a %s tmpfs for the disk-full test (needs root): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

type ackedRecord struct {
	offset int64
	value  []byte
}

// produceRaw sends one acks=all Produce of a one-record batch and returns
// the partition's error code and base offset.
func produceRaw(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, value []byte) (int16, int64) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: rawBatch(value)}}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

// fillUntilFull produces 64 KiB records until the broker answers
// KAFKA_STORAGE_ERROR, and returns what was acknowledged.
func fillUntilFull(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) []ackedRecord {
	t.Helper()
	var acked []ackedRecord
	for i := 0; i < 1000; i++ {
		v := randomBytes(64 << 10)
		code, off := produceRaw(t, ctx, cl, topic, v)
		switch code {
		case 0:
			acked = append(acked, ackedRecord{off, v})
		case kerr.KafkaStorageError.Code:
			return acked
		default:
			t.Fatalf("produce on a filling disk: error %v, want none or KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
		}
	}
	t.Fatal("the disk never filled")
	return nil
}

// checkAcked reads the partition from the start and checks that every
// acknowledged record is there, whole, at its offset.
func checkAcked(t *testing.T, ctx context.Context, k *kawatest.Broker, topic string, acked []ackedRecord) {
	t.Helper()
	cons := k.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int64][]byte{}
	last := acked[len(acked)-1].offset
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records before timing out", len(got))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Offset] = r.Value
			done = done || r.Offset >= last
		})
		if done {
			break
		}
	}
	for _, a := range acked {
		if !bytes.Equal(got[a.offset], a.value) {
			t.Fatalf("acknowledged record at offset %d lost or changed (%d bytes read)", a.offset, len(got[a.offset]))
		}
	}
}

// TestDiskFull: with the data dir on a 6 MiB filesystem, produce gets
// KAFKA_STORAGE_ERROR once space runs out; no acknowledged record is lost or
// torn and reads keep working; producing resumes by itself when space is
// freed, without a restart; and the broker restarts on a full disk.
func TestDiskFull(t *testing.T) {
	dir := smallFS(t, "6m")
	// Ballast the test deletes to free space.
	if err := os.WriteFile(filepath.Join(dir, "ballast"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	k := kawatest.NewBroker(t, kawatest.WithDir(filepath.Join(dir, "data")))
	k.CreateTopic("full", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := k.Client()

	acked := fillUntilFull(t, ctx, cl, "full")
	if len(acked) == 0 {
		t.Fatal("nothing fitted before the disk was full")
	}
	// Still full: the next produce fails the same way, and reads work.
	if code, _ := produceRaw(t, ctx, cl, "full", randomBytes(64<<10)); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on a full disk: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	checkAcked(t, ctx, k, "full", acked)

	if err := os.Remove(filepath.Join(dir, "ballast")); err != nil {
		t.Fatal(err)
	}
	v := randomBytes(64 << 10)
	code, off := produceRaw(t, ctx, cl, "full", v)
	if code != 0 {
		t.Fatalf("produce after space was freed: %v, want success without a restart", kerr.ErrorForCode(code))
	}
	acked = append(acked, ackedRecord{off, v})
	acked = append(acked, fillUntilFull(t, ctx, cl, "full")...)
	t.Logf("%d records of 64 KiB acknowledged on a 6 MiB filesystem", len(acked))

	k = k.Restart() // on a full disk
	checkAcked(t, ctx, k, "full", acked)
}
