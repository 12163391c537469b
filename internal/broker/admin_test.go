package broker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

func ptr(s string) *string { return &s }

// randomBytes returns incompressible bytes (kgo compresses with snappy by
// default, so sizes must not shrink).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestTopicAdmin drives CreateTopics, DescribeConfigs, AlterConfigs,
// IncrementalAlterConfigs, CreatePartitions and DeleteTopics through kadm,
// and checks the errors Kafka gives for bad input.
func TestTopicAdmin(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	adm := k.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": ptr("60000")}, "a"); err != nil {
		t.Fatal(err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, nil, "a"); !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate create: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 3, nil, "b"); !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replication 3 on one node: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": ptr("soon")}, "c"); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("bad config value: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": ptr("1")}, "c"); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("unknown config: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, nil, "bad/name"); !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v", r.Err)
	}

	cfg := func() map[string]*kadm.Config {
		rcs, err := adm.DescribeTopicConfigs(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("a", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe: %v %v", err, rc.Err)
		}
		out := map[string]*kadm.Config{}
		for _, c := range rc.Configs {
			c := c
			out[c.Key] = &c
		}
		_ = out
		return out
	}
	c := cfg()
	if v := c["retention.ms"]; v.MaybeValue() != "60000" || v.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms = %q source %v", v.MaybeValue(), v.Source)
	}
	if v := c["segment.bytes"]; v.MaybeValue() != "1073741824" || v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes = %q source %v", v.MaybeValue(), v.Source)
	}

	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: ptr("2048")}, {Op: kadm.DeleteConfig, Name: "retention.ms"}}, "a"); err != nil {
		t.Fatal(err)
	}
	c = cfg()
	if c["max.message.bytes"].MaybeValue() != "2048" || c["retention.ms"].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after incremental alter: max.message.bytes %q, retention.ms source %v", c["max.message.bytes"].MaybeValue(), c["retention.ms"].Source)
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: ptr("compact,bogus")}}, "a")
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("cleanup.policy=compact,bogus: %v %v", err, rs)
	}
	// Non-incremental AlterConfigs replaces the whole override set.
	if _, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: ptr("1048576")}}, "a"); err != nil {
		t.Fatal(err)
	}
	c = cfg()
	if c["segment.bytes"].MaybeValue() != "1048576" || c["max.message.bytes"].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after AlterConfigs: segment.bytes %q, max.message.bytes source %v", c["segment.bytes"].MaybeValue(), c["max.message.bytes"].Source)
	}

	// max.message.bytes is enforced on produce.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: ptr("200")}}, "a"); err != nil {
		t.Fatal(err)
	}
	cl := k.Client(kgo.DefaultProduceTopic("a"), kgo.RecordRetries(1))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: randomBytes(1000)}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("oversize batch: %v, want MESSAGE_TOO_LARGE", err)
	}

	if _, err := adm.CreatePartitions(ctx, 2, "a"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "a")
	if err != nil || len(td["a"].Partitions) != 4 {
		t.Fatalf("after CreatePartitions(+2): %v partitions, %v", len(td["a"].Partitions), err)
	}
	if r, _ := adm.UpdatePartitions(ctx, 3, "a"); !errors.Is(r["a"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking partitions: %v", r)
	}
	if _, err := adm.DeleteTopic(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if td, _ := adm.ListTopics(ctx); td.Has("a") {
		t.Fatal("topic a still listed after delete")
	}
}

// TestOffsetsRetentionDeleteRecords covers ListOffsets (earliest, latest, by
// timestamp, max timestamp), DeleteRecords and retention by bytes.
func TestOffsetsRetentionDeleteRecords(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	// The timestamps below are in the future (2027): Kafka 4's message.timestamp.after.max.ms
	// default (one hour, KIP-1030) would refuse them.
	k.CreateTopic("o", 1, map[string]*string{"internal.segment.bytes": ptr("16384"), "retention.bytes": ptr("40000"),
		"message.timestamp.after.max.ms": ptr("9223372036854775807")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.DefaultProduceTopic("o"), kgo.ProducerLinger(0))
	base := time.UnixMilli(1_800_000_000_000)
	for i := 0; i < 300; i++ {
		ts := base.Add(time.Duration(i) * time.Second)
		if i == 150 {
			ts = base.Add(time.Hour) // the max timestamp
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: randomBytes(500), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := k.Admin()
	one := func(lo kadm.ListedOffsets, err error) kadm.ListedOffset {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("o", 0)
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		return o
	}
	if o := one(adm.ListEndOffsets(ctx, "o")); o.Offset != 300 {
		t.Fatalf("latest %d, want 300", o.Offset)
	}
	if o := one(adm.ListOffsetsAfterMilli(ctx, base.Add(100*time.Second).UnixMilli(), "o")); o.Offset != 100 {
		t.Fatalf("by timestamp: %d, want 100", o.Offset)
	}
	if o := one(adm.ListMaxTimestampOffsets(ctx, "o")); o.Offset != 150 || o.Timestamp != base.Add(time.Hour).UnixMilli() {
		t.Fatalf("max timestamp: offset %d ts %d, want 150 / %d", o.Offset, o.Timestamp, base.Add(time.Hour).UnixMilli())
	}

	k.B.EnforceRetention(time.Now())
	start := one(adm.ListStartOffsets(ctx, "o")).Offset
	if start == 0 || start >= 300 {
		t.Fatalf("log start after retention.bytes: %d", start)
	}
	del, err := adm.DeleteRecords(ctx, kadm.Offsets{"o": {0: {Topic: "o", Partition: 0, At: 250}}})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := del.Lookup("o", 0); d.Err != nil || d.LowWatermark != 250 {
		t.Fatalf("DeleteRecords: %+v", d)
	}
	k2 := k.Restart()
	if o := one(k2.Admin().ListStartOffsets(ctx, "o")); o.Offset != 250 {
		t.Fatalf("log start after restart: %d, want 250 (persisted)", o.Offset)
	}
	// Fetching below the log start is OFFSET_OUT_OF_RANGE.
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "o", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 10, PartitionMaxBytes: 1 << 20}}}}
	resp, err := req.RequestWith(ctx, k2.Client())
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 250 || p.HighWatermark != 300 {
		t.Fatalf("fetch below start: code %d start %d hw %d", p.ErrorCode, p.LogStartOffset, p.HighWatermark)
	}
}

