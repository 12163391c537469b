package broker_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

func withTopicDefaults(kv map[string]string) kawatest.Option {
	return func(c *config.Broker) { c.TopicDefaults = kv }
}

// describeRaw sends DescribeConfigs v4 with synonyms and documentation for one resource.
func describeRaw(t *testing.T, ctx context.Context, cl *kgo.Client, rtype kmsg.ConfigResourceType, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rtype, name
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs %s: %+v", name, resp.Resources)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// TestDescribeTopicConfigSources: every Kafka topic config is described with its value, source,
// is_default, type, documentation and synonyms: an override is DYNAMIC_TOPIC_CONFIG, a broker-level
// default set at start STATIC_BROKER_CONFIG (under its broker name among the synonyms), the rest
// DEFAULT_CONFIG with Kafka's default. The BROKER resource answers the broker-level defaults.
func TestDescribeTopicConfigSources(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, withTopicDefaults(map[string]string{"compression.type": "zstd", "retention.ms": "3600000"}))
	adm, cl := k.Admin(), k.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": ptr("compact"), "unclean.leader.election.enable": ptr("true")}, "t"); err != nil {
		t.Fatal(err)
	}
	got := describeRaw(t, ctx, cl, kmsg.ConfigResourceTypeTopic, "t")
	for _, d := range config.Defs {
		c, ok := got[d.Name]
		if d.Internal {
			if ok {
				t.Errorf("internal %s described for a topic that does not set it", d.Name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s not described", d.Name)
			continue
		}
		if c.ReadOnly || c.IsSensitive || c.Documentation == nil || *c.Documentation == "" || c.ConfigType == 0 || len(c.ConfigSynonyms) == 0 {
			t.Errorf("%s: read_only %v sensitive %v doc %v type %v synonyms %d", d.Name, c.ReadOnly, c.IsSensitive, c.Documentation, c.ConfigType, len(c.ConfigSynonyms))
		}
	}
	type syn struct {
		name, value string
		src         kmsg.ConfigSource
	}
	for name, want := range map[string][]syn{
		"cleanup.policy":                 {{"cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig}, {"log.cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig}},
		"unclean.leader.election.enable": {{"unclean.leader.election.enable", "true", kmsg.ConfigSourceDynamicTopicConfig}, {"unclean.leader.election.enable", "false", kmsg.ConfigSourceDefaultConfig}},
		"compression.type":               {{"compression.type", "zstd", kmsg.ConfigSourceStaticBrokerConfig}, {"compression.type", "producer", kmsg.ConfigSourceDefaultConfig}},
		"retention.ms":                   {{"log.retention.ms", "3600000", kmsg.ConfigSourceStaticBrokerConfig}, {"log.retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig}},
		"segment.bytes":                  {{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig}},
		"message.timestamp.after.max.ms": {{"log.message.timestamp.after.max.ms", "3600000", kmsg.ConfigSourceDefaultConfig}},
		"remote.storage.enable":          {{"remote.storage.enable", "false", kmsg.ConfigSourceDefaultConfig}},
	} {
		c := got[name]
		var have []syn
		for _, s := range c.ConfigSynonyms {
			have = append(have, syn{s.Name, *s.Value, s.Source})
		}
		if len(have) != len(want) || c.Value == nil || *c.Value != want[0].value || c.Source != want[0].src {
			t.Errorf("%s = %v (source %v), synonyms %+v; want synonyms %+v", name, c.Value, c.Source, have, want)
			continue
		}
		for i := range want {
			if have[i] != want[i] {
				t.Errorf("%s synonym %d = %+v, want %+v", name, i, have[i], want[i])
			}
		}
	}
	for name, typ := range map[string]kmsg.ConfigType{"cleanup.policy": kmsg.ConfigTypeList, "compression.type": kmsg.ConfigTypeString,
		"segment.bytes": kmsg.ConfigTypeInt, "retention.ms": kmsg.ConfigTypeLong, "preallocate": kmsg.ConfigTypeBoolean,
		"min.cleanable.dirty.ratio": kmsg.ConfigTypeDouble} {
		if got[name].ConfigType != typ {
			t.Errorf("%s config_type %v, want %v", name, got[name].ConfigType, typ)
		}
	}

	b := describeRaw(t, ctx, cl, kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(k.Config.NodeID)))
	for name, want := range map[string]struct {
		value string
		src   kmsg.ConfigSource
	}{
		"log.retention.ms": {"3600000", kmsg.ConfigSourceStaticBrokerConfig}, "compression.type": {"zstd", kmsg.ConfigSourceStaticBrokerConfig},
		"log.segment.bytes": {"1073741824", kmsg.ConfigSourceDefaultConfig}, "min.insync.replicas": {"1", kmsg.ConfigSourceDefaultConfig},
		"message.max.bytes": {"1048588", kmsg.ConfigSourceDefaultConfig}, "log.cleanup.policy": {"delete", kmsg.ConfigSourceDefaultConfig},
		"log.message.timestamp.type": {"CreateTime", kmsg.ConfigSourceDefaultConfig},
	} {
		c, ok := b[name]
		if !ok || c.Value == nil || *c.Value != want.value || c.Source != want.src || !c.ReadOnly {
			t.Errorf("broker %s = %+v, want %q from %v, read-only", name, c, want.value, want.src)
		}
	}

	// A new topic inherits the broker defaults; CreateTopics v5+ reports them with their source.
	created, err := adm.CreateTopic(ctx, 1, 1, nil, "inherits")
	if err != nil {
		t.Fatal(err)
	}
	_ = created
	rc, err := adm.DescribeTopicConfigs(ctx, "inherits")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc[0].Configs {
		if c.Key == "compression.type" && (c.MaybeValue() != "zstd" || c.Source != kmsg.ConfigSourceStaticBrokerConfig) {
			t.Errorf("inherited compression.type = %q from %v", c.MaybeValue(), c.Source)
		}
	}
}

// TestTopicConfigValidationOnEveryPath: CreateTopics, AlterConfigs and IncrementalAlterConfigs refuse an
// unknown name or a bad value with INVALID_CONFIG and a message naming it, changing nothing;
// IncrementalAlterConfigs APPEND/SUBTRACT edit LIST configs.
func TestTopicConfigValidationOnEveryPath(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	adm := k.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, bad := range []map[string]*string{
		{"nope": ptr("1")}, {"min.insync.replicas": ptr("0")}, {"compression.type": ptr("brotli")},
		{"compression.zstd.level": ptr("23")}, {"message.timestamp.type": ptr("Now")}, {"preallocate": ptr("yes")},
		{"remote.storage.enable": ptr("true")}, {"min.compaction.lag.ms": ptr("10"), "max.compaction.lag.ms": ptr("5")},
		{"message.format.version": ptr("3.0")},
	} {
		resp, err := adm.CreateTopic(ctx, 1, 1, bad, "v")
		if err == nil {
			err = resp.Err
		}
		var name string
		for n := range bad {
			name = n
		}
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, name) {
			t.Errorf("create with %v: %v (%q), want INVALID_CONFIG naming %s", bad, err, resp.ErrMessage, name)
		}
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": ptr("gzip"), "preallocate": ptr("false")}, "v"); err != nil {
		t.Fatal(err)
	}
	describe := func() map[string]string {
		rc, err := adm.DescribeTopicConfigs(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, c := range rc[0].Configs {
			m[c.Key] = c.MaybeValue()
		}
		return m
	}
	for _, bad := range [][]kadm.AlterConfig{
		{{Name: "nope", Value: ptr("1")}},
		{{Name: "compression.type", Value: ptr("lz4")}, {Name: "compression.lz4.level", Value: ptr("18")}},
		{{Op: kadm.AppendConfig, Name: "compression.type", Value: ptr("zstd")}},
		{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: ptr("delete")}}, // leaves an empty list
	} {
		resp, err := adm.AlterTopicConfigs(ctx, bad, "v")
		if err == nil {
			err = alterErr(resp, "v")
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("incremental %+v: %v, want INVALID_CONFIG", bad, err)
		}
		if bad[0].Op != kadm.SetConfig {
			continue // AlterConfigs has no operations
		}
		resp, err = adm.AlterTopicConfigsState(ctx, bad, "v")
		if err == nil {
			err = alterErr(resp, "v")
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("alter %+v: %v, want INVALID_CONFIG", bad, err)
		}
	}
	if m := describe(); m["compression.type"] != "gzip" || m["preallocate"] != "false" {
		t.Fatalf("after refused alters: %v", m)
	}
	for _, step := range []struct {
		op   kadm.AlterConfig
		want string
	}{
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: ptr("compact")}, "compact,delete"},
		{kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: ptr("delete")}, "compact"},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "leader.replication.throttled.replicas", Value: ptr("0:1")}, "0:1"},
	} {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{step.op}, "v")
		if err == nil {
			err = alterErr(resp, "v")
		}
		if err != nil {
			t.Fatalf("%+v: %v", step.op, err)
		}
		if got := describe()[step.op.Name]; got != step.want {
			t.Fatalf("after %+v: %s = %q, want %q", step.op, step.op.Name, got, step.want)
		}
	}
	// A non-incremental AlterConfigs replaces every override: the rest go back to their defaults.
	if resp, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: ptr("1")}}, "v"); err != nil || alterErr(resp, "v") != nil {
		t.Fatal(err, alterErr(resp, "v"))
	}
	if m := describe(); m["compression.type"] != "producer" || m["preallocate"] != "true" || m["cleanup.policy"] != "delete" {
		t.Fatalf("after a replacing AlterConfigs: %v", m)
	}
}

