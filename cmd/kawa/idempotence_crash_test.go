package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
)

// idemWriter sends raw idempotent Produce requests to a real kawa process,
// so a test can resend byte-identical batches after a crash.
type idemWriter struct {
	t     *testing.T
	topic string
	pid   int64
	epoch int16
	cl    *kgo.Client
	sent  map[int32][]byte // batch by base sequence
}

func newIdemWriter(t *testing.T, addr, topic string) *idemWriter {
	t.Helper()
	w := &idemWriter{t: t, topic: topic, sent: map[int32][]byte{}}
	w.connect(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, w.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	w.pid, w.epoch = resp.ProducerID, resp.ProducerEpoch
	return w
}

// connect points the writer at a (restarted) broker.
func (w *idemWriter) connect(addr string) {
	w.t.Helper()
	w.cl = newClient(w.t, addr)
}

// batch returns the batch of n records from base sequence seq, the same
// bytes every time it is asked for.
func (w *idemWriter) batch(seq int32, n int) []byte {
	if b, ok := w.sent[seq]; ok {
		return b
	}
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i] = kmsg.Record{Value: fmt.Appendf(nil, "v-%d", int(seq)+i)}
	}
	ts := time.Now().UnixMilli()
	b := batch.Encode(batch.Header{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: w.pid, ProducerEpoch: w.epoch, BaseSequence: seq}, recs)
	w.sent[seq] = b
	return b
}

// produce sends the batch of n records at seq (acks=all) and returns the
// partition's error code and base offset.
func (w *idemWriter) produce(seq int32, n int) (int16, int64) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: w.topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: w.batch(seq, n)}}}}
	resp, err := w.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		w.t.Fatalf("produce seq %d: %v", seq, err)
	}
	sp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return sp.ErrorCode, sp.BaseOffset
}

// mustProduce requires success at base offset want.
func (w *idemWriter) mustProduce(seq int32, n int, want int64) {
	w.t.Helper()
	if code, base := w.produce(seq, n); code != 0 || base != want {
		w.t.Fatalf("produce seq %d: %v at base offset %d, want success at %d", seq, kerr.ErrorForCode(code), base, want)
	}
}

// wantIdemLog requires partition 0 of topic to hold "v-i" at offset i for
// every i in [from, to), each once, and nothing else.
func wantIdemLog(t *testing.T, addr, topic string, from, to int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup(topic, 0); end.Offset != to {
		t.Fatalf("log end offset %d, want %d", end.Offset, to)
	}
	for next := from; next < to; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read up to offset %d of %d", next, to)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next || string(r.Value) != fmt.Sprintf("v-%d", next) {
				t.Fatalf("offset %d value %q, want offset %d value v-%d", r.Offset, r.Value, next, next)
			}
			next++
		})
	}
}

// TestIdempotentResendAfterSIGKILL: an idempotent producer writes, kawa is
// stopped (producer snapshot at offset 100), writes on, is SIGKILLed with
// five batches whose answers the client never saw, and restarts (snapshot
// plus a scan of the log after it). The client resends those five batches
// byte for byte: each gets its original offset, the sixth-oldest is
// OUT_OF_ORDER_SEQUENCE_NUMBER, the next sequence is accepted, and the log
// holds every record once.
func TestIdempotentResendAfterSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startKawa(t, dir)
	const topic = "idem-crash"
	createIdemTopic(t, p.Addr, topic)
	w := newIdemWriter(t, p.Addr, topic)
	for seq := int32(0); seq < 100; seq += 5 {
		w.mustProduce(seq, 5, int64(seq))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	p = startKawa(t, dir)
	w.connect(p.Addr)
	for seq := int32(100); seq < 150; seq += 5 {
		w.mustProduce(seq, 5, int64(seq)) // the last five answers are "lost"
	}
	p.Kill()

	p = startKawa(t, dir)
	w.connect(p.Addr)
	for seq := int32(125); seq < 150; seq += 5 {
		w.mustProduce(seq, 5, int64(seq))
	}
	if code, _ := w.produce(120, 5); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("resend of the sixth-oldest batch: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(code))
	}
	w.mustProduce(150, 5, 150)
	wantIdemLog(t, p.Addr, topic, 0, 155)
}

// TestIdempotentStateSurvivesDeleteRecordsAndSIGKILL: DeleteRecords removes
// every batch of a live producer, kawa is SIGKILLed and restarted; the
// producer's last batch still answers as a duplicate (no second copy) and
// its next sequence is accepted. Regression: producer state was only
// snapshotted every 64 MiB and on a clean Close, so after the crash the
// rebuild found neither a snapshot nor the deleted batches, lost the
// producer, and appended the retry again.
func TestIdempotentStateSurvivesDeleteRecordsAndSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startKawa(t, dir)
	const topic = "idem-delete"
	createIdemTopic(t, p.Addr, topic)
	w := newIdemWriter(t, p.Addr, topic)
	for seq := int32(0); seq < 20; seq += 5 {
		w.mustProduce(seq, 5, int64(seq))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 20})
	resp, err := kadm.NewClient(w.cl).DeleteRecords(ctx, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	p.Kill()

	p = startKawa(t, dir)
	w.connect(p.Addr)
	w.mustProduce(15, 5, 15) // the last batch again: its answer was lost
	w.mustProduce(20, 5, 20)
	wantIdemLog(t, p.Addr, topic, 20, 25)
}

func createIdemTopic(t *testing.T, addr, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	segBytes := "4096" // several segments, so recovery scans more than one
	resp, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, 1, 1, map[string]*string{"internal.segment.bytes": &segBytes}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
}
