package broker_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// listMaxTimestamp asks ListOffsets v7 for MAX_TIMESTAMP (-3, KIP-734) of topic/0.
func listMaxTimestamp(t *testing.T, cl *kgo.Client, topic string) (offset, timestamp int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets -3: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset, p.Timestamp
}

// TestListOffsetsMaxTimestampFirstRecord: MAX_TIMESTAMP answers the offset of
// the first record holding the largest timestamp, with that timestamp (Kafka
// since KAFKA-16310; 3.7.0 answered the batch's last offset), inside plain and
// compressed batches, and the first batch with the latest append time on a
// LogAppendTime topic.
func TestListOffsetsMaxTimestampFirstRecord(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	base := time.UnixMilli(time.Now().UnixMilli() - 60_000)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	// One batch of 5: the max (base+5) is at offsets 1 and 3, so 1 wins.
	stamps := []time.Time{at(1), at(5), at(2), at(5), at(3)}
	for name, codec := range map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	} {
		t.Run(name, func(t *testing.T) {
			topic := "maxts-" + name
			k.CreateTopic(topic, 1, nil)
			cl := k.Client(kgo.DefaultProduceTopic(topic), kgo.ManualFlushing(), kgo.ProducerBatchCompression(codec))
			produceOneBatch(t, cl, stamps)
			off, ts := listMaxTimestamp(t, cl, topic)
			if off != 1 || ts != at(5).UnixMilli() {
				t.Fatalf("MAX_TIMESTAMP = offset %d ts %d; want offset 1 ts %d", off, ts, at(5).UnixMilli())
			}
		})
	}
	t.Run("LogAppendTime", func(t *testing.T) {
		lat := "LogAppendTime"
		k.CreateTopic("maxts-lat", 1, map[string]*string{"message.timestamp.type": &lat})
		cl := k.Client()
		appendTime := func() int64 { // one batch of 3 records; returns the broker's append time
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ts := base.UnixMilli()
			recs := []kmsg.Record{{Value: []byte("a")}, {Value: []byte("b"), TimestampDelta64: 9}, {Value: []byte("c")}}
			b := batch.Encode(batch.Header{FirstTimestamp: ts, MaxTimestamp: ts + 9, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
			resp, err := rawProduce(9, -1, "maxts-lat", 0, b).RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.LogAppendTime < 0 {
				t.Fatalf("produce: error %d, append time %d", p.ErrorCode, p.LogAppendTime)
			}
			return p.LogAppendTime
		}
		first := appendTime()  // offsets 0-2
		second := appendTime() // offsets 3-5
		// Every record of a batch carries the batch's append time; the earliest
		// batch with the latest append time wins, at its first record.
		want, wantTs := int64(3), second
		if second <= first {
			want, wantTs = 0, first
		}
		off, ts := listMaxTimestamp(t, cl, "maxts-lat")
		if off != want || ts != wantTs {
			t.Fatalf("MAX_TIMESTAMP = offset %d ts %d; want offset %d ts %d (append times %d, %d)",
				off, ts, want, wantTs, first, second)
		}
	})
}

// produceOneBatch produces records with the given timestamps as one batch
// (manual flushing).
func produceOneBatch(t *testing.T, cl *kgo.Client, stamps []time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	var mu sync.Mutex
	for i, ts := range stamps {
		cl.Produce(ctx, &kgo.Record{Value: []byte{byte('a' + i)}, Timestamp: ts}, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("produce: %v", errs)
	}
}

// rawProduce builds a one-partition Produce request of version v to topic/partition.
func rawProduce(v int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = acks
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: records}}}}
	return req
}

