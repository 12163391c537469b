package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kawa-broker/kawa/dedup"
)

// DefaultShards is the shard count when Config.Shards is zero.
const DefaultShards = 16

// Tx is the application's open transaction: Enqueue writes through it and
// nothing else. *sql.Tx satisfies it; so does any adapter with the same two
// methods. There is deliberately no ambient or context-carried transaction:
// a caller that has none cannot enqueue, so the outbox cannot be bypassed by
// accident.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is what the application publishes. Topic is required. Key selects
// the partition (franz-go's murmur2 key hash, as Kafka's default
// partitioner) and scopes the per-key sequence; a nil and an empty key are
// the same key, published as a nil key (franz-go then spreads such records
// over partitions, so keyless records have no order between them).
// Partition, when non-nil, pins the record to that partition instead.
// Headers must not use the names of dedup's header contract (kawa-*,
// traceparent): Enqueue sets those.
type Record struct {
	Topic     string
	Key       []byte
	Value     []byte
	Headers   []Header
	Partition *int32
}

// MessageID is a message's unique id: a UUIDv7 in its 36-character text form
// (time-ordered, so index inserts stay local), sent as dedup.HeaderMessageID.
type MessageID string

// Config names an outbox.
type Config struct {
	// Source identifies this outbox (say, the service and database): it is
	// sent as dedup.HeaderSource, scopes kawa-seq, and names the relay's
	// transactional.ids (kawa-outbox-<Source>-<shard>) and progress topic.
	// Letters, digits, '.', '_' and '-' only, at most 100 bytes. Required
	// by Enqueue and NewRelay; tools that only read status or handle dead
	// rows may leave it empty.
	Source string
	// Shards is the number of shards rows are hashed into (by topic and
	// key); each shard is leased by one relay at a time and, in
	// transactional mode, has its own transactional.id. Default
	// DefaultShards. Every process using one database must use the same
	// count; the relay refuses to start when rows exist for shards it does
	// not know.
	Shards int
	// TraceParent returns the W3C traceparent of ctx, for tracing
	// libraries; the default reads the value set by WithTraceParent.
	TraceParent func(ctx context.Context) string
}

// Outbox writes rows into one database's outbox tables and builds relays for
// them. It is safe for concurrent use.
type Outbox struct {
	db      *sql.DB
	dialect dedup.Dialect
	source  string
	shards  int
	trace   func(context.Context) string
	sqlUpsertSeq,
	sqlInsert string
}

var sourceRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// Errors returned by this package.
var (
	ErrNoTopic        = errors.New("outbox: record has no topic")
	ErrNoSource       = errors.New("outbox: Config.Source is empty")
	ErrReservedHeader = errors.New("outbox: record header uses a name Enqueue sets")
	ErrNotFound       = errors.New("outbox: no such dead row")
	ErrLeaseLost      = errors.New("outbox: shard lease lost")
)

