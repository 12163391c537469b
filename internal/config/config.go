// Package config holds Kawa's typed broker configuration and the registry of
// Kafka topic configs Kawa understands (name, type, default, validation).
//
// Topic config names and meanings follow Apache Kafka's topic-level configs
// (https://kafka.apache.org/documentation/#topicconfigs).
package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Fsync is the flush policy: when appended data is fsynced relative to the
// acknowledgement of acks=all produce requests.
type Fsync string

const (
	// FsyncAlways fsyncs (group-committed) before an acks=all write is
	// acknowledged and before the high watermark covers it. The default.
	FsyncAlways Fsync = "always"
	// FsyncInterval fsyncs in the background every Broker.FsyncInterval.
	FsyncInterval Fsync = "interval"
	// FsyncNever leaves flushing to the OS (and to segment roll / shutdown).
	FsyncNever Fsync = "never"
)

// ParseFsync validates a --fsync flag value.
func ParseFsync(s string) (Fsync, error) {
	switch Fsync(s) {
	case FsyncAlways, FsyncInterval, FsyncNever:
		return Fsync(s), nil
	}
	return "", fmt.Errorf("fsync: %q is not one of always, interval, never", s)
}

// Broker is the broker-wide configuration. Zero values are replaced by
// defaults in WithDefaults.
type Broker struct {
	NodeID         int32
	Listen         string // host:port to listen on, e.g. 127.0.0.1:9092
	AdvertisedHost string // host advertised in Metadata; empty = listener's host
	// Security (Kafka's names). Listeners, when set, replaces Listen:
	// "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094", each name a
	// security protocol. SSLKeystoreLocation is a PEM file holding the
	// private key and certificate chain (ssl.keystore.type=PEM),
	// SSLTruststoreLocation a PEM file of CA certificates that client
	// certificates must chain to; SSLClientAuth is required, requested or
	// none. SASLEnabledMechanisms are PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
	Listeners             string
	SSLKeystoreLocation   string
	SSLTruststoreLocation string
	SSLClientAuth         string
	SASLEnabledMechanisms []string
	// ListenerSecurityProtocolMap maps custom listener names to security
	// protocols ("INTERNAL:SASL_SSL,EXTERNAL:SSL", Kafka's
	// listener.security.protocol.map); empty: names are protocols.
	ListenerSecurityProtocolMap string
	// AdvertisedListeners is Kafka's advertised.listeners
	// ("EXTERNAL://broker.example:9094"): per listener name, the host:port
	// clients are told (port 0: the bound port); unnamed listeners advertise
	// their own address.
	AdvertisedListeners string
	// ControllerListenerNames (controller.listener.names) are listeners a
	// single node does not open: there is no controller quorum to serve.
	ControllerListenerNames []string
	// SSLEnabledProtocols is ssl.enabled.protocols: TLSv1.2 and/or TLSv1.3
	// (empty: both).
	SSLEnabledProtocols []string
	AdvertisedPort      int32 // 0 = listener's port
	// The authorizer (Kafka's names). AuthorizerClassName switches it on:
	// "" is off (every request allowed, the ACL APIs answer
	// SECURITY_DISABLED); the only other accepted value is Kafka's
	// org.apache.kafka.metadata.authorizer.StandardAuthorizer, whose rules
	// Kawa follows. SuperUsers are principals allowed everything
	// (super.users, "User:admin"); AllowEveryoneIfNoACLFound allows an
	// operation on a resource no ACL names (allow.everyone.if.no.acl.found,
	// default false).
	AuthorizerClassName       string
	SuperUsers                []string
	AllowEveryoneIfNoACLFound bool
	DataDir                   string
	MaxRequestBytes           int32 // socket.request.max.bytes; larger declared frames close the connection
	Fsync                     Fsync
	FsyncInterval             time.Duration

	AutoCreateTopics  bool  // auto.create.topics.enable
	DefaultPartitions int32 // num.partitions, for auto-created topics
	DefaultTopic      Topic // defaults for new topics (log.* broker configs)

	ProducerIDExpiration time.Duration // producer.id.expiration.ms
	OffsetsRetention     time.Duration // offsets.retention.minutes
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms (KIP-848), the interval
	// consumer-protocol members are told to heartbeat at; 0 takes Kafka's 5 s.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms; 0 takes Kafka's 45 s.
	ConsumerSessionTimeout time.Duration
	RetentionCheck         time.Duration // log.retention.check.interval.ms
	MaxInFlight            int           // requests read ahead per connection

	// QueuedMaxRequestBytes caps the bytes of requests read but not yet
	// answered, broker-wide (Kafka's queued.max.request.bytes). 0 = default
	// (512 MiB); -1 = unbounded (Kafka's default). Must be -1 or at least
	// MaxRequestBytes.
	QueuedMaxRequestBytes int64
	// RequestReadTimeout bounds how long one request frame may take to
	// arrive once its size is read (default 30 s).
	RequestReadTimeout  time.Duration
	MaxConnections      int           // max.connections (default, as in Kafka, 2147483647)
	MaxConnectionsPerIP int           // max.connections.per.ip (default, as in Kafka, 2147483647)
	ConnectionsMaxIdle  time.Duration // connections.max.idle.ms (default 10 minutes)
	// ConnectionsMaxReauth is connections.max.reauth.ms (KIP-368): the
	// lifetime of a SASL session, after which the client must
	// re-authenticate; 0 (the default) is unlimited.
	ConnectionsMaxReauth time.Duration
	// MaxOpenLogFiles bounds the segment files (.log, .index, .timeindex) held open over all partitions; idle
	// ones are closed and reopened on use. 0 = half the process's open-file limit.
	MaxOpenLogFiles int

	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms: how long the first rebalance of
	// an Empty classic group waits for more members (Kawa's default 0; Kafka's 3 s).
	GroupInitialRebalanceDelay time.Duration

	TxnMaxTimeout             time.Duration // transaction.max.timeout.ms (default 15 min)
	TransactionalIDExpiration time.Duration // transactional.id.expiration.ms (default 7 days)

	// The log cleaner (compacted topics).
	CleanerBackoff    time.Duration // log.cleaner.backoff.ms: wait between rounds (default 15 s)
	CleanerMapEntries int           // keys in one pass's offset map (log.cleaner.dedupe.buffer.size / ~40 B); 0 = cleaner.DefaultMapEntries
	// OnSegmentSwap, when set, is called after each named step of the cleaner's segment swap (log.SwapSteps):
	// a crash-test hook (`kawa serve` sets it from KAWA_CRASH_POINT), nil in production.
	OnSegmentSwap func(step string)
}

