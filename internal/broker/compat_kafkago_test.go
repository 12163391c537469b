package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// The segmentio/kafka-go (v0.4) compatibility tests: the Writer, the
// partition and group Readers and the Conn-level APIs run unchanged against
// Kawa (issue 2 §3). kafka-go picks min(its max, broker max) for the
// protocol-package APIs without looking at the broker's min, and pins old
// versions on Conn (Fetch v10, ListOffsets v1, Metadata v6, JoinGroup v2,
// SyncGroup/Heartbeat/LeaveGroup/FindCoordinator v0, OffsetCommit v2,
// OffsetFetch v1, CreateTopics v2, DeleteTopics v1), so every one of those
// must be inside Kawa's table. Admin APIs are in compat_kafkago_admin_test.go.

// kafkagoMessages returns n messages with a key, value and header derived
// from i, plus a null-value record every 7th.
func kafkagoMessages(n int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{
			Key:     []byte(fmt.Sprintf("k%d", i)),
			Value:   []byte(fmt.Sprintf("value-%d", i)),
			Headers: []kafka.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}},
		}
		if i%7 == 3 {
			msgs[i].Value = nil
		}
	}
	return msgs
}

// kafkagoCheck asserts got[i] is want[i] at offset base+i on partition.
func kafkagoCheck(t *testing.T, got, want []kafka.Message, partition int, base int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		w := want[i]
		if m.Partition != partition || m.Offset != base+int64(i) || string(m.Key) != string(w.Key) ||
			string(m.Value) != string(w.Value) || (m.Value == nil) != (w.Value == nil) {
			t.Fatalf("message %d: got p%d@%d %q=%q (nil %v), want p%d@%d %q=%q (nil %v)", i, m.Partition, m.Offset,
				m.Key, m.Value, m.Value == nil, partition, base+int64(i), w.Key, w.Value, w.Value == nil)
		}
		if len(m.Headers) != 1 || m.Headers[0].Key != "i" || string(m.Headers[0].Value) != fmt.Sprint(i+int(base)) {
			t.Fatalf("message %d headers %v", i, m.Headers)
		}
	}
}

// kafkagoRead reads n messages from r.
func kafkagoRead(t *testing.T, ctx context.Context, r *kafka.Reader, n int) []kafka.Message {
	t.Helper()
	out := make([]kafka.Message, 0, n)
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read message %d: %v", len(out), err)
		}
		out = append(out, m)
	}
	return out
}

// TestKafkaGoWriterCodecs: the Writer with RequiredAcks all and each
// compression codec produces batches Kawa stores and a partition Reader
// gets back identical, at consecutive offsets.
func TestKafkaGoWriterCodecs(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	codecs := map[string]kafka.Compression{
		"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd,
	}
	for name := range codecs {
		k.CreateTopic("kgo-codec-"+name, 1, nil)
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topic := "kgo-codec-" + name
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			w := &kafka.Writer{
				Addr: kafka.TCP(k.Addr), Topic: topic, RequiredAcks: kafka.RequireAll,
				Compression: codec, BatchTimeout: time.Millisecond, BatchSize: 1000,
				// NB: kafka.DefaultTransport caches metadata per address for
				// 6 s and is shared by every Writer in the process.
				Transport: &kafka.Transport{},
			}
			defer w.Close()
			msgs := kafkagoMessages(200)
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("write: %v", err)
			}
			// A second call lands after the first batch.
			more := kafkagoMessages(210)[200:]
			if err := w.WriteMessages(ctx, more...); err != nil {
				t.Fatalf("write more: %v", err)
			}
			if st := w.Stats(); st.Errors != 0 || st.Messages != 210 {
				t.Fatalf("writer stats: errors %d, messages %d", st.Errors, st.Messages)
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{k.Addr}, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
			defer r.Close()
			kafkagoCheck(t, kafkagoRead(t, ctx, r, 210), kafkagoMessages(210), 0, 0)
		})
	}
}