// New returns the outbox of db. db is used by relays and by the dead-row and
// status calls; Enqueue writes only through the caller's Tx. Run Migrate
// first.
func New(db *sql.DB, d dedup.Dialect, cfg Config) (*Outbox, error) {
	if d != dedup.SQLite && d != dedup.Postgres {
		return nil, fmt.Errorf("outbox: unknown dialect %v", d)
	}
	if cfg.Source != "" && !sourceRE.MatchString(cfg.Source) {
		return nil, fmt.Errorf("outbox: Source %q: want 1-100 of [A-Za-z0-9._-]", cfg.Source)
	}
	if cfg.Shards == 0 {
		cfg.Shards = DefaultShards
	}
	if cfg.Shards < 1 || cfg.Shards > 1024 {
		return nil, fmt.Errorf("outbox: Shards %d: want 1..1024", cfg.Shards)
	}
	if cfg.TraceParent == nil {
		cfg.TraceParent = traceParentFrom
	}
	o := &Outbox{db: db, dialect: d, source: cfg.Source, shards: cfg.Shards, trace: cfg.TraceParent}
	o.sqlUpsertSeq = rebind(d, `INSERT INTO kawa_outbox_keys (topic, msg_key, last_seq) VALUES (?, ?, 1)
ON CONFLICT (topic, msg_key) DO UPDATE SET last_seq = kawa_outbox_keys.last_seq + 1
RETURNING last_seq`)
	o.sqlInsert = rebind(d, `INSERT INTO kawa_outbox (shard, topic, msg_key, value, headers, part, seq, message_id, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	return o, nil
}

// Source returns the outbox's Config.Source.
func (o *Outbox) Source() string { return o.source }

// Shards returns the outbox's shard count.
func (o *Outbox) Shards() int { return o.shards }

// Enqueue adds rec to the outbox inside the application's transaction tx:
// the record reaches Kafka if and only if tx commits. It assigns the message
// id, copies the traceparent of ctx, and takes the key's next kawa-seq by
// upserting the (topic, key) counter row in tx. That row lock serialises
// writers of one key, so kawa-seq order is commit order per key, and a
// transaction that rolls back gives its number back. A second writer of the
// same key waits for the first to finish (on SQLite every writer waits: one
// write transaction at a time).
//
// Errors: ErrNoSource, ErrNoTopic, ErrReservedHeader, or the database's error wrapped
// (tx is then unusable on PostgreSQL; roll it back).
func (o *Outbox) Enqueue(ctx context.Context, tx Tx, rec Record) (MessageID, error) {
	if o.source == "" {
		return "", ErrNoSource
	}
	if rec.Topic == "" {
		return "", ErrNoTopic
	}
	for _, h := range rec.Headers {
		if reserved(h.Key) {
			return "", fmt.Errorf("%w: %q", ErrReservedHeader, h.Key)
		}
	}
	key := rec.Key
	if key == nil {
		key = []byte{}
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, o.sqlUpsertSeq, rec.Topic, key).Scan(&seq); err != nil {
		return "", fmt.Errorf("outbox: enqueue: next kawa-seq: %w", err)
	}
	id := newMessageID(time.Now())
	hs := make([]Header, 0, len(rec.Headers)+4)
	hs = append(hs, rec.Headers...)
	hs = append(hs,
		Header{dedup.HeaderMessageID, []byte(id)},
		Header{dedup.HeaderSequence, []byte(strconv.FormatInt(seq, 10))},
		Header{dedup.HeaderSource, []byte(o.source)})
	if tp := o.trace(ctx); tp != "" {
		hs = append(hs, Header{dedup.HeaderTraceParent, []byte(tp)})
	}
	enc, err := encodeHeaders(hs)
	if err != nil {
		return "", err
	}
	var part any
	if rec.Partition != nil {
		if *rec.Partition < 0 {
			return "", fmt.Errorf("outbox: enqueue: negative partition %d", *rec.Partition)
		}
		part = int64(*rec.Partition)
	}
	shard := shardOf(rec.Topic, key, o.shards)
	if _, err := tx.ExecContext(ctx, o.sqlInsert, shard, rec.Topic, key, rec.Value, enc, part, seq, string(id), time.Now().UnixMilli()); err != nil {
		return "", fmt.Errorf("outbox: enqueue: insert: %w", err)
	}
	return id, nil
}

func reserved(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "kawa-") || n == dedup.HeaderTraceParent
}

// shardOf hashes topic and key (FNV-1a, with a 0 byte between them) into
// [0, shards).
func shardOf(topic string, key []byte, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(key)
	return int(h.Sum32() % uint32(shards))
}

type wireHeader struct {
	K string `json:"k"`
	V []byte `json:"v"`
}

// encodeHeaders stores headers as a JSON array of {"k": name, "v": base64}.
func encodeHeaders(hs []Header) ([]byte, error) {
	w := make([]wireHeader, len(hs))
	for i, h := range hs {
		w[i] = wireHeader{h.Key, h.Value}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("outbox: encode headers: %w", err)
	}
	return b, nil
}

func decodeHeaders(b []byte) ([]Header, error) {
	var w []wireHeader
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("outbox: malformed headers column: %w", err)
	}
	hs := make([]Header, len(w))
	for i, h := range w {
		hs[i] = Header{h.K, h.V}
	}
	return hs, nil
}

// newMessageID returns a UUIDv7 (RFC 9562 section 5.7): 48 bits of unix
// milliseconds, version 7, 74 random bits, variant 10.
func newMessageID(now time.Time) MessageID {
	var u [16]byte
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint64(u[0:8], ms<<16)
	rand.Read(u[6:])
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return MessageID(s[:])
}

type traceKey struct{}

// WithTraceParent returns ctx carrying a W3C traceparent value
// ("00-<trace-id>-<span-id>-<flags>") that Enqueue copies into the
// traceparent header. Tracing libraries can use Config.TraceParent instead.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceparent)
}

func traceParentFrom(ctx context.Context) string {
	s, _ := ctx.Value(traceKey{}).(string)
	return s
}