// TestConnectStyleTopics creates the topics Kafka Connect's distributed worker creates through its
// TopicAdmin (offsets, configs and status: compacted, with min.insync.replicas and
// unclean.leader.election.enable from NewTopicBuilder, compression.type=producer as deployments set it,
// partitions 25/1/5 and the broker's replication factor) and a Kafka Streams application's internal
// topics (changelogs: compact, windowed ones compact,delete with retention.ms; repartition topics:
// delete, segment.bytes 50 MiB, retention.ms -1), then checks Connect's own cleanup-policy check
// (DescribeConfigs of cleanup.policy) and a keyed round trip through the compacted topic.
func TestConnectStyleTopics(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	adm := k.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := map[string]*string{"cleanup.policy": ptr("compact"), "compression.type": ptr("producer"),
		"min.insync.replicas": ptr("1"), "unclean.leader.election.enable": ptr("false")}
	for _, c := range []struct {
		topic      string
		partitions int32
		configs    map[string]*string
	}{
		{"connect-offsets", 25, connect}, {"connect-configs", 1, connect}, {"connect-status", 5, connect},
		{"app-store-changelog", 3, map[string]*string{"cleanup.policy": ptr("compact"), "message.timestamp.type": ptr("CreateTime")}},
		{"app-window-changelog", 3, map[string]*string{"cleanup.policy": ptr("compact,delete"), "retention.ms": ptr("172800000"), "message.timestamp.type": ptr("CreateTime")}},
		{"app-repartition", 3, map[string]*string{"cleanup.policy": ptr("delete"), "segment.bytes": ptr("52428800"), "retention.ms": ptr("-1"), "message.timestamp.type": ptr("CreateTime")}},
	} {
		// Connect asks for the broker's replication factor (-1, KIP-464).
		resp, err := adm.CreateTopic(ctx, c.partitions, -1, c.configs, c.topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil || resp.NumPartitions != c.partitions || resp.ReplicationFactor != 1 {
			t.Fatalf("create %s: %v (%s) partitions %d rf %d", c.topic, err, resp.ErrMessage, resp.NumPartitions, resp.ReplicationFactor)
		}
	}
	// KafkaBasedLog / TopicAdmin.verifyTopicCleanupPolicyOnlyCompact describe just cleanup.policy.
	rc, err := adm.DescribeTopicConfigs(ctx, "connect-offsets", "connect-configs", "connect-status")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rc {
		v := map[string]string{}
		for _, c := range r.Configs {
			v[c.Key] = c.MaybeValue()
		}
		if r.Err != nil || v["cleanup.policy"] != "compact" || v["compression.type"] != "producer" || v["min.insync.replicas"] != "1" {
			t.Errorf("%s: %v %v", r.Name, r.Err, v)
		}
	}
	cl := k.Client(kgo.DefaultProduceTopic("connect-configs"), kgo.ConsumeTopics("connect-configs"), kgo.FetchMaxWait(100*time.Millisecond))
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("connector-a"), Value: []byte(`{"tasks.max":"1"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Key) != "connector-a" {
		t.Fatalf("consumed %+v", recs)
	}
}

// TestMinInsyncReplicasOnOneNode: as in Kafka, min.insync.replicas above the ISR (1 on one node) makes
// acks=all produce fail with NOT_ENOUGH_REPLICAS and write nothing, while acks=1 still succeeds.
func TestMinInsyncReplicasOnOneNode(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("isr", 1, map[string]*string{"min.insync.replicas": ptr("2")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := k.Client(kgo.DefaultProduceTopic("isr"), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0))
	err := all.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync.replicas=2: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	one := k.Client(kgo.DefaultProduceTopic("isr"), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	r, err := one.ProduceSync(ctx, &kgo.Record{Value: []byte("y")}).First()
	if err != nil || r.Offset != 0 {
		t.Fatalf("acks=1: offset %v, %v; want 0 (the refused acks=all write took no offset)", r, err)
	}
	// Back to 1: acks=all works again.
	if resp, err := k.Admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: ptr("1")}}, "isr"); err != nil || alterErr(resp, "isr") != nil {
		t.Fatal(err, alterErr(resp, "isr"))
	}
	if err := all.ProduceSync(ctx, &kgo.Record{Value: []byte("z")}).FirstErr(); err != nil {
		t.Fatalf("acks=all with min.insync.replicas=1: %v", err)
	}
}

// TestTimestampWindow: KIP-937 on a CreateTime topic: a record older than message.timestamp.before.max.ms
// or newer than message.timestamp.after.max.ms (one hour by default since Kafka 4.0) is refused with
// INVALID_TIMESTAMP and nothing of its batch is written; a LogAppendTime topic takes any timestamp.
func TestTimestampWindow(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("window", 1, map[string]*string{"message.timestamp.before.max.ms": ptr("3600000")})
	k.CreateTopic("stamped", 1, map[string]*string{"message.timestamp.type": ptr("LogAppendTime"), "message.timestamp.before.max.ms": ptr("0"), "message.timestamp.after.max.ms": ptr("0")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.ProducerLinger(0))
	now := time.Now()
	for _, c := range []struct {
		topic string
		ts    time.Time
		want  error
	}{
		{"window", now.Add(-2 * time.Hour), kerr.InvalidTimestamp},
		{"window", now.Add(2 * time.Hour), kerr.InvalidTimestamp},
		{"window", now.Add(-30 * time.Minute), nil},
		{"window", now.Add(30 * time.Minute), nil},
		{"stamped", now.Add(-24 * time.Hour), nil},
		{"stamped", now.Add(24 * time.Hour), nil},
	} {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: c.topic, Value: []byte("v"), Timestamp: c.ts}).FirstErr()
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s at %v from now: %v, want %v", c.topic, c.ts.Sub(now).Round(time.Minute), err, c.want)
		}
	}
	// A batch whose second record is out of range is refused whole.
	rs := cl.ProduceSync(ctx, &kgo.Record{Topic: "window", Value: []byte("ok"), Timestamp: now},
		&kgo.Record{Topic: "window", Value: []byte("old"), Timestamp: now.Add(-3 * time.Hour)})
	for _, r := range rs {
		if !errors.Is(r.Err, kerr.InvalidTimestamp) {
			t.Errorf("mixed batch record %q: %v, want INVALID_TIMESTAMP", r.Record.Value, r.Err)
		}
	}
	ends, err := k.Admin().ListEndOffsets(ctx, "window")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("window", 0); o.Offset != 2 {
		t.Fatalf("window end offset %d, want 2 (only the two in-range records)", o.Offset)
	}
}

// TestLogAppendTime: a LogAppendTime topic stamps the broker's append time into the batch header with the
// timestamp-type attribute bit, consumers see it instead of the producer's timestamp, and ListOffsets by
// timestamp searches by it.
func TestLogAppendTime(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("lat", 1, map[string]*string{"message.timestamp.type": ptr("LogAppendTime")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.DefaultProduceTopic("lat"), kgo.ProducerLinger(0), kgo.ConsumeTopics("lat"), kgo.FetchMaxWait(100*time.Millisecond))
	old := time.UnixMilli(1_000_000_000_000) // 2001: the producer's CreateTime, to be replaced
	type window struct{ from, to time.Time }
	var windows []window
	for i := 0; i < 3; i++ {
		from := time.Now().Truncate(time.Millisecond)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}, Timestamp: old}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		windows = append(windows, window{from, time.Now()})
	}
	var got []*kgo.Record
	for len(got) < 3 {
		fs := cl.PollRecords(ctx, 3)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatal(errs)
		}
		got = append(got, fs.Records()...)
	}
	var appended []time.Time
	for i, r := range got {
		w := windows[i]
		if r.Attrs.TimestampType() != 1 || r.Timestamp.Before(w.from) || r.Timestamp.After(w.to) {
			t.Errorf("record %d: timestamp %v type %d, want type 1 (LogAppendTime) and the append time in [%v, %v]", i, r.Timestamp, r.Attrs.TimestampType(), w.from, w.to)
		}
		appended = append(appended, r.Timestamp)
	}
	adm := k.Admin()
	// ListOffsets(t) is the first offset whose timestamp is >= t; appends in one millisecond tie.
	first := func(i int) int64 {
		for j := range appended {
			if !appended[j].Before(appended[i]) {
				return int64(j)
			}
		}
		return -1
	}
	for _, c := range []struct {
		at   int64
		want int64
	}{
		{old.UnixMilli(), 0}, // every append time is later than the producer's timestamps
		{appended[1].UnixMilli(), first(1)},
		{appended[2].UnixMilli(), first(2)},
		{appended[2].UnixMilli() + 1, 3}, // none at or after: Kafka answers -1, which kadm turns into the end offset
	} {
		lo, err := adm.ListOffsetsAfterMilli(ctx, c.at, "lat")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := lo.Lookup("lat", 0); o.Err != nil || o.Offset != c.want {
			t.Errorf("ListOffsets at %d: offset %d, %v; want %d", c.at, o.Offset, o.Err, c.want)
		}
	}
}

// TestFlushMessagesUnderFsyncNever: with --fsync=never, a topic's flush.messages=2 fsyncs its log in
// every second single-record produce, as Kafka flushes after that many messages; a topic without it
// is never fsynced by produce.
func TestFlushMessagesUnderFsyncNever(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.Fsync = config.FsyncNever })
	k.CreateTopic("flushed", 1, map[string]*string{"flush.messages": ptr("2")})
	k.CreateTopic("unflushed", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.ProducerLinger(0))
	produce := func(topic string, n int) {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("unflushed", 1) // the producer ID and metadata settle first
	produce("flushed", 1)
	before := k.B.LogStats().Fsyncs
	produce("unflushed", 4)
	if got := k.B.LogStats().Fsyncs - before; got != 0 {
		t.Fatalf("4 produces to a topic without flush.messages: %d fsyncs, want 0", got)
	}
	produce("flushed", 4) // 1 unflushed already: fsyncs at the 1st and 3rd of these
	if got := k.B.LogStats().Fsyncs - before; got != 2 {
		t.Fatalf("4 produces to a flush.messages=2 topic: %d fsyncs, want 2", got)
	}
}
