package group

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Record is one entry of the __consumer_offsets log. Value nil is a tombstone: replay deletes the key.
// The encoding is this package's own (records.go); the broker stores the bytes as given.
type Record struct {
	Key, Value []byte
}

// Store is the durable log behind the coordinator, implemented by the broker over the __consumer_offsets
// partition. Append returns once recs are durable (fsynced per the broker's flush policy), in the order
// given and, ideally, atomically (one record batch). An error means none of recs were stored.
// The coordinator calls Append from one goroutine only, so appends never race each other.
type Store interface {
	Append(ctx context.Context, recs []Record) error
}

// Config holds the coordinator's knobs. Zero fields take Kafka's defaults (noted per field).
type Config struct {
	// OffsetsRetention is offsets.retention.minutes: offsets of an Empty group expire this long after
	// the group became Empty (simple groups: after their commit). Default 7 days.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms. Default 10 minutes.
	OffsetsRetentionCheckInterval time.Duration
	// MinSessionTimeout and MaxSessionTimeout are group.min/max.session.timeout.ms; a JoinGroup outside
	// them gets INVALID_SESSION_TIMEOUT. Defaults 6 s and 30 min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long the first rebalance of an
	// Empty group waits for more members. Kafka's default is 3 s; Kawa's is 0.
	InitialRebalanceDelay time.Duration
	// NewMemberJoinTimeout is group.classic.new.member.join.timeout.ms: a new member whose JoinGroup is
	// parked longer than this is dropped. Default 5 min.
	NewMemberJoinTimeout time.Duration
	// MaxMetadataSize is offset.metadata.max.bytes; longer commit metadata gets OFFSET_METADATA_TOO_LARGE.
	// Default 4096.
	MaxMetadataSize int
	// TopicExists reports whether topic/partition exists; commits to anything else get
	// UNKNOWN_TOPIC_OR_PARTITION. Nil accepts every partition.
	TopicExists func(topic string, partition int32) bool
	// TopicName resolves a topic ID (OffsetCommit v10+, OffsetFetch v10+, TxnOffsetCommit v6+).
	// Nil, or ok=false, answers UNKNOWN_TOPIC_ID.
	TopicName func(id [16]byte) (name string, ok bool)
	// TopicID gives the ID of a topic name for OffsetFetch v10+ "all topics" answers. Nil leaves IDs zero.
	TopicID func(topic string) (id [16]byte, ok bool)
	// Topics lists the topics consumer-protocol groups (KIP-848) may subscribe to, for their
	// server-side assignment. Nil: none.
	Topics func() []TopicInfo
	// ConsumerAssignor is group.consumer.assignors' default: "uniform" (default) or "range".
	ConsumerAssignor string
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms: a consumer-protocol member
	// silent this long is fenced. Default 45 s.
	ConsumerSessionTimeout time.Duration
	// ConsumerMaxSize is group.consumer.max.size: a join that would make a consumer group larger is
	// GROUP_MAX_SIZE_REACHED. 0: no limit (Kafka's default is Integer.MAX_VALUE).
	ConsumerMaxSize int
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms, returned to members.
	// Default 5 s.
	ConsumerHeartbeatInterval time.Duration
	// Now is the clock for commit timestamps and retention. Nil means time.Now. Timers (session,
	// rebalance, retention checks) use the runtime's timers, so tests drive them with testing/synctest.
	Now    func() time.Time
	Logger *slog.Logger
}

