package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Topic is the typed form of a topic's configs, Kafka's LogConfig. DefaultTopic gives Kafka 4.x's
// defaults; Apply sets values by their Kafka name with Kafka's type, range and cross-config checks.
// Durations are milliseconds and sizes bytes, as in Kafka.
type Topic struct {
	RetentionMs    int64 // retention.ms; -1 = unlimited
	RetentionBytes int64 // retention.bytes; -1 = unlimited
	SegmentBytes   int64 // segment.bytes
	// InternalSegmentBytes is Kafka's internal.segment.bytes: when > 0 it replaces SegmentBytes without
	// segment.bytes' 1 MiB floor, so tests can roll small segments (Kafka's LogConfig has it for that).
	InternalSegmentBytes int64
	SegmentMs            int64  // segment.ms
	SegmentJitterMs      int64  // segment.jitter.ms (stored)
	SegmentIndexBytes    int64  // segment.index.bytes (stored)
	IndexIntervalBytes   int64  // index.interval.bytes: bytes of log between offset index entries
	FlushMessages        int64  // flush.messages: fsync after this many messages (with --fsync=never/interval)
	FlushMs              int64  // flush.ms: fsync data older than this (with --fsync=never/interval)
	FileDeleteDelayMs    int64  // file.delete.delay.ms: a deleted segment's files stay open this long
	MaxMessageBytes      int64  // max.message.bytes: largest record batch accepted (after recompression too)
	CleanupPolicy        string // cleanup.policy: "delete", "compact" or "compact,delete" (Compact, Delete)
	TimestampType        string // message.timestamp.type: CreateTime | LogAppendTime
	// message.timestamp.before.max.ms / after.max.ms (KIP-937): with CreateTime, a record whose timestamp is
	// more than this before / after the broker's clock is refused with INVALID_TIMESTAMP.
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64

	// Log compaction (used when Compact()).
	DeleteRetentionMs      int64   // delete.retention.ms: how long tombstones and markers outlive their cleaning
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio: dirty bytes / cleanable bytes before a clean, [0, 1]
	MinCompactionLagMs     int64   // min.compaction.lag.ms: a record younger than this is not compacted
	MaxCompactionLagMs     int64   // max.compaction.lag.ms: a segment older than this is cleaned whatever the ratio

	MinInsyncReplicas int64 // min.insync.replicas: above 1, acks=all produce fails (one node: ISR is 1)
	// CompressionType is compression.type: producer keeps the producer's codec; uncompressed, gzip, snappy,
	// lz4 or zstd makes the broker recompress batches to it, at the compression.*.level below (KIP-390).
	CompressionType      string
	CompressionGzipLevel int64 // compression.gzip.level: 1-9, or -1 for the codec's default
	CompressionLz4Level  int64 // compression.lz4.level: 1-17
	CompressionZstdLevel int64 // compression.zstd.level: -131072-22

	// Preallocate is preallocate (log.preallocate): reserve the active segment's file ahead of the writes.
	// Kafka's default is false; Kawa's is true, because reserving ahead cut the append+fdatasync latency
	// that acks=all waits for (log.Options.Preallocate has the measurement). Applies from the partition's
	// next open.
	Preallocate bool

	// Stored and reported, without effect on one node without tiered storage (see Def.NoEffect).
	UncleanLeaderElection                bool   // unclean.leader.election.enable
	LeaderReplicationThrottledReplicas   string // leader.replication.throttled.replicas
	FollowerReplicationThrottledReplicas string // follower.replication.throttled.replicas
	RemoteStorageEnable                  bool   // remote.storage.enable (true is refused: no tiered storage)
	RemoteLogCopyDisable                 bool   // remote.log.copy.disable
	RemoteLogDeleteOnDisable             bool   // remote.log.delete.on.disable
	LocalRetentionMs                     int64  // local.retention.ms; -2 = retention.ms
	LocalRetentionBytes                  int64  // local.retention.bytes; -2 = retention.bytes
}

// Compact reports whether cleanup.policy includes compact.
func (t Topic) Compact() bool { return policyHas(t.CleanupPolicy, "compact") }

// Delete reports whether cleanup.policy includes delete (time and size retention apply).
func (t Topic) Delete() bool { return t.CleanupPolicy == "" || policyHas(t.CleanupPolicy, "delete") }

// RetentionLimits are the retention.ms and retention.bytes the log enforces: both unlimited (-1) when the
// policy does not include delete, as in Kafka (a compact-only topic never loses segments to retention).
func (t Topic) RetentionLimits() (ms, bytes int64) {
	if !t.Delete() {
		return -1, -1
	}
	return t.RetentionMs, t.RetentionBytes
}

