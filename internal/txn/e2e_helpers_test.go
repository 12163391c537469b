package txn_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// These are end-to-end tests of the transaction coordinator through a real
// broker on 127.0.0.1:0 and real clients (franz-go, sarama, kcat) or raw
// kmsg requests where a row needs exact codes or a fixed request version.

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var seq atomic.Int64

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// txnClient is a franz-go transactional producer.
func txnClient(t *testing.T, k *kawatest.Broker, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return k.Client(append([]kgo.Opt{kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produceTxn runs one transaction writing values[i] to partition i%parts of
// topic and ends it with commit.
func produceTxn(t *testing.T, cl *kgo.Client, topic string, parts int32, commit bool, values ...string) {
	t.Helper()
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % parts, Value: []byte(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

// readAll consumes topic from the start with isolation until want records
// arrived (or, with want < 0, until it read every partition to its end, see
// consumeToEnd) and returns the values sorted.
func readAll(t *testing.T, k *kawatest.Broker, topic string, committed bool, want int) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := k.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond), kgo.KeepControlRecords())
	defer cl.Close()
	var got []string
	defer func() {
		if t.Failed() {
			t.Logf("readAll %s (read_committed %v) read %q", topic, committed, got)
		}
	}()
	keep := func(r *kgo.Record) { got = append(got, string(r.Value)) }
	if want < 0 {
		consumeToEnd(t, k, cl, topic, keep)
	} else {
		wait.Until(t, 10*time.Second, fmt.Sprintf("%d records from %s", want, topic), func() bool {
			poll(t, cl, func(r *kgo.Record) {
				if !r.Attrs.IsControl() {
					keep(r)
				}
			})
			return len(got) >= want
		})
	}
	sort.Strings(got)
	return got
}

// consumeToEnd polls cl, which consumes topic from the start keeping control
// records (kgo.KeepControlRecords), until it has returned the record at
// HW-1 of every partition holding records (HWs as of the call), and passes
// every data record to fn. The end is an event, not a quiet spell: under
// read_committed the record at HW-1 is a marker or visible data once the
// LSO reaches HW (an aborted record has its marker before the LSO passes
// it), so this also waits for every transaction on topic to settle.
func consumeToEnd(t *testing.T, k *kawatest.Broker, cl *kgo.Client, topic string, fn func(*kgo.Record)) {
	t.Helper()
	offs, err := k.Admin().ListEndOffsets(ctxT(t), topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("ListOffsets %s: %v", topic, err)
	}
	ends := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			ends[o.Partition] = o.Offset
		}
	})
	reached := map[int32]bool{}
	wait.Until(t, 10*time.Second, fmt.Sprintf("%s read to its end offsets %v", topic, ends), func() bool {
		poll(t, cl, func(r *kgo.Record) {
			if end, ok := ends[r.Partition]; ok && r.Offset >= end-1 {
				reached[r.Partition] = true
			}
			if !r.Attrs.IsControl() {
				fn(r)
			}
		})
		return len(reached) == len(ends)
	})
}

// poll fetches once (up to 300 ms) and passes each record, control records
// included if cl keeps them, to fn; a fetch error fails the test.
func poll(t *testing.T, cl *kgo.Client, fn func(*kgo.Record)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	fs := cl.PollFetches(ctx)
	cancel()
	for _, e := range fs.Errors() {
		if !errors.Is(e.Err, context.DeadlineExceeded) {
			t.Fatalf("fetch %s-%d: %v", e.Topic, e.Partition, e.Err)
		}
	}
	fs.EachRecord(fn)
}

// waitVisible waits until read_committed shows exactly want (sorted).
func waitVisible(t *testing.T, k *kawatest.Broker, topic string, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	got := readAll(t, k, topic, true, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed %s: %q, want %q", topic, got, want)
	}
}

// raw sends kmsg requests with versions capped per key (kversion), for rows
// that need exact codes or an old request version.
type raw struct {
	t  *testing.T
	cl *kgo.Client
}

func newRaw(t *testing.T, k *kawatest.Broker, caps map[kmsg.Key]int16) *raw {
	return &raw{t: t, cl: k.Client(kgo.MaxVersions(rawVersions(caps)))}
}

// rawVersions are the request versions of raw clients: caps over defaults.
func rawVersions(caps map[kmsg.Key]int16) *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3) // v4+ is the brokers' batched form
	v.SetMaxKeyVersion(int16(kmsg.OffsetFetch), 7)        // v8+ batches groups
	// Produce v12 and TxnOffsetCommit v5 enrol implicitly (KIP-890 part 2);
	// raw tests add explicitly and check the part 1 verification.
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	for key, max := range caps {
		v.SetMaxKeyVersion(int16(key), max)
	}
	return v
}