// rawFetch fetches topic/0 from offset 0 at version v on c.
func rawFetch(t *testing.T, c *rawConn, v int16, topic string) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.write(c.frame(req))
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := c.read(resp); err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// zstdBatch produces one zstd record through kgo to topic and returns the
// stored batch as a fetch v12 returns it.
func zstdBatch(t *testing.T, k *kawatest.Broker, topic string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := k.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	// Large and repetitive, so kgo keeps the compressed form (it sends
	// uncompressed when compression does not shrink the batch).
	value := bytes.Repeat([]byte("zstd value "), 100)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := rawFetch(t, dial(t, k.Addr), 12, topic)
	if p.ErrorCode != 0 || len(p.RecordBatches) < batch.HeaderSize {
		t.Fatalf("fetch v12 of zstd data: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if h, _ := batch.ParseHeader(p.RecordBatches); h.Codec() != batch.CodecZstd {
		t.Fatalf("kgo wrote codec %d, want zstd", h.Codec())
	}
	return p.RecordBatches
}

// TestZstdNeedsNewVersions: KIP-110. Produce below v7 with a zstd batch is
// UNSUPPORTED_COMPRESSION_TYPE and stores nothing; a fetch below v10 whose
// answer holds zstd data is UNSUPPORTED_COMPRESSION_TYPE; v7 and v10 work.
func TestZstdNeedsNewVersions(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("zsrc", 1, nil)
	k.CreateTopic("zdst", 1, nil)
	zb := zstdBatch(t, k, "zsrc")

	c := dial(t, k.Addr)
	for _, v := range []int16{3, 6} {
		req := rawProduce(v, -1, "zdst", 0, zb)
		c.write(c.frame(req))
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		if err := c.read(resp); err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.UnsupportedCompressionType.Code {
			t.Fatalf("produce v%d of zstd: error %d, want UNSUPPORTED_COMPRESSION_TYPE (76)", v, got)
		}
	}
	if p := rawFetch(t, c, 12, "zdst"); p.HighWatermark != 0 {
		t.Fatalf("refused zstd produce stored data: high watermark %d", p.HighWatermark)
	}
	req := rawProduce(7, -1, "zdst", 0, zb)
	c.write(c.frame(req))
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if err := c.read(resp); err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != 0 {
		t.Fatalf("produce v7 of zstd: error %d", got)
	}

	for _, v := range []int16{4, 9} {
		p := rawFetch(t, c, v, "zdst")
		if p.ErrorCode != kerr.UnsupportedCompressionType.Code || len(p.RecordBatches) != 0 {
			t.Fatalf("fetch v%d of zstd data: error %d with %d bytes, want UNSUPPORTED_COMPRESSION_TYPE and none", v, p.ErrorCode, len(p.RecordBatches))
		}
	}
	if p := rawFetch(t, c, 10, "zdst"); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch v10 of zstd data: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	// Uncompressed data still reaches old fetchers.
	k.CreateTopic("plain", 1, nil)
	req = rawProduce(3, -1, "plain", 0, rawBatch([]byte("p")))
	c.write(c.frame(req))
	if err := c.read(req.ResponseKind()); err != nil {
		t.Fatal(err)
	}
	if p := rawFetch(t, c, 4, "plain"); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch v4 of plain data: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

// TestAcksZeroErrorsCloseConnection: with acks=0 the producer reads no
// response, so Kafka closes the connection when a partition fails
// (KafkaApis.handleProduceRequest); a successful acks=0 produce stays silent.
func TestAcksZeroErrorsCloseConnection(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("a0", 1, nil)
	magic1 := rawBatch([]byte("m"))
	magic1[16] = 1
	corrupt := rawBatch([]byte("c"))
	corrupt[len(corrupt)-1] ^= 0xff
	k.CreateTopic("a0-zstd", 1, nil)
	zb := zstdBatch(t, k, "a0-zstd")
	for name, req := range map[string]*kmsg.ProduceRequest{
		"unknown partition": rawProduce(9, 0, "a0", 7, rawBatch([]byte("x"))),
		"unknown topic":     rawProduce(9, 0, "nope", 0, rawBatch([]byte("x"))),
		"magic 1":           rawProduce(9, 0, "a0", 0, magic1),
		"corrupt":           rawProduce(9, 0, "a0", 0, corrupt),
		"zstd at v6":        rawProduce(6, 0, "a0", 0, zb),
	} {
		c := dial(t, k.Addr)
		c.write(c.frame(req))
		if !c.closed() {
			t.Errorf("acks=0 %s: connection stayed open", name)
		}
	}
	// The silent path: no produce response, and the next request's answer is
	// the next frame on the connection (read checks its correlation ID).
	c := dial(t, k.Addr)
	c.write(c.frame(rawProduce(9, 0, "a0", 0, rawBatch([]byte("ok")))))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	c.write(c.frame(md))
	if err := c.read(md.ResponseKind()); err != nil {
		t.Fatalf("after a good acks=0 produce: %v", err)
	}
	req := rawProduce(9, -1, "a0", 0, rawBatch([]byte("after")))
	c.write(c.frame(req))
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if err := c.read(resp); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("acks=-1 produce after one good acks=0 produce: error %d, base offset %d, want 1 (failed ones store nothing)", p.ErrorCode, p.BaseOffset)
	}
}
