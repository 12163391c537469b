package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// produceN writes n records to topic/partition 0 and returns their values by offset.
func produceN(t *testing.T, k *kawatest.Broker, topic string, n int) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := k.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	out := map[int64]string{}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("record-%04d-%s", i, "padding-padding-padding-padding")
		res := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)})
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		out[res[0].Record.Offset] = v
	}
	return out
}

// consumeAll reads partition 0 from the start until end or an error.
func consumeAll(t *testing.T, k *kawatest.Broker, topic string, end int64) (map[int64]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	got := map[int64]string{}
	for int64(len(got)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, ctx.Err()
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return got, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Offset] = string(r.Value) })
	}
	return got, nil
}

// consumeExpect reads partition 0 of topic up to len(want) records and fails
// the test unless every offset in want holds its value.
func consumeExpect(t *testing.T, k *kawatest.Broker, topic string, want map[int64]string) {
	t.Helper()
	got, err := consumeAll(t, k, topic, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	for off, v := range want {
		if got[off] != v {
			t.Fatalf("offset %d: %q, want %q", off, got[off], v)
		}
	}
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(m)
	return m
}

// TestTornTailTruncated (BL-25): garbage and a half batch appended to the
// active segment are cut back to the last valid batch on restart; every
// record keeps its offset and new writes continue at the next offset.
func TestTornTailTruncated(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("torn", 1, nil)
	want := produceN(t, k, "torn", 50)
	k.Close()
	segs := segments(t, filepath.Join(k.Dir, "torn-0"))
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	validSize := st.Size()
	b, _ := os.ReadFile(last)
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b[:len(b)/3]) // a torn copy of earlier batches: a valid-looking header, cut short
	f.Close()

	k2 := k.Restart()
	if st, _ := os.Stat(last); st.Size() != validSize {
		t.Fatalf("segment is %d bytes after recovery, want exactly %d (the last whole batch)", st.Size(), validSize)
	}
	consumeExpect(t, k2, "torn", want)
	again := produceN(t, k2, "torn", 1)
	if _, ok := again[50]; !ok {
		t.Fatalf("write after recovery landed at %v, want offset 50", again)
	}
}

// TestMiddleCorruptionReported (BL-25): a flipped bit in an older segment is
// reported; the partition stops serving (KAFKA_STORAGE_ERROR) instead of
// dropping or renumbering records, and other topics keep working.
func TestMiddleCorruptionReported(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	seg := "16384"
	k.CreateTopic("rot", 1, map[string]*string{"internal.segment.bytes": &seg})
	k.CreateTopic("fine", 1, nil)
	produceN(t, k, "rot", 600)
	fine := produceN(t, k, "fine", 5)
	k.Close()
	segs := segments(t, filepath.Join(k.Dir, "rot-0"))
	if len(segs) < 3 {
		t.Fatalf("want >= 3 segments, have %d", len(segs))
	}
	mid := segs[len(segs)/2]
	b, _ := os.ReadFile(mid)
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(mid, b, 0o644); err != nil {
		t.Fatal(err)
	}

	k2 := k.Restart()
	// kgo retries KAFKA_STORAGE_ERROR internally, so ask with a raw request.
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "rot"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), k2.Client())
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetching a partition with a corrupt middle segment: error %d, want KAFKA_STORAGE_ERROR", code)
	}
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n != 0 {
		t.Fatalf("corrupt partition served %d bytes", n)
	}
	if st, _ := os.Stat(mid); st.Size() != int64(len(b)) {
		t.Fatalf("corrupt middle segment was truncated to %d bytes", st.Size())
	}
	got, err := consumeAll(t, k2, "fine", 5)
	if err != nil || len(got) != len(fine) {
		t.Fatalf("healthy topic after another partition went offline: %d records, %v", len(got), err)
	}
}