func (r *raw) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	resp, err := r.cl.SeedBrokers()[0].Request(ctxT(r.t), req)
	if err != nil {
		r.t.Fatalf("%T: %v", req, err)
	}
	return resp
}

type pid struct {
	id    int64
	epoch int16
	seq   map[int32]int32 // next sequence per partition
}

// initPID runs InitProducerId for txnID (expected: KIP-360 current pid, or nil).
func (r *raw) initPID(txnID string, timeoutMs int32, expected *pid) (*pid, int16) {
	r.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &txnID, timeoutMs
	if expected != nil {
		req.ProducerID, req.ProducerEpoch = expected.id, expected.epoch
	}
	resp := r.do(req).(*kmsg.InitProducerIDResponse)
	return &pid{id: resp.ProducerID, epoch: resp.ProducerEpoch, seq: map[int32]int32{}}, resp.ErrorCode
}

// mustInit retries CONCURRENT_TRANSACTIONS.
func (r *raw) mustInit(txnID string, timeoutMs int32, expected *pid) *pid {
	r.t.Helper()
	var p *pid
	wait.Until(r.t, 5*time.Second, fmt.Sprintf("InitProducerId(%s) past CONCURRENT_TRANSACTIONS", txnID), func() bool {
		var code int16
		p, code = r.initPID(txnID, timeoutMs, expected)
		if code != 0 && code != kerr.ConcurrentTransactions.Code {
			r.t.Fatalf("InitProducerId(%s): %v", txnID, kerr.ErrorForCode(code))
		}
		return code == 0
	})
	return p
}