// TestKafkaGoPartitionReaderFromOffset: a partition Reader positioned with
// SetOffset reads exactly from there, and Lag/Offset track it.
func TestKafkaGoPartitionReaderFromOffset(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("kgo-offset", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", k.Addr, "kgo-offset", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetRequiredAcks(-1); err != nil {
		t.Fatal(err)
	}
	msgs := kafkagoMessages(20)
	if _, err := conn.WriteMessages(msgs...); err != nil {
		t.Fatalf("conn write: %v", err)
	}

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{k.Addr}, Topic: "kgo-offset", Partition: 1, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(12); err != nil {
		t.Fatal(err)
	}
	kafkagoCheck(t, kafkagoRead(t, ctx, r, 8), msgs[12:], 1, 12)
	if r.Offset() != 20 {
		t.Fatalf("reader offset %d, want 20", r.Offset())
	}
	if lag, err := r.ReadLag(ctx); err != nil || lag != 0 {
		t.Fatalf("ReadLag = %d, %v; want 0", lag, err)
	}
	// At the end, the next read long-polls until a write arrives.
	go func() {
		_, _ = conn.WriteMessages(kafka.Message{Value: []byte("tail"), Headers: []kafka.Header{{Key: "i", Value: []byte("20")}}})
	}()
	m, err := r.ReadMessage(ctx)
	if err != nil || m.Offset != 20 || string(m.Value) != "tail" {
		t.Fatalf("tail read: %d %q %v", m.Offset, m.Value, err)
	}
}

// TestKafkaGoConsumerGroup: two group Readers (JoinGroup v2, SyncGroup v0,
// Heartbeat v0, OffsetCommit v2, OffsetFetch v1, LeaveGroup v0) split a
// 3-partition topic, commit what they read, and a new Reader of the same
// group resumes after the committed offsets.
func TestKafkaGoConsumerGroup(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("kgo-group", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(k.Addr), Topic: "kgo-group", RequiredAcks: kafka.RequireAll,
		Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond}
	defer w.Close()
	const n = 90
	if err := w.WriteMessages(ctx, kafkagoMessages(n)...); err != nil {
		t.Fatal(err)
	}

	newReader := func() *kafka.Reader {
		return kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{k.Addr}, GroupID: "kgo-g", Topic: "kgo-group", MaxWait: 100 * time.Millisecond,
			HeartbeatInterval: 200 * time.Millisecond, SessionTimeout: 6 * time.Second,
			RebalanceTimeout: 2 * time.Second, JoinGroupBackoff: 100 * time.Millisecond,
		})
	}
	r := newReader()
	seen := map[string]bool{}
	for len(seen) < n {
		m, err := r.ReadMessage(ctx) // commits synchronously (CommitInterval 0)
		if err != nil {
			t.Fatalf("group read after %d: %v", len(seen), err)
		}
		if seen[string(m.Key)] {
			t.Fatalf("duplicate %s at p%d@%d", m.Key, m.Partition, m.Offset)
		}
		seen[string(m.Key)] = true
	}
	if err := r.Close(); err != nil { // LeaveGroup
		t.Fatal(err)
	}

	// Committed offsets equal each partition's end offset.
	cl := &kafka.Client{Addr: kafka.TCP(k.Addr)}
	ends, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		"kgo-group": {kafka.LastOffsetOf(0), kafka.LastOffsetOf(1), kafka.LastOffsetOf(2)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	committed, err := cl.ConsumerOffsets(ctx, kafka.TopicAndGroup{Topic: "kgo-group", GroupId: "kgo-g"})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, po := range ends.Topics["kgo-group"] {
		if committed[po.Partition] != po.LastOffset {
			t.Fatalf("partition %d committed %d, end %d", po.Partition, committed[po.Partition], po.LastOffset)
		}
		total += po.LastOffset
	}
	if total != n {
		t.Fatalf("end offsets sum to %d, want %d", total, n)
	}

	// A restarted member resumes after the commits: only new messages.
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("after"), Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	r2 := newReader()
	defer r2.Close()
	m, err := r2.FetchMessage(ctx)
	if err != nil || string(m.Key) != "after" {
		t.Fatalf("resumed read: %q %v", m.Key, err)
	}
	if err := r2.CommitMessages(ctx, m); err != nil {
		t.Fatal(err)
	}
	committed, err = cl.ConsumerOffsets(ctx, kafka.TopicAndGroup{Topic: "kgo-group", GroupId: "kgo-g"})
	if err != nil || committed[m.Partition] != m.Offset+1 {
		t.Fatalf("after explicit commit: %v %v, want p%d=%d", committed, err, m.Partition, m.Offset+1)
	}
}

