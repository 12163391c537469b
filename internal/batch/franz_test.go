package batch_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
)

// captureProduce starts a kfake cluster with topic "t" and returns it with
// a func listing the raw record batches of every produce request so far.
func captureProduce(t *testing.T) (*kfake.Cluster, func() [][]byte) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var raw [][]byte
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range tp.Partitions {
				raw = append(raw, append([]byte(nil), p.Records...))
			}
		}
		return nil, nil, false // observe only: kfake handles the request
	})
	return c, func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return append([][]byte(nil), raw...)
	}
}

// The oracle: batches exactly as franz-go's producer puts them on the wire,
// for every codec, must validate and decode back to what was produced.
func TestFranzGoProducedBatches(t *testing.T) {
	t.Parallel()
	codecs := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", name, streaming), func(t *testing.T) {
				t.Parallel()
				testFranzGoCodec(t, codec, streaming, streaming && name == "snappy")
			})
		}
	}
}

// testFranzGoCodec produces with codec and checks every batch on the wire;
// wantXerial asks that at least one batch used the Java-style snappy framing.
func testFranzGoCodec(t *testing.T, codec kgo.CompressionCodec, streaming, wantXerial bool) {
	c, produced := captureProduce(t)
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.DefaultProduceTopic("t"),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(50 * time.Millisecond),
	}
	if streaming {
		// Small batches and one request in flight build the backlog that
		// franz-go merges through its streaming codec (xerial for snappy).
		opts = append(opts, kgo.StreamingCompression(),
			kgo.ProducerBatchMaxBytes(2048),
			kgo.MaxProduceRequestsInflightPerBroker(1))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const n = 300
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{
			Key:     fmt.Appendf(nil, "key-%d", i),
			Value:   bytes.Repeat(fmt.Appendf(nil, "value-%d;", i), i%7+1),
			Headers: []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}},
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The first produce response tells franz-go the version, which it
	// needs before it merges.
	if err := cl.ProduceSync(ctx, recs[0]).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs[1:]...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var got []kmsg.Record
	var xerial int
	for _, raw := range produced() {
		valid, err := batch.Iterate(raw, func(h batch.Header, b []byte) bool {
			vh, err := batch.Validate(b)
			if err != nil {
				t.Fatalf("Validate of a franz-go batch: %v", err)
			}
			if vh != h || h.ProducerID < 0 || h.BaseSequence != int32(len(got)) {
				t.Fatalf("header %+v (Iterate gave %+v), want idempotent sequence %d", vh, h, len(got))
			}
			if bytes.HasPrefix(b[batch.HeaderSize:], []byte("\x82SNAPPY\x00")) {
				xerial++
			}
			rs, err := batch.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rs...)
			return true
		})
		if err != nil || valid != len(raw) {
			t.Fatalf("Iterate = %d, %v over %d bytes", valid, err, len(raw))
		}
	}
	if wantXerial && xerial == 0 {
		t.Fatal("no batch used xerial snappy framing; the streaming path was not exercised")
	}
	if len(got) != n {
		t.Fatalf("decoded %d records, produced %d", len(got), n)
	}
	for i, r := range got {
		w := recs[i]
		if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != string(w.Headers[0].Value) {
			t.Fatalf("record %d = %q/%q, want %q/%q", i, r.Key, r.Value, w.Key, w.Value)
		}
	}
}

// Control batches written by franz-go's fake broker for a committed and an
// aborted transaction parse with ParseControl, and read back from the log
// through Iterate.
func TestFranzGoTransactionMarkers(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.DefaultProduceTopic("t"),
		kgo.TransactionalID("tx"),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	meta.Topics = append(meta.Topics, mt)
	metaResp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rt.TopicID = metaResp.Topics[0].TopicID // fetch v13+ names topics by ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	log := resp.Topics[0].Partitions[0].RecordBatches

	var markers []bool
	valid, err := batch.Iterate(log, func(h batch.Header, b []byte) bool {
		if !h.Control() {
			return true
		}
		commit, _, err := batch.ParseControl(b)
		if err != nil {
			t.Fatalf("ParseControl: %v", err)
		}
		markers = append(markers, commit)
		return true
	})
	if err != nil || valid != len(log) {
		t.Fatalf("Iterate = %d, %v over %d bytes", valid, err, len(log))
	}
	if len(markers) != 2 || !markers[0] || markers[1] {
		t.Fatalf("markers (commit?) = %v, want [true false]", markers)
	}
}