// DefaultQueuedMaxRequestBytes is Kawa's default queued.max.request.bytes:
// 512 MiB, five requests of the default maximum size. (Kafka's default is
// unbounded, which lets clients that declare large requests and trickle
// them grow the broker without limit.)
const DefaultQueuedMaxRequestBytes = 512 << 20

// WithDefaults returns b with unset fields set to Kawa's defaults (Kafka's
// where Kafka has one).
func (b Broker) WithDefaults() Broker {
	if b.Listen == "" {
		b.Listen = "127.0.0.1:9092"
	}
	if b.DataDir == "" {
		b.DataDir = "kawa-data"
	}
	if b.MaxRequestBytes <= 0 {
		b.MaxRequestBytes = 100 << 20 // socket.request.max.bytes
	}
	if b.Fsync == "" {
		b.Fsync = FsyncAlways
	}
	if b.FsyncInterval <= 0 {
		b.FsyncInterval = time.Second
	}
	if b.DefaultPartitions <= 0 {
		b.DefaultPartitions = 1
	}
	if b.ProducerIDExpiration <= 0 {
		b.ProducerIDExpiration = 24 * time.Hour
	}
	if b.OffsetsRetention <= 0 {
		b.OffsetsRetention = 7 * 24 * time.Hour
	}
	if b.RetentionCheck <= 0 {
		b.RetentionCheck = 5 * time.Minute
	}
	if b.MaxInFlight <= 0 {
		b.MaxInFlight = 100
	}
	if b.QueuedMaxRequestBytes == 0 {
		b.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if b.RequestReadTimeout <= 0 {
		b.RequestReadTimeout = 30 * time.Second
	}
	if b.MaxConnections <= 0 {
		b.MaxConnections = math.MaxInt32
	}
	if b.MaxConnectionsPerIP <= 0 {
		b.MaxConnectionsPerIP = math.MaxInt32
	}
	if b.ConnectionsMaxIdle <= 0 {
		b.ConnectionsMaxIdle = 10 * time.Minute
	}
	if b.CleanerBackoff <= 0 {
		b.CleanerBackoff = 15 * time.Second
	}
	if b.TxnMaxTimeout <= 0 {
		b.TxnMaxTimeout = 15 * time.Minute
	}
	if b.TransactionalIDExpiration <= 0 {
		b.TransactionalIDExpiration = 7 * 24 * time.Hour
	}
	b.DefaultTopic = b.DefaultTopic.withDefaults()
	return b
}

// Topic is the typed form of a topic's configs.
type Topic struct {
	RetentionMs    int64 // retention.ms; -1 = unlimited
	RetentionBytes int64 // retention.bytes; -1 = unlimited
	SegmentBytes   int64 // segment.bytes
	// InternalSegmentBytes is Kafka's internal.segment.bytes: when > 0 it replaces SegmentBytes without
	// segment.bytes' 1 MiB floor, so tests can roll small segments (Kafka's LogConfig has it for that).
	InternalSegmentBytes int64
	SegmentMs            int64  // segment.ms
	MaxMessageBytes      int32  // max.message.bytes: largest record batch accepted
	CleanupPolicy        string // cleanup.policy: "delete", "compact" or "compact,delete" (Compact, Delete)
	TimestampType        string // message.timestamp.type: CreateTime | LogAppendTime
	// NoPreallocate is preallocate=false. Kafka's preallocate (log.preallocate) defaults to false; Kawa's to
	// true, because reserving the active segment ahead of the writes cut the append+fdatasync latency that
	// acks=all waits for (log.Options.Preallocate has the measurement).
	NoPreallocate bool

	// Log compaction (Kafka's LogConfig; used when Compact()). MaxCompactionLagMs == 0 means these four are
	// unset and take Kafka's defaults (its minimum is 1).
	DeleteRetentionMs      int64   // delete.retention.ms: how long tombstones and markers outlive their cleaning
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio: dirty bytes / cleanable bytes before a clean, [0, 1]
	MinCompactionLagMs     int64   // min.compaction.lag.ms: a record younger than this is not compacted
	MaxCompactionLagMs     int64   // max.compaction.lag.ms: a segment older than this is cleaned whatever the ratio
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

func (t Topic) withDefaults() Topic {
	d := DefaultTopic()
	if t.RetentionMs == 0 {
		t.RetentionMs = d.RetentionMs
	}
	if t.RetentionBytes == 0 {
		t.RetentionBytes = d.RetentionBytes
	}
	if t.SegmentBytes == 0 {
		t.SegmentBytes = d.SegmentBytes
	}
	if t.SegmentMs == 0 {
		t.SegmentMs = d.SegmentMs
	}
	if t.MaxMessageBytes == 0 {
		t.MaxMessageBytes = d.MaxMessageBytes
	}
	if t.CleanupPolicy == "" {
		t.CleanupPolicy = d.CleanupPolicy
	}
	if t.TimestampType == "" {
		t.TimestampType = d.TimestampType
	}
	if t.MaxCompactionLagMs == 0 {
		t.DeleteRetentionMs, t.MinCleanableDirtyRatio = d.DeleteRetentionMs, d.MinCleanableDirtyRatio
		t.MinCompactionLagMs, t.MaxCompactionLagMs = d.MinCompactionLagMs, d.MaxCompactionLagMs
	}
	return t
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

// DefaultTopic returns Kafka's default topic configs.
func DefaultTopic() Topic {
	return Topic{
		RetentionMs:     7 * 24 * 3600 * 1000,
		RetentionBytes:  -1,
		SegmentBytes:    1 << 30,
		SegmentMs:       7 * 24 * 3600 * 1000,
		MaxMessageBytes: 1048588,
		CleanupPolicy:   "delete",
		TimestampType:   "CreateTime",

		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
	}
}

// Def describes one topic config Kawa supports.
type Def struct {
	Name     string
	Type     string // Kafka's ConfigType name: LONG, INT, STRING, LIST
	Doc      string
	get      func(Topic) string
	set      func(*Topic, string) error
	Readonly bool
	// Internal configs (Kafka's ConfigDef.defineInternal) are accepted like the others but listed by
	// DescribeConfigs and CreateTopics only for a topic that sets them.
	Internal bool
}

// Defs lists the supported topic configs in a stable order.
var Defs = []Def{
	{Name: "retention.ms", Type: "LONG", Doc: "delete whole segments older than this; -1 = unlimited",
		get: func(t Topic) string { return i64(t.RetentionMs) },
		set: func(t *Topic, v string) error { return parseI64(v, -1, &t.RetentionMs) }},
	{Name: "retention.bytes", Type: "LONG", Doc: "delete oldest whole segments while a partition is larger; -1 = unlimited",
		get: func(t Topic) string { return i64(t.RetentionBytes) },
		set: func(t *Topic, v string) error { return parseI64(v, -1, &t.RetentionBytes) }},
	{Name: "segment.bytes", Type: "INT", Doc: "segment file size before rolling; at least 1048576 (KIP-1030)",
		get: func(t Topic) string { return i64(t.SegmentBytes) },
		set: func(t *Topic, v string) error { return parseInt(v, MinSegmentBytes, &t.SegmentBytes) }},
	{Name: "internal.segment.bytes", Type: "INT", Doc: "internal, for tests: overrides segment.bytes without its minimum",
		Internal: true,
		get:      func(t Topic) string { return i64(t.SegmentSize()) },
		set:      func(t *Topic, v string) error { return parseInt(v, 14, &t.InternalSegmentBytes) }},
	{Name: "segment.ms", Type: "LONG", Doc: "segment age before rolling",
		get: func(t Topic) string { return i64(t.SegmentMs) },
		set: func(t *Topic, v string) error { return parseI64(v, 1, &t.SegmentMs) }},
	{Name: "max.message.bytes", Type: "INT", Doc: "largest record batch accepted",
		get: func(t Topic) string { return i64(int64(t.MaxMessageBytes)) },
		set: func(t *Topic, v string) error {
			var n int64
			if err := parseI64(v, 0, &n); err != nil {
				return err
			}
			if n > 1<<31-1 {
				return fmt.Errorf("value %d out of range for INT", n)
			}
			t.MaxMessageBytes = int32(n)
			return nil
		}},
	{Name: "cleanup.policy", Type: "LIST", Doc: "delete (retention), compact (keep the latest value per key) or both",
		get: func(t Topic) string { return t.CleanupPolicy },
		set: func(t *Topic, v string) error {
			var del, comp bool
			for _, p := range strings.Split(v, ",") {
				switch strings.TrimSpace(p) {
				case "delete":
					del = true
				case "compact":
					comp = true
				default:
					return fmt.Errorf("cleanup.policy %q: %q is not delete or compact", v, p)
				}
			}
			switch {
			case del && comp:
				t.CleanupPolicy = "compact,delete"
			case comp:
				t.CleanupPolicy = "compact"
			default:
				t.CleanupPolicy = "delete"
			}
			return nil
		}},
	{Name: "delete.retention.ms", Type: "LONG", Doc: "how long a tombstone (or transaction marker) is kept after its cleaning",
		get: func(t Topic) string { return i64(t.DeleteRetentionMs) },
		set: func(t *Topic, v string) error { return parseI64(v, 0, &t.DeleteRetentionMs) }},
	{Name: "min.cleanable.dirty.ratio", Type: "DOUBLE", Doc: "dirty share of the cleanable log that triggers cleaning, 0 to 1",
		get: func(t Topic) string { return strconv.FormatFloat(t.MinCleanableDirtyRatio, 'g', -1, 64) },
		set: func(t *Topic, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			// !(f >= 0 && f <= 1) also refuses NaN, which every comparison fails: a NaN
			// ratio would make the cleaner's "ratio >= min" never true, so the topic
			// would silently never compact by ratio.
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("%q is not a number in [0, 1]", v)
			}
			t.MinCleanableDirtyRatio = f
			return nil
		}},
	{Name: "min.compaction.lag.ms", Type: "LONG", Doc: "a record stays uncompacted at least this long",
		get: func(t Topic) string { return i64(t.MinCompactionLagMs) },
		set: func(t *Topic, v string) error { return parseI64(v, 0, &t.MinCompactionLagMs) }},
	{Name: "max.compaction.lag.ms", Type: "LONG", Doc: "a record is eligible for compaction at most this long after it is written",
		get: func(t Topic) string { return i64(t.MaxCompactionLagMs) },
		set: func(t *Topic, v string) error { return parseI64(v, 1, &t.MaxCompactionLagMs) }},
	{Name: "preallocate", Type: "BOOLEAN", Doc: "reserve the active segment file ahead of the writes (Kawa's default: true); a change applies when the partition is next opened",
		get: func(t Topic) string { return strconv.FormatBool(!t.NoPreallocate) },
		set: func(t *Topic, v string) error {
			// Kafka's ConfigDef parses BOOLEAN case-insensitively as true or false only.
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				t.NoPreallocate = false
			case "false":
				t.NoPreallocate = true
			default:
				return fmt.Errorf("preallocate %q is not true or false", v)
			}
			return nil
		}},
	{Name: "message.timestamp.type", Type: "STRING", Doc: "CreateTime or LogAppendTime",
		get: func(t Topic) string { return t.TimestampType },
		set: func(t *Topic, v string) error {
			if v != "CreateTime" && v != "LogAppendTime" {
				return fmt.Errorf("message.timestamp.type %q is not CreateTime or LogAppendTime", v)
			}
			t.TimestampType = v
			return nil
		}},
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

// Get returns the string value of config name in t.
func (d Def) Get(t Topic) string { return d.get(t) }

// Set parses v into t. The error says why v is invalid.
func (d Def) Set(t *Topic, v string) error { return d.set(t, v) }

// Apply sets each name=value in kv on a copy of t, validating every value;
// on any error t is returned unchanged with the error.
func Apply(t Topic, kv map[string]string) (Topic, error) {
	out := t
	for k, v := range kv {
		d, ok := Lookup(k)
		if !ok {
			return t, fmt.Errorf("unknown topic config %q", k)
		}
		if err := d.Set(&out, v); err != nil {
			return t, fmt.Errorf("%s: %w", k, err)
		}
	}
	return out, nil
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// parseInt parses an INT config: a value in [min, 2147483647].
func parseInt(v string, min int64, dst *int64) error {
	var n int64
	if err := parseI64(v, min, &n); err != nil {
		return err
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("value %d out of range for INT", n)
	}
	*dst = n
	return nil
}

func parseI64(v string, min int64, dst *int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", v)
	}
	if n < min {
		return fmt.Errorf("value %d is below the minimum %d", n, min)
	}
	*dst = n
	return nil
}