func policyHas(list, p string) bool {
	for _, v := range strings.Split(list, ",") {
		if strings.TrimSpace(v) == p {
			return true
		}
	}
	return false
}

// SegmentSize is the segment size the log rolls at: internal.segment.bytes when set, else segment.bytes.
func (t Topic) SegmentSize() int64 {
	if t.InternalSegmentBytes > 0 {
		return t.InternalSegmentBytes
	}
	return t.SegmentBytes
}

// MinSegmentBytes is segment.bytes' minimum, 1 MiB since Kafka 4.0 (KIP-1030): smaller segments cost a file
// descriptor and a directory entry per few records.
const MinSegmentBytes = 1 << 20

// Compression codecs of compression.type, as Kafka's BrokerCompressionType names them.
const (
	CompressionProducer     = "producer"
	CompressionUncompressed = "uncompressed"
)

// DefaultTopic returns Kafka 4.x's default topic configs (LogConfig, ServerLogConfigs; KIP-1030 for
// message.timestamp.after.max.ms, one hour since 4.0), except preallocate, true in Kawa.
func DefaultTopic() Topic {
	return Topic{
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		FileDeleteDelayMs:  60000,
		MaxMessageBytes:    1048588,
		CleanupPolicy:      "delete",
		TimestampType:      "CreateTime",

		TimestampBeforeMaxMs: math.MaxInt64,
		TimestampAfterMaxMs:  3600000,

		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,

		Preallocate:          true, // Kawa's default (Kafka's is false): see Topic.Preallocate
		MinInsyncReplicas:    1,
		CompressionType:      CompressionProducer,
		CompressionGzipLevel: -1,
		CompressionLz4Level:  9,
		CompressionZstdLevel: 3,

		LocalRetentionMs:    -2,
		LocalRetentionBytes: -2,
	}
}

// Def describes one topic config: its Kafka name, type and documentation, its broker-level synonym, and
// how Kawa uses it.
type Def struct {
	Name string
	Type string // Kafka's ConfigDef type: BOOLEAN, STRING, INT, LONG, DOUBLE, LIST
	Doc  string
	// Broker is the broker-level property whose value a topic without an override takes (Kafka's
	// ServerTopicConfigSynonyms: log.retention.ms for retention.ms); "" when Kafka has none.
	Broker string
	// NoEffect, when set, says why the config is accepted, stored and reported but changes nothing in Kawa
	// (one node, no replication, no tiered storage).
	NoEffect string
	// Internal configs (Kafka's ConfigDef.defineInternal) are accepted like the others but listed by
	// DescribeConfigs and CreateTopics only for a topic that sets them.
	Internal bool
	get      func(Topic) string
	set      func(*Topic, string) error
}

const (
	noReplication = "one node: no replication or leader election"
	noTiered      = "no tiered storage"
)

