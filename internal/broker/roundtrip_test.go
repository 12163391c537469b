package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// sent is one acknowledged record and the offset its produce response gave.
type sent struct {
	rec    *kgo.Record
	offset int64
}

// TestRoundTripAcrossRestart is issue 2's first acceptance test: 100k records
// (keys, null values, headers, timestamps) with acks=all into 3 partitions,
// broker closed and reopened on the same directory, every record read back
// byte-identical, in partition order, at the offsets the produce responses
// gave; once per compression codec.
func TestRoundTripAcrossRestart(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			roundTrip(t, c.codec, 100_000)
		})
	}
}

func roundTrip(t *testing.T, codec kgo.CompressionCodec, n int) {
	k := kawatest.NewBroker(t)
	const topic = "rt"
	k.CreateTopic(topic, 3, nil)
	cl := k.Client(kgo.ProducerBatchCompression(codec), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var acked []sent
	var firstErr error
	var wg sync.WaitGroup
	base := time.UnixMilli(1_700_000_000_000)
	for i := 0; i < n; i++ {
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(i % 3),
			Key:       []byte(fmt.Sprintf("key-%d", i)),
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		}
		if i%7 != 0 { // every 7th value is null
			r.Value = bytes.Repeat([]byte{byte(i)}, i%97)
		}
		if i%5 == 0 {
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}, {Key: "empty"}}
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			acked = append(acked, sent{rec: r, offset: r.Offset})
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	if len(acked) != n {
		t.Fatalf("acked %d of %d", len(acked), n)
	}

	k2 := k.Restart()
	want := map[int32]map[int64]*kgo.Record{}
	for _, s := range acked {
		if want[s.rec.Partition] == nil {
			want[s.rec.Partition] = map[int64]*kgo.Record{}
		}
		if _, dup := want[s.rec.Partition][s.offset]; dup {
			t.Fatalf("two records acknowledged at partition %d offset %d", s.rec.Partition, s.offset)
		}
		want[s.rec.Partition][s.offset] = s.rec
	}
	consumer := k2.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	next := map[int32]int64{}
	for got < n {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d before timeout", got, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d (offsets must be dense and in order)", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			w, ok := want[r.Partition][r.Offset]
			if !ok {
				t.Fatalf("partition %d offset %d was never acknowledged", r.Partition, r.Offset)
			}
			sameRecord(t, w, r)
		})
	}
}

func sameRecord(t *testing.T, w, g *kgo.Record) {
	t.Helper()
	if !bytes.Equal(w.Key, g.Key) || !bytes.Equal(w.Value, g.Value) || (w.Value == nil) != (g.Value == nil) {
		t.Fatalf("offset %d: key/value differ: want %q/%q got %q/%q", g.Offset, w.Key, w.Value, g.Key, g.Value)
	}
	if !w.Timestamp.Equal(g.Timestamp) {
		t.Fatalf("offset %d: timestamp %v, want %v", g.Offset, g.Timestamp, w.Timestamp)
	}
	if len(w.Headers) != len(g.Headers) {
		t.Fatalf("offset %d: %d headers, want %d", g.Offset, len(g.Headers), len(w.Headers))
	}
	for i := range w.Headers {
		if w.Headers[i].Key != g.Headers[i].Key || !bytes.Equal(w.Headers[i].Value, g.Headers[i].Value) {
			t.Fatalf("offset %d: header %d differs", g.Offset, i)
		}
	}
}