// TestFetchLongPollWokenByAppend: a fetch with min_bytes=1 and a long
// max_wait returns as soon as a record is appended, not at the deadline.
func TestFetchLongPollWokenByAppend(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("lp", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxWaitMillis = 10_000
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "lp", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	done := make(chan *kmsg.FetchResponse, 1)
	start := time.Now()
	go func() {
		resp, err := req.RequestWith(ctx, k.Client())
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	wait.Until(t, 10*time.Second, "the fetch parked in its long poll", func() bool { return k.B.FetchesWaiting() == 1 })
	prod := k.Client(kgo.DefaultProduceTopic("lp"))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	if resp == nil {
		t.FailNow()
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("long poll returned after %v; an append should wake it", el)
	}
	if p := resp.Topics[0].Partitions[0]; len(p.RecordBatches) == 0 || p.HighWatermark != 1 {
		t.Fatalf("woken fetch: %d bytes, hw %d", len(p.RecordBatches), p.HighWatermark)
	}
}

// TestPipelinedRequestsAnsweredInOrder writes 200 requests on one connection
// before reading, and checks the responses come back in request order.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("pipe", 1, nil)
	c := dial(t, k.Addr)
	var frames []byte
	const n = 200
	for i := 0; i < n; i++ {
		var req kmsg.Request
		if i%2 == 0 {
			p := kmsg.NewPtrProduceRequest()
			p.Version = 7
			p.Acks = -1
			p.TimeoutMillis = 5000
			p.Topics = []kmsg.ProduceRequestTopic{{Topic: "pipe", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: rawBatch([]byte(fmt.Sprint(i)))}}}}
			req = p
		} else {
			m := kmsg.NewPtrMetadataRequest()
			m.Version = 9
			req = m
		}
		frames = append(frames, c.frame(req)...)
	}
	c.write(frames)
	for i := 0; i < n; i++ {
		c.id = int32(i + 1)
		var resp kmsg.Response
		if i%2 == 0 {
			r := kmsg.NewPtrProduceResponse()
			r.Version = 7
			resp = r
		} else {
			r := kmsg.NewPtrMetadataResponse()
			r.Version = 9
			resp = r
		}
		if err := c.read(resp); err != nil { // read checks the correlation id
			t.Fatalf("response %d: %v", i, err)
		}
		if r, ok := resp.(*kmsg.ProduceResponse); ok {
			if off := r.Topics[0].Partitions[0].BaseOffset; off != int64(i/2) {
				t.Fatalf("produce %d at offset %d, want %d", i, off, i/2)
			}
		}
	}
}