// Defs lists every topic config of Apache Kafka 4.x (LogConfig's definitions), in a stable order.
var Defs = []Def{
	{Name: "cleanup.policy", Type: "LIST", Broker: "log.cleanup.policy",
		Doc: "delete (time and size retention), compact (keep the latest value per key) or compact,delete",
		get: func(t Topic) string { return t.CleanupPolicy },
		set: setCleanupPolicy},
	enumDef("compression.type", "compression.type",
		[]string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}, func(t *Topic) *string { return &t.CompressionType },
		"codec batches are stored in: producer keeps the producer's; another value makes the broker recompress incoming batches to it"),
	{Name: "compression.gzip.level", Type: "INT", Broker: "compression.gzip.level",
		Doc: "gzip level used when compression.type=gzip: 1-9, or -1 for the codec's default",
		get: func(t Topic) string { return i64(t.CompressionGzipLevel) },
		set: func(t *Topic, v string) error {
			n, err := parseInt32(v)
			if err != nil {
				return err
			}
			if n != -1 && (n < 1 || n > 9) {
				return fmt.Errorf("value must be in [1,...,9] or -1")
			}
			t.CompressionGzipLevel = n
			return nil
		}},
	intDef("compression.lz4.level", "compression.lz4.level", 1, 17, func(t *Topic) *int64 { return &t.CompressionLz4Level },
		"lz4 level used when compression.type=lz4"),
	intDef("compression.zstd.level", "compression.zstd.level", -131072, 22, func(t *Topic) *int64 { return &t.CompressionZstdLevel },
		"zstd level used when compression.type=zstd"),
	longDef("delete.retention.ms", "log.cleaner.delete.retention.ms", 0, func(t *Topic) *int64 { return &t.DeleteRetentionMs },
		"ms a tombstone (or transaction marker) is kept after its cleaning, for readers to see it"),
	longDef("file.delete.delay.ms", "log.segment.delete.delay.ms", 0, func(t *Topic) *int64 { return &t.FileDeleteDelayMs },
		"ms a segment removed by retention keeps its files open for readers still on it (from the partition's next open)"),
	longDef("flush.messages", "log.flush.interval.messages", 1, func(t *Topic) *int64 { return &t.FlushMessages },
		"with --fsync=never or interval: fsync the log in the append that brings its unflushed messages to this many (from the partition's next open)"),
	longDef("flush.ms", "log.flush.interval.ms", 0, func(t *Topic) *int64 { return &t.FlushMs },
		"with --fsync=never or interval: every this many ms, fsync the log if it holds unflushed messages (from the partition's next open)"),
	{Name: "follower.replication.throttled.replicas", Type: "LIST", NoEffect: noReplication,
		Doc: "replicas whose replication is throttled on the follower side: partition:broker,... or *",
		get: func(t Topic) string { return t.FollowerReplicationThrottledReplicas },
		set: func(t *Topic, v string) error { return setThrottled(&t.FollowerReplicationThrottledReplicas, v) }},
	intDef("index.interval.bytes", "log.index.interval.bytes", 0, math.MaxInt32, func(t *Topic) *int64 { return &t.IndexIntervalBytes },
		"bytes of log between offset index entries (from the partition's next open)"),
	{Name: "leader.replication.throttled.replicas", Type: "LIST", NoEffect: noReplication,
		Doc: "replicas whose replication is throttled on the leader side: partition:broker,... or *",
		get: func(t Topic) string { return t.LeaderReplicationThrottledReplicas },
		set: func(t *Topic, v string) error { return setThrottled(&t.LeaderReplicationThrottledReplicas, v) }},
	longDef("local.retention.bytes", "log.local.retention.bytes", -2, func(t *Topic) *int64 { return &t.LocalRetentionBytes },
		"tiered storage: bytes kept locally; -2 = retention.bytes").noEffect(noTiered),
	longDef("local.retention.ms", "log.local.retention.ms", -2, func(t *Topic) *int64 { return &t.LocalRetentionMs },
		"tiered storage: ms kept locally; -2 = retention.ms").noEffect(noTiered),
	longDef("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", 1, func(t *Topic) *int64 { return &t.MaxCompactionLagMs },
		"ms after which a record is eligible for compaction whatever the dirty ratio"),
	intDef("max.message.bytes", "message.max.bytes", 0, math.MaxInt32, func(t *Topic) *int64 { return &t.MaxMessageBytes },
		"largest record batch accepted, in bytes, as received and as stored after recompression (MESSAGE_TOO_LARGE)"),
	longDef("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", 0, func(t *Topic) *int64 { return &t.TimestampAfterMaxMs },
		"with CreateTime: ms a record's timestamp may be ahead of the broker's clock (INVALID_TIMESTAMP beyond, KIP-937)"),
	longDef("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", 0, func(t *Topic) *int64 { return &t.TimestampBeforeMaxMs },
		"with CreateTime: ms a record's timestamp may be behind the broker's clock (INVALID_TIMESTAMP beyond, KIP-937)"),
	enumDef("message.timestamp.type", "log.message.timestamp.type", []string{"CreateTime", "LogAppendTime"},
		func(t *Topic) *string { return &t.TimestampType },
		"CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the broker's append time"),
	{Name: "min.cleanable.dirty.ratio", Type: "DOUBLE", Broker: "log.cleaner.min.cleanable.ratio",
		Doc: "dirty share of the cleanable log that triggers cleaning, 0 to 1",
		get: func(t Topic) string { return strconv.FormatFloat(t.MinCleanableDirtyRatio, 'g', -1, 64) },
		set: func(t *Topic, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return fmt.Errorf("not a number")
			}
			// !(f >= 0 && f <= 1) also refuses NaN, which every comparison fails: a NaN
			// ratio would make the cleaner's "ratio >= min" never true, so the topic
			// would silently never compact by ratio.
			if !(f >= 0 && f <= 1) {
				return fmt.Errorf("value must be between 0 and 1")
			}
			t.MinCleanableDirtyRatio = f
			return nil
		}},
	longDef("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", 0, func(t *Topic) *int64 { return &t.MinCompactionLagMs },
		"ms a record stays uncompacted at least"),
	intDef("min.insync.replicas", "min.insync.replicas", 1, math.MaxInt32, func(t *Topic) *int64 { return &t.MinInsyncReplicas },
		"replicas that must have an acks=all write; the ISR of one node is 1, so above 1 acks=all produce fails with NOT_ENOUGH_REPLICAS"),
	boolDef("preallocate", "log.preallocate", func(t *Topic) *bool { return &t.Preallocate },
		"reserve the active segment file ahead of the writes (Kawa's default: true); a change applies when the partition is next opened"),
	boolDef("remote.log.copy.disable", "", func(t *Topic) *bool { return &t.RemoteLogCopyDisable },
		"tiered storage: stop copying segments to remote storage").noEffect(noTiered),
	boolDef("remote.log.delete.on.disable", "", func(t *Topic) *bool { return &t.RemoteLogDeleteOnDisable },
		"tiered storage: delete remote data when remote storage is turned off").noEffect(noTiered),
	boolDef("remote.storage.enable", "", func(t *Topic) *bool { return &t.RemoteStorageEnable },
		"tiered storage for this topic; Kawa has none, so true is refused"),
	longDef("retention.bytes", "log.retention.bytes", math.MinInt64, func(t *Topic) *int64 { return &t.RetentionBytes },
		"delete oldest whole segments while a partition is larger; -1 = unlimited"),
	longDef("retention.ms", "log.retention.ms", -1, func(t *Topic) *int64 { return &t.RetentionMs },
		"delete whole segments older than this many ms; -1 = unlimited"),
	intDef("segment.bytes", "log.segment.bytes", MinSegmentBytes, math.MaxInt32, func(t *Topic) *int64 { return &t.SegmentBytes },
		"segment file size before rolling; at least 1048576 (KIP-1030)"),
	intDef("segment.index.bytes", "log.index.size.max.bytes", 4, math.MaxInt32, func(t *Topic) *int64 { return &t.SegmentIndexBytes },
		"largest offset index of a segment").noEffect("stored; Kawa's sparse indexes are not preallocated and do not roll segments"),
	longDef("segment.jitter.ms", "log.roll.jitter.ms", 0, func(t *Topic) *int64 { return &t.SegmentJitterMs },
		"random jitter subtracted from segment.ms").noEffect("stored; segments roll at segment.ms exactly"),
	longDef("segment.ms", "log.roll.ms", 1, func(t *Topic) *int64 { return &t.SegmentMs },
		"ms after which the active segment rolls even if not full"),
	boolDef("unclean.leader.election.enable", "unclean.leader.election.enable", func(t *Topic) *bool { return &t.UncleanLeaderElection },
		"allow a replica outside the ISR to become leader").noEffect(noReplication),
	{Name: "internal.segment.bytes", Type: "INT", Doc: "internal, for tests: overrides segment.bytes without its minimum",
		Internal: true,
		get:      func(t Topic) string { return i64(t.SegmentSize()) },
		set: func(t *Topic, v string) error {
			return inRange(v, 14, math.MaxInt32, &t.InternalSegmentBytes)
		}},
}