func (r *raw) addPartitions(txnID string, p *pid, topic string, parts ...int32) int16 {
	r.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, p.id, p.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := r.do(req).(*kmsg.AddPartitionsToTxnResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (r *raw) endTxn(txnID string, p *pid, commit bool) *kmsg.EndTxnResponse {
	r.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, p.id, p.epoch, commit
	return r.do(req).(*kmsg.EndTxnResponse)
}

// produce sends one batch of values to topic/part from p (transactional if
// txnID is non-nil) with the given base sequence; it returns the error code
// and base offset.
func (r *raw) produce(txnID *string, p *pid, topic string, part int32, baseSeq int32, values ...string) (int16, int64) {
	r.t.Helper()
	return r.produceBatch(txnID, txnID != nil, p, topic, part, baseSeq, values...)
}

// produceBatch is produce with the batch's transactional flag given apart
// from the request's transactional.id.
func (r *raw) produceBatch(txnID *string, transactional bool, p *pid, topic string, part int32, baseSeq int32, values ...string) (int16, int64) {
	r.t.Helper()
	h := batch.Header{ProducerID: p.id, ProducerEpoch: p.epoch, BaseSequence: baseSeq, FirstTimestamp: 1, MaxTimestamp: 1}
	if transactional {
		h.Attributes = 1 << 4 // transactional
	}
	recs := make([]kmsg.Record, len(values))
	for i, v := range values {
		recs[i] = kmsg.Record{Value: []byte(v)}
	}
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = txnID, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, batch.Encode(h, recs)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := r.do(req).(*kmsg.ProduceResponse)
	sp := resp.Topics[0].Partitions[0]
	return sp.ErrorCode, sp.BaseOffset
}

// offsets returns ListOffsets latest for partition part under isolation
// (1 = read_committed).
func (r *raw) latest(topic string, part int32, isolation int8) int64 {
	r.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = part, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := r.do(req).(*kmsg.ListOffsetsResponse)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		r.t.Fatalf("ListOffsets %s-%d: %v", topic, part, kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.Offset
}

// settled waits until read_committed and read_uncommitted latest are equal
// (nothing unstable) and, if want >= 0, equal to want, and returns them; it
// fails the test after 5 s. NB: the partition moves its high watermark and
// LSO asynchronously after an acks=all answer and after a marker is durable,
// so an immediate read may lag. With want < 0 the partition must also hold
// no open transaction (DescribeProducers: no current transaction start
// offset), the state in which the two stay equal until the next write.
func (r *raw) settled(topic string, part int32, want int64) (lso, hw int64) {
	r.t.Helper()
	wait.Until(r.t, 5*time.Second, fmt.Sprintf("%s-%d settled (LSO = HW = %d; -1: any, and no open transaction)", topic, part, want), func() bool {
		lso, hw = r.latest(topic, part, 1), r.latest(topic, part, 0)
		return lso == hw && (want >= 0 && hw == want || want < 0 && !r.openTxn(topic, part))
	})
	return lso, hw
}

// openTxn reports whether a producer has an open transaction on topic/part
// (DescribeProducers, KIP-664).
func (r *raw) openTxn(topic string, part int32) bool {
	r.t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	req.Topics = append(req.Topics, rt)
	sp := r.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		r.t.Fatalf("DescribeProducers %s-%d: %v", topic, part, kerr.ErrorForCode(sp.ErrorCode))
	}
	for _, ap := range sp.ActiveProducers {
		if ap.CurrentTxnStartOffset >= 0 {
			return true
		}
	}
	return false
}

// waitHW waits until read_uncommitted latest reaches want.
func (r *raw) waitHW(topic string, part int32, want int64) {
	r.t.Helper()
	wait.Until(r.t, 5*time.Second, fmt.Sprintf("%s-%d's HW to reach %d", topic, part, want), func() bool { return r.latest(topic, part, 0) >= want })
}

// fetch reads topic/part from offset with isolation (no waiting).
func (r *raw) fetch(topic string, part int32, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	r.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.IsolationLevel, req.MaxWaitMillis = 1<<20, isolation, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = part, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return r.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// fetched is a decoded fetch: data record values with their offsets, and
// control batches seen.
type fetched struct {
	values   []string
	offsets  []int64
	controls int
}

func decode(t *testing.T, p kmsg.FetchResponseTopicPartition) fetched {
	t.Helper()
	var out fetched
	rest := p.RecordBatches
	for len(rest) > 0 {
		h, err := batch.ParseHeader(rest)
		if err != nil {
			t.Fatalf("parse batch: %v", err)
		}
		raw := rest[:h.Size()]
		rest = rest[h.Size():]
		if h.Control() {
			out.controls++
			continue
		}
		recs, err := batch.Records(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			out.values = append(out.values, string(rec.Value))
			out.offsets = append(out.offsets, h.BaseOffset+int64(rec.OffsetDelta))
		}
	}
	return out
}

// describe returns DescribeTransactions for id.
func (r *raw) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	r.t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return r.do(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

// waitState waits until DescribeTransactions shows one of states for id.
func (r *raw) waitState(id string, states ...string) kmsg.DescribeTransactionsResponseTransactionState {
	r.t.Helper()
	var d kmsg.DescribeTransactionsResponseTransactionState
	wait.Until(r.t, 10*time.Second, fmt.Sprintf("%s to reach one of %q", id, states), func() bool {
		d = r.describe(id)
		return d.ErrorCode == 0 && slices.Contains(states, d.State)
	})
	return d
}

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}

// drainThenNext drains topic with a read_committed group consumer, then
// writes one plain record to topic/part and returns the offset the consumer
// receives it at (its position after the drain) and the offset it then
// commits.
func drainThenNext(t *testing.T, k *kawatest.Broker, topic string, part int32) (next, committed int64) {
	t.Helper()
	group := name("g")
	cl := k.Client(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(50*time.Millisecond),
		kgo.KeepControlRecords())
	defer cl.Close()
	consumeToEnd(t, k, cl, topic, func(r *kgo.Record) {
		if r.Partition == part {
			t.Fatalf("drain returned %s-%d@%d %q", r.Topic, r.Partition, r.Offset, r.Value)
		}
	})
	w := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := w.ProduceSync(ctxT(t), &kgo.Record{Topic: topic, Partition: part, Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	next = -1
	wait.Until(t, 10*time.Second, fmt.Sprintf("the consumer to receive the record written to %s-%d", topic, part), func() bool {
		poll(t, cl, func(r *kgo.Record) {
			if r.Partition == part && !r.Attrs.IsControl() {
				next = r.Offset
			}
		})
		return next >= 0
	})
	if err := cl.CommitUncommittedOffsets(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return next, committedOffset(t, k, group, topic, part)
}

// committedOffset is group's committed offset for topic/part (-1 if none).
func committedOffset(t *testing.T, k *kawatest.Broker, group, topic string, part int32) int64 {
	t.Helper()
	os, err := k.Admin().FetchOffsets(ctxT(t), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := os.Lookup(topic, part)
	if !ok {
		return -1
	}
	return o.At
}
