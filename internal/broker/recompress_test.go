package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// fetchBatches fetches partition 0 of topic from offset 0 with a raw Fetch and returns the stored
// batches' headers (the codec a fetch returns is the one the log holds).
func fetchBatches(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) []batch.Header {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxWaitMillis, req.MaxBytes = 100, 10<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 10<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s: error %d", topic, p.ErrorCode)
	}
	var hs []batch.Header
	if _, err := batch.Iterate(p.RecordBatches, func(h batch.Header, _ []byte) bool { hs = append(hs, h); return true }); err != nil {
		t.Fatalf("fetched batches of %s: %v", topic, err)
	}
	return hs
}

// TestRecompressToTopicCodec: with compression.type set to a codec, the broker stores (and a fetch
// returns) every batch in that codec whatever the producer used, keeping the records, offsets,
// producer ID, epoch, sequences and transactional bit; compression.type=producer keeps the
// producer's codec.
func TestRecompressToTopicCodec(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		topicCodec string
		level      string // compression.<codec>.level, if any
		producer   kgo.CompressionCodec
		want       int8
	}{
		{"zstd", "", kgo.SnappyCompression(), batch.CodecZstd},
		{"zstd", "19", kgo.GzipCompression(), batch.CodecZstd},
		{"gzip", "1", kgo.ZstdCompression(), batch.CodecGzip},
		{"lz4", "12", kgo.NoCompression(), batch.CodecLz4},
		{"snappy", "", kgo.Lz4Compression(), batch.CodecSnappy},
		{"uncompressed", "", kgo.SnappyCompression(), batch.CodecNone},
		{"producer", "", kgo.SnappyCompression(), batch.CodecSnappy},
	} {
		topic := "re-" + c.topicCodec + c.level
		configs := map[string]*string{"compression.type": ptr(c.topicCodec)}
		if c.level != "" {
			configs["compression."+c.topicCodec+".level"] = ptr(c.level)
		}
		k.CreateTopic(topic, 1, configs)
		cl := k.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.producer),
			kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100*time.Millisecond))
		var recs []*kgo.Record
		for i := 0; i < 50; i++ {
			v := bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), 20) // compressible
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: v,
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", topic, err)
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []*kgo.Record
		for len(got) < len(recs) {
			fs := cl.PollFetches(ctx)
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("%s: %v", topic, errs)
			}
			got = append(got, fs.Records()...)
		}
		for i, r := range got {
			if r.Offset != int64(i) || !bytes.Equal(r.Key, recs[i].Key) || !bytes.Equal(r.Value, recs[i].Value) ||
				len(r.Headers) != 1 || r.Headers[0].Value[0] != byte(i) || int8(r.Attrs.CompressionType()) != c.want ||
				r.ProducerID != pid || r.ProducerEpoch != epoch {
				t.Fatalf("%s: record %d = offset %d key %q codec %d producer %d/%d; want offset %d key %q codec %d producer %d/%d",
					topic, i, r.Offset, r.Key, r.Attrs.CompressionType(), r.ProducerID, r.ProducerEpoch, i, recs[i].Key, c.want, pid, epoch)
			}
		}
		seq := int32(0)
		for _, h := range fetchBatches(t, ctx, cl, topic) {
			if h.Codec() != c.want || h.ProducerID != pid || h.BaseSequence != seq || h.BaseOffset != int64(seq) {
				t.Fatalf("%s: stored batch %+v, want codec %d, producer %d, base sequence and offset %d", topic, h, c.want, pid, seq)
			}
			seq += h.NumRecords
		}
		if seq != int32(len(recs)) {
			t.Fatalf("%s: batches hold %d records, want %d", topic, seq, len(recs))
		}
	}
}