func (cfg Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.OffsetsRetention, 7*24*time.Hour)
	def(&cfg.OffsetsRetentionCheckInterval, 10*time.Minute)
	def(&cfg.MinSessionTimeout, 6*time.Second)
	def(&cfg.MaxSessionTimeout, 30*time.Minute)
	def(&cfg.NewMemberJoinTimeout, 5*time.Minute)
	def(&cfg.ConsumerSessionTimeout, 45*time.Second)
	def(&cfg.ConsumerHeartbeatInterval, 5*time.Second)
	if cfg.ConsumerAssignor == "" {
		cfg.ConsumerAssignor = assignorUniform
	}
	if cfg.InitialRebalanceDelay < 0 {
		cfg.InitialRebalanceDelay = 0
	}
	if cfg.MaxMetadataSize <= 0 {
		cfg.MaxMetadataSize = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Coordinator is Kafka's classic group coordinator for every group of one broker. See doc.go.
type Coordinator struct {
	cfg   Config
	store Store

	mu      sync.Mutex // guards everything below, and all group and member state
	groups  map[string]*group
	loading bool // Load is replaying; requests get COORDINATOR_LOAD_IN_PROGRESS
	closed  bool // Close was called; requests get COORDINATOR_NOT_AVAILABLE
	queue   []*write
	// appending: the writer is storing a batch taken from queue (its writes are not done yet).
	appending bool
	// nextPos is the log position (index in __consumer_offsets, counted as Load counts) the next stored
	// record takes. Positions order offsets the way Kafka's record offsets do (see offset.pos).
	nextPos int64
	wake    *sync.Cond // signals the writer that queue grew or closed changed
	sweep   *time.Timer

	stopWriter context.CancelFunc // cancels an Append in flight at Close
	writerCtx  context.Context
	writerDone chan struct{}
	closeOnce  sync.Once
}

// New returns a running coordinator with no groups. Call Load before serving to restore state from
// the log; until Close it owns one writer goroutine and the timers of its groups.
func New(cfg Config, store Store) *Coordinator {
	c := &Coordinator{
		cfg:        cfg.withDefaults(),
		store:      store,
		groups:     make(map[string]*group),
		writerDone: make(chan struct{}),
	}
	c.wake = sync.NewCond(&c.mu)
	c.writerCtx, c.stopWriter = context.WithCancel(context.Background())
	go c.runWriter()
	c.mu.Lock()
	c.scheduleSweepLocked()
	c.mu.Unlock()
	return c
}

// Close stops timers and the writer. Parked JoinGroup and SyncGroup calls return NOT_COORDINATOR,
// writes not yet stored fail, and later requests get COORDINATOR_NOT_AVAILABLE. Close waits for an
// Append in flight to return.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		stopTimer(&c.sweep)
		for _, g := range c.groups {
			c.unloadGroupLocked(g)
		}
		c.wake.Broadcast()
		c.mu.Unlock()
		c.stopWriter()
		<-c.writerDone
	})
}

// unloadGroupLocked stops g's timers and answers its parked requests, as Kafka does when a
// coordinator partition is unloaded.
func (c *Coordinator) unloadGroupLocked(g *group) {
	stopTimer(&g.joinTimer)
	stopTimer(&g.syncTimer)
	for _, p := range g.pending {
		stopTimer(&p.timer)
	}
	if g.cg != nil {
		for _, m := range g.cg.members {
			stopTimer(&m.sessionTimer)
			stopTimer(&m.revokeTimer)
		}
	}
	for _, m := range g.members {
		stopTimer(&m.hbTimer)
		g.completeJoin(m, joinResult{code: kerr.NotCoordinator.Code, memberID: m.id, generation: -1})
		g.completeSync(m, syncResult{code: kerr.NotCoordinator.Code})
	}
}

// availableLocked is the error every request gets before looking at its group: 0 when serving.
func (c *Coordinator) availableLocked() int16 {
	switch {
	case c.closed:
		return kerr.CoordinatorNotAvailable.Code
	case c.loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

func (c *Coordinator) now() time.Time { return c.cfg.Now() }

// newGroupLocked creates an Empty group and registers it.
func (c *Coordinator) newGroupLocked(name string) *group {
	g := newGroup(name, c.now())
	c.groups[name] = g
	return g
}

// Client is who sent a JoinGroup: the request header's client.id and the client host (the
// connection's remote address, "/ip" as Kafka shows it). The broker passes it with each JoinGroup:
// Kafka builds member IDs from the client.id and DescribeGroups shows both.
type Client struct{ ID, Host string }

// newMemberID is Kafka's member ID shape: the client.id (or group.instance.id for static members),
// a dash and a random UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ms converts a protocol millisecond count to a Duration.
func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