func (d Def) noEffect(why string) Def { d.NoEffect = why; return d }

func longDef(name, broker string, min int64, f func(*Topic) *int64, doc string) Def {
	return Def{Name: name, Type: "LONG", Broker: broker, Doc: doc,
		get: func(t Topic) string { return i64(*f(&t)) },
		set: func(t *Topic, v string) error { return inRange(v, min, math.MaxInt64, f(t)) }}
}

func intDef(name, broker string, min, max int64, f func(*Topic) *int64, doc string) Def {
	return Def{Name: name, Type: "INT", Broker: broker, Doc: doc,
		get: func(t Topic) string { return i64(*f(&t)) },
		set: func(t *Topic, v string) error { return inRange(v, min, max, f(t)) }}
}

func boolDef(name, broker string, f func(*Topic) *bool, doc string) Def {
	return Def{Name: name, Type: "BOOLEAN", Broker: broker, Doc: doc,
		get: func(t Topic) string { return strconv.FormatBool(*f(&t)) },
		set: func(t *Topic, v string) error {
			// Kafka's ConfigDef.parseType: true or false, any case, surrounding blanks ignored.
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				*f(t) = true
			case "false":
				*f(t) = false
			default:
				return fmt.Errorf("expected value to be either true or false")
			}
			return nil
		}}
}