// TestRecompressIdempotentRetry: a retried idempotent batch (snappy, to a zstd topic) is still a
// duplicate answered with its original offset after the broker recompressed the first copy, the next
// sequence is accepted, and the log holds each record once.
func TestRecompressIdempotentRetry(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("idem-z", 1, map[string]*string{"compression.type": ptr("zstd")})
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	snappy := func(seq int32, values ...string) []byte {
		b, err := batch.Compress(p.batch(seq, values...), batch.CodecSnappy)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := snappy(0, "a", "b", "c")
	c.mustProduce("idem-z", 0, first, 0)
	c.mustProduce("idem-z", 0, first, 0) // the retry: a duplicate, original offset
	c.mustProduce("idem-z", 0, snappy(3, "d"), 3)
	wantPartitionLog(t, k.Addr, "idem-z", 0, 0, []string{"a", "b", "c", "d"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs := fetchBatches(t, ctx, k.Client(), "idem-z")
	if len(hs) != 2 || hs[0].Codec() != batch.CodecZstd || hs[0].BaseSequence != 0 || hs[1].BaseSequence != 3 || hs[0].ProducerID != p.pid {
		t.Fatalf("stored batches %+v, want two zstd batches of producer %d at sequences 0 and 3", hs, p.pid)
	}
}

// TestRecompressTransactional: a transactional producer's batches to a zstd topic keep their
// transactional bit through recompression, so read_committed sees committed records only.
func TestRecompressTransactional(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("txn-z", 1, map[string]*string{"compression.type": ptr("zstd")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := k.Client(kgo.DefaultProduceTopic("txn-z"), kgo.TransactionalID("tz"), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	for i, commit := range []bool{false, true} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	cons := k.Client(kgo.ConsumeTopics("txn-z"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	// EndTxn may answer before its markers are written: poll until the committed record shows.
	var recs []*kgo.Record
	for len(recs) == 0 {
		fs := cons.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatal(errs)
		}
		recs = fs.Records()
	}
	if len(recs) != 1 || string(recs[0].Value) != "1" || !recs[0].Attrs.IsTransactional() || recs[0].Attrs.CompressionType() != 4 {
		t.Fatalf("read_committed got %d records (%+v), want only the committed one, transactional and zstd", len(recs), recs)
	}
}

// TestKcatRecompressedTopics: librdkafka (kcat) produces lines snappy-compressed to topics whose
// compression.type is zstd, lz4, gzip and uncompressed, and reads every line back identical from
// the batches the broker recompressed.
func TestKcatRecompressedTopics(t *testing.T) {
	t.Parallel()
	kcat := kcatPath(t)
	k := kawatest.NewBroker(t)
	lines := licenseLines(t, 2000)
	input := strings.Join(lines, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, codec := range []string{"zstd", "lz4", "gzip", "uncompressed"} {
		topic := "kcat-" + codec
		k.CreateTopic(topic, 1, map[string]*string{"compression.type": ptr(codec)})
		prod := exec.Command(kcat, "-P", "-b", k.Addr, "-t", topic, "-p", "0", "-X", "acks=all", "-z", "snappy")
		prod.Stdin = strings.NewReader(input)
		if out, err := prod.CombinedOutput(); err != nil {
			t.Fatalf("%s: kcat -P: %v\n%s", topic, err, out)
		}
		cons := exec.CommandContext(ctx, kcat, "-C", "-b", k.Addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
		var stderr bytes.Buffer
		cons.Stderr = &stderr
		out, err := cons.Output()
		if err != nil {
			t.Fatalf("%s: kcat -C: %v\n%s", topic, err, stderr.String())
		}
		if string(out) != input {
			t.Fatalf("%s: kcat read back %d bytes, want the %d bytes written", topic, len(out), len(input))
		}
		want := map[string]int8{"zstd": batch.CodecZstd, "lz4": batch.CodecLz4, "gzip": batch.CodecGzip, "uncompressed": batch.CodecNone}[codec]
		for _, h := range fetchBatches(t, ctx, k.Client(), topic) {
			if h.Codec() != want {
				t.Fatalf("%s: a stored batch has codec %d, want %d", topic, h.Codec(), want)
			}
		}
	}
}
