package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// idem names one idempotent producer (producer ID and epoch) in raw-wire
// tests.
type idem struct {
	pid   int64
	epoch int16
}

// batch encodes an uncompressed v2 batch from this producer with base
// sequence seq and one record per value.
func (p idem) batch(seq int32, values ...string) []byte {
	return p.batchAt(time.Now().UnixMilli(), seq, values...)
}

// batchAt is batch with every timestamp set to ts (ms).
func (p idem) batchAt(ts int64, seq int32, values ...string) []byte {
	recs := make([]kmsg.Record, len(values))
	for i, v := range values {
		recs[i] = kmsg.Record{Value: []byte(v)}
	}
	return batch.Encode(batch.Header{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: p.pid, ProducerEpoch: p.epoch, BaseSequence: seq}, recs)
}

// seqValues returns "prefix-i" for i in [from, from+n).
func seqValues(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, from+i)
	}
	return out
}

// initProducer asks the broker for a new producer ID (InitProducerId
// without transactional.id).
func initProducer(t *testing.T, addr string) idem {
	t.Helper()
	return initProducerReq(t, addr, -1, -1)
}

// bumpEpoch is the KIP-360 path: InitProducerId with the current producer
// ID and epoch.
func bumpEpoch(t *testing.T, addr string, p idem) idem {
	t.Helper()
	return initProducerReq(t, addr, p.pid, p.epoch)
}

func initProducerReq(t *testing.T, addr string, pid int64, epoch int16) idem {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = pid, epoch
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId(%d, %d): %v", pid, epoch, err)
	}
	return idem{resp.ProducerID, resp.ProducerEpoch}
}

// idemProduceRequest is an acks=all Produce v8 request of one batch to one
// partition.
func idemProduceRequest(topic string, part int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 8
	req.Acks = -1
	req.TimeoutMillis = 10000
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, records
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.Partitions = topic, []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}

// produceAnswer is one partition's answer to a raw Produce.
type produceAnswer struct {
	corr       int32
	code       int16
	base       int64
	appendTime int64 // LogAppendTime, -1 on CreateTime topics
}

func (p produceAnswer) String() string {
	return fmt.Sprintf("error %v, base offset %d", kerr.ErrorForCode(p.code), p.base)
}

// sendProduce writes an acks=all Produce of records without waiting and
// returns its correlation ID.
func (r *rawConn) sendProduce(topic string, part int32, records []byte) int32 {
	r.write(r.frame(idemProduceRequest(topic, part, records)))
	return r.id
}

// readProduce reads the next Produce v8 response on r, whatever its
// correlation ID (pipelined requests), and returns its one partition.
func (r *rawConn) readProduce() (produceAnswer, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return produceAnswer{}, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, b); err != nil {
		return produceAnswer{}, err
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 8
	if err := resp.ReadFrom(b[4:]); err != nil {
		return produceAnswer{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return produceAnswer{}, fmt.Errorf("produce response with %d topics", len(resp.Topics))
	}
	sp := resp.Topics[0].Partitions[0]
	return produceAnswer{corr: int32(binary.BigEndian.Uint32(b)), code: sp.ErrorCode, base: sp.BaseOffset, appendTime: sp.LogAppendTime}, nil
}

// produce sends one batch and waits for its answer.
func (r *rawConn) produce(topic string, part int32, records []byte) produceAnswer {
	r.t.Helper()
	corr := r.sendProduce(topic, part, records)
	got, err := r.readProduce()
	if err != nil {
		r.t.Fatalf("produce: %v", err)
	}
	if got.corr != corr {
		r.t.Fatalf("produce answered correlation ID %d, want %d", got.corr, corr)
	}
	return got
}

// mustProduce is produce that requires success at base offset want.
func (r *rawConn) mustProduce(topic string, part int32, records []byte, want int64) {
	r.t.Helper()
	if got := r.produce(topic, part, records); got.code != 0 || got.base != want {
		r.t.Fatalf("produce: %v, want success at base offset %d", got, want)
	}
}

// wantCode requires the produce to fail with err and append nothing.
func (r *rawConn) wantCode(topic string, part int32, records []byte, err *kerr.Error) {
	r.t.Helper()
	if got := r.produce(topic, part, records); got.code != err.Code || got.base != -1 {
		r.t.Fatalf("produce: %v, want %s with base offset -1", got, err.Message)
	}
}

// logRecord is one record as read back: offset and value.
type logRecord struct {
	off   int64
	value string
}

// readPartitionLog reads partition part of topic from its log start up to the high
// watermark.
func readPartitionLog(t *testing.T, addr, topic string, part int32) []logRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, part)
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := starts.Lookup(topic, part)
	var out []logRecord
	for int64(len(out)) < end.Offset-start.Offset {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s-%d", len(out), end.Offset-start.Offset, topic, part)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, part, err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, logRecord{r.Offset, string(r.Value)}) })
	}
	return out
}

// wantPartitionLog requires the partition to hold exactly values, from offset first
// on, each once.
func wantPartitionLog(t *testing.T, addr, topic string, part int32, first int64, values []string) {
	t.Helper()
	got := readPartitionLog(t, addr, topic, part)
	if len(got) != len(values) {
		t.Fatalf("%s-%d holds %d records, want %d", topic, part, len(got), len(values))
	}
	for i, r := range got {
		if r.off != first+int64(i) || r.value != values[i] {
			t.Fatalf("%s-%d record %d: offset %d value %q, want offset %d value %q", topic, part, i, r.off, r.value, first+int64(i), values[i])
		}
	}
}

// producersOf returns the producers DescribeProducers reports for one
// partition.
func producersOf(t *testing.T, k *kawatest.Broker, topic string, part int32) kadm.DescribedProducers {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set := kadm.TopicsSet{}
	set.Add(topic, part)
	d, err := k.Admin().DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	dp, ok := d[topic].Partitions[part]
	if !ok || dp.Err != nil {
		t.Fatalf("DescribeProducers %s-%d: present %v, error %v", topic, part, ok, dp.Err)
	}
	return dp.ActiveProducers
}
