// Package config holds Kawa's typed broker configuration and the registry of
// Kafka topic configs Kawa understands (name, type, default, validation).
//
// Topic config names and meanings follow Apache Kafka's topic-level configs
// (https://kafka.apache.org/documentation/#topicconfigs).
package config

import (
	"fmt"
	"math"
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
	// TopicDefaults are the broker-level defaults of topic configs set at start (Kafka's log.retention.ms,
	// compression.type, min.insync.replicas, ...), keyed by the topic config's name (retention.ms), values in
	// Kafka's string form. A topic without an override takes them; DescribeConfigs reports them as
	// STATIC_BROKER_CONFIG. TopicDefaultsConfig validates them.
	TopicDefaults map[string]string

	ProducerIDExpiration time.Duration // producer.id.expiration.ms
	OffsetsRetention     time.Duration // offsets.retention.minutes
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms (KIP-848), the interval
	// consumer-protocol members are told to heartbeat at; 0 takes Kafka's 5 s.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms; 0 takes Kafka's 45 s.
	ConsumerSessionTimeout time.Duration
	// ConsumerMaxSize is group.consumer.max.size: members a consumer group may have; 0 = no limit
	// (Kafka's default, Integer.MAX_VALUE).
	ConsumerMaxSize int
	// ShareMaxRecordLocks is group.share.partition.max.record.locks (KIP-932): the in-flight window of
	// one share-partition, so the records it holds acquired at most; 0 takes Kafka 4.1's 2000.
	ShareMaxRecordLocks int
	// ShareMaxSessions is group.share.max.share.sessions: share sessions open at once; opening one more is
	// SHARE_SESSION_LIMIT_REACHED. 0 takes Kafka's 2000.
	ShareMaxSessions int
	// ShareSnapshotUpdateRecords is share.coordinator.snapshot.update.records.per.snapshot: update records
	// written for a share-partition between snapshots of it in __share_group_state; 0 takes Kafka's 500.
	ShareSnapshotUpdateRecords int
	// SharePruneInterval is share.coordinator.state.topic.prune.interval.ms: the time between prune rounds
	// of __share_group_state (its log start advances past records newer snapshots replace); 0 takes Kafka's
	// 5 min, a negative value makes every change a round (tests).
	SharePruneInterval time.Duration

	RetentionCheck time.Duration // log.retention.check.interval.ms
	MaxInFlight    int           // requests read ahead per connection

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
	// FailedAuthenticationDelay is connection.failed.authentication.delay.ms:
	// how long the answer to a failed SASL login is held back (0: none).
	FailedAuthenticationDelay time.Duration
	// MaxOpenLogFiles bounds the segment files (.log, .index, .timeindex) held open over all partitions; idle
	// ones are closed and reopened on use. 0 = half the process's open-file limit.
	MaxOpenLogFiles int

	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms: how long the first rebalance of
	// an Empty classic group waits for more members (Kawa's default 0; Kafka's 3 s).
	GroupInitialRebalanceDelay time.Duration

	TxnMaxTimeout             time.Duration // transaction.max.timeout.ms (default 15 min)
	TransactionalIDExpiration time.Duration // transactional.id.expiration.ms (default 7 days)
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots: KIP-227 fetch sessions cached at
	// once (0 = Kafka's default 1000; negative = none, every fetch is a full one).
	FetchSessionCacheSlots int

	// The log cleaner (compacted topics).
	CleanerBackoff    time.Duration // log.cleaner.backoff.ms: wait between rounds (default 15 s)
	CleanerMapEntries int           // keys in one pass's offset map (log.cleaner.dedupe.buffer.size / ~40 B); 0 = cleaner.DefaultMapEntries
	// OffsetsTopicSegmentBytes is the segment size of the compacted internal topics __consumer_offsets and
	// __transaction_state (Kafka's offsets.topic.segment.bytes and transaction.state.log.segment.bytes);
	// 0 = 100 MiB, Kafka's default.
	OffsetsTopicSegmentBytes int64
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
	if b.OffsetsTopicSegmentBytes <= 0 {
		b.OffsetsTopicSegmentBytes = 100 << 20
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
	if b.FetchSessionCacheSlots == 0 {
		b.FetchSessionCacheSlots = 1000
	}
	return b
}

// TopicDefaultsConfig returns the topic configs a topic without overrides has: Kafka's defaults with
// TopicDefaults applied. The error (from Apply) names the first invalid default.
func (b Broker) TopicDefaultsConfig() (Topic, error) {
	return Apply(DefaultTopic(), b.TopicDefaults)
}