// TestKafkaGoConn drives the Conn-level APIs: ApiVersions, CreateTopics v2,
// ReadPartitions (Metadata v6), Controller/Brokers, Produce through a leader
// Conn, ListOffsets v1 (first, last, by time), ReadBatch (Fetch v10) and
// DeleteTopics v1.
func TestKafkaGoConn(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := kafka.DialContext(ctx, "tcp", k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	versions, err := conn.ApiVersions()
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[int16]kafka.ApiVersion{}
	for _, v := range versions {
		byKey[v.ApiKey] = v
	}
	if v := byKey[18]; v.MinVersion != 0 || v.MaxVersion != 4 {
		t.Fatalf("ApiVersions advertises itself as %d-%d", v.MinVersion, v.MaxVersion)
	}
	if _, ok := byKey[1]; !ok || len(versions) != len(byKey) {
		t.Fatalf("ApiVersions: %v", versions)
	}

	err = conn.CreateTopics(kafka.TopicConfig{Topic: "kgo-conn", NumPartitions: 3, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "86400000"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Conn.CreateTopics is idempotent: it skips TOPIC_ALREADY_EXISTS.
	if err = conn.CreateTopics(kafka.TopicConfig{Topic: "kgo-conn", NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatalf("second create: %v", err)
	}
	parts, err := conn.ReadPartitions("kgo-conn")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Fatalf("ReadPartitions: %+v", parts)
	}
	for i, p := range parts {
		if p.Topic != "kgo-conn" || p.ID != i || p.Leader.Port == 0 || len(p.Replicas) != 1 || len(p.Isr) != 1 {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	ctrl, err := conn.Controller()
	if err != nil || ctrl.ID != parts[0].Leader.ID {
		t.Fatalf("controller %+v %v, leader %+v", ctrl, err, parts[0].Leader)
	}
	brokers, err := conn.Brokers()
	if err != nil || len(brokers) != 1 || fmt.Sprintf("%s:%d", brokers[0].Host, brokers[0].Port) != k.Addr {
		t.Fatalf("brokers %+v %v, want %s", brokers, err, k.Addr)
	}

	kafkagoConnOffsets(t, ctx, k.Addr)

	if err := conn.DeleteTopics("kgo-conn"); err != nil {
		t.Fatal(err)
	}
	if err := conn.DeleteTopics("kgo-conn"); !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Fatalf("second delete: %v, want UnknownTopicOrPartition", err)
	}
}

// kafkagoConnOffsets writes timestamped messages through a leader Conn and
// checks ListOffsets v1 and Fetch through the same Conn.
func kafkagoConnOffsets(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	leader, err := kafka.DialLeader(ctx, "tcp", addr, "kgo-conn", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	base := time.UnixMilli(1_700_000_000_000)
	msgs := kafkagoMessages(10)
	for i := range msgs {
		msgs[i].Time = base.Add(time.Duration(i) * time.Second)
	}
	if _, err := leader.WriteMessages(msgs...); err != nil {
		t.Fatal(err)
	}
	first, last, err := leader.ReadOffsets()
	if err != nil || first != 0 || last != 10 {
		t.Fatalf("ReadOffsets = %d, %d, %v; want 0, 10", first, last, err)
	}
	if off, err := leader.ReadOffset(base.Add(4500 * time.Millisecond)); err != nil || off != 5 {
		t.Fatalf("ReadOffset(t+4.5s) = %d, %v; want 5", off, err)
	}
	if off, err := leader.ReadOffset(base.Add(time.Hour)); err != nil || off != -1 {
		t.Fatalf("ReadOffset(after last) = %d, %v; want -1", off, err)
	}
	if _, err := leader.Seek(3, kafka.SeekAbsolute); err != nil {
		t.Fatal(err)
	}
	batch := leader.ReadBatch(1, 1<<20)
	if batch.HighWaterMark() != 10 {
		t.Fatalf("batch high watermark %d", batch.HighWaterMark())
	}
	var got []kafka.Message
	for len(got) < 7 {
		m, err := batch.ReadMessage()
		if err != nil {
			t.Fatalf("batch read after %d: %v", len(got), err)
		}
		got = append(got, m)
	}
	_ = batch.Close()
	for i, m := range got {
		if m.Offset != int64(3+i) || !m.Time.Equal(msgs[3+i].Time) || string(m.Key) != string(msgs[3+i].Key) {
			t.Fatalf("batch message %d: @%d %v %q", i, m.Offset, m.Time, m.Key)
		}
	}
}