func enumDef(name, broker string, values []string, f func(*Topic) *string, doc string) Def {
	return Def{Name: name, Type: "STRING", Broker: broker, Doc: doc,
		get: func(t Topic) string { return *f(&t) },
		set: func(t *Topic, v string) error {
			v = strings.TrimSpace(v)
			for _, ok := range values {
				if v == ok {
					*f(t) = v
					return nil
				}
			}
			return fmt.Errorf("string must be one of: %s", strings.Join(values, ", "))
		}}
}

func setCleanupPolicy(t *Topic, v string) error {
	var del, comp bool
	for _, p := range ListItems(v) {
		switch p {
		case "delete":
			del = true
		case "compact":
			comp = true
		default:
			return fmt.Errorf("%q is not delete or compact", p)
		}
	}
	switch {
	case del && comp:
		t.CleanupPolicy = "compact,delete"
	case comp:
		t.CleanupPolicy = "compact"
	case del:
		t.CleanupPolicy = "delete"
	default:
		return fmt.Errorf("the list must name delete, compact or both")
	}
	return nil
}

// setThrottled is Kafka's ThrottledReplicaListValidator: empty, "*", or partition:broker pairs.
func setThrottled(dst *string, v string) error {
	list := ListItems(v)
	if len(list) == 1 && list[0] == "*" {
		*dst = "*"
		return nil
	}
	for _, p := range list {
		part, node, ok := strings.Cut(p, ":")
		if !ok || !digits(part) || !digits(node) {
			return fmt.Errorf("must be the literal '*' or a list of replicas [partitionId]:[brokerId] separated by commas")
		}
	}
	*dst = strings.Join(list, ",")
	return nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ListItems parses a Kafka LIST value: comma separated, blanks around items ignored; an empty string is
// the empty list.
func ListItems(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// Lookup returns the definition of a topic config by name.
func Lookup(name string) (Def, bool) {
	for _, d := range Defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// LookupBroker returns the definition of the topic config whose broker-level synonym is name
// (log.retention.ms gives retention.ms).
func LookupBroker(name string) (Def, bool) {
	for _, d := range Defs {
		if d.Broker != "" && d.Broker == name {
			return d, true
		}
	}
	return Def{}, false
}

// Get returns the string value of config name in t.
func (d Def) Get(t Topic) string { return d.get(t) }

// Default returns Kafka's default value of the config, as DescribeConfigs reports it.
func (d Def) Default() string { return d.get(DefaultTopic()) }

// Set parses v into t. The error says why v is invalid.
func (d Def) Set(t *Topic, v string) error { return d.set(t, v) }

// Apply sets each name=value in kv on a copy of t with Kafka's validation (LogConfig.validate): a known
// name, a value of the config's type within its range or set of values, then the checks across configs
// (min.compaction.lag.ms <= max.compaction.lag.ms; remote.storage.enable refused, as by a Kafka broker
// without tiered storage). On any error t is returned unchanged with an error naming the config and
// the problem.
func Apply(t Topic, kv map[string]string) (Topic, error) {
	out := t
	for k, v := range kv {
		d, ok := Lookup(k)
		if !ok {
			return t, fmt.Errorf("unknown topic config name: %s", k)
		}
		if err := d.Set(&out, v); err != nil {
			return t, fmt.Errorf("invalid value %s for configuration %s: %w", v, k, err)
		}
	}
	if out.MinCompactionLagMs > out.MaxCompactionLagMs {
		return t, fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)",
			out.MinCompactionLagMs, out.MaxCompactionLagMs)
	}
	if out.RemoteStorageEnable {
		return t, fmt.Errorf("invalid value true for configuration remote.storage.enable: tiered storage is not available in this broker; a topic cannot be configured with remote log storage")
	}
	return out, nil
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func parseInt32(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("not a 32-bit integer")
	}
	return n, nil
}

// inRange parses an INT (max <= MaxInt32) or LONG config into dst: an integer in [min, max], Kafka's
// ConfigDef.Range.
func inRange(v string, min, max int64, dst *int64) error {
	bits := 64
	if max <= math.MaxInt32 {
		bits = 32
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	if err != nil {
		return fmt.Errorf("not a %d-bit integer", bits)
	}
	if n < min {
		return fmt.Errorf("value must be at least %d", min)
	}
	if n > max {
		return fmt.Errorf("value must be no more than %d", max)
	}
	*dst = n
	return nil
}
