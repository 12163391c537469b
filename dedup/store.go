package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Result is the outcome of Process. It is meaningful when Process returns a
// nil error, and for Gap, which comes with an error wrapping ErrGap.
type Result int

const (
	// Applied: the key was new (or the sequence was the next one), fn ran and
	// its transaction committed together with the key.
	Applied Result = iota + 1
	// Duplicate: the key was already recorded (or, in sequence mode, the
	// incoming kawa-seq equals the stored one); fn was not called.
	Duplicate
	// Stale: sequence mode only; the incoming kawa-seq is below the stored
	// one (an older message arriving late, e.g. from a fenced relay); fn was
	// not called.
	Stale
	// Gap: sequence mode only; the incoming kawa-seq is more than one above
	// the stored one, so at least one message of the key has not been
	// applied yet. fn was not called and nothing was recorded; Process
	// returns an error wrapping ErrGap so that a loop that only checks errors
	// retries or parks the record instead of committing past it.
	Gap
)

func (r Result) String() string {
	switch r {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	case Gap:
		return "gap"
	}
	return "none"
}

// MaxKeyLen is the longest accepted key part, in bytes: the scope, a
// kawa-message-id value, a KeyFunc result, a kawa-source value and, in
// sequence mode, a record key. Longer input is rejected with ErrInvalidKey
// (PostgreSQL cannot index arbitrarily long text).
const MaxKeyLen = 512

var (
	// ErrInvalidKey: the record's key material is unusable (empty or too
	// long kawa-message-id, a KeyFunc result that is too long or not UTF-8,
	// a malformed kawa-seq, a kawa-seq without kawa-source). Nothing is
	// recorded; retrying the same record fails the same way.
	ErrInvalidKey = errors.New("dedup: invalid key")
	// ErrGap is wrapped by the error Process returns with Result Gap.
	ErrGap = errors.New("dedup: sequence gap")
	// ErrHandlerPanic is wrapped (as a *PanicError) when fn panics.
	ErrHandlerPanic = errors.New("dedup: handler panicked")
)

// PanicError is returned by Process when fn panics: the transaction was
// rolled back (so the key is released) and the panic value and stack are kept
// here instead of unwinding through the caller. errors.Is(err,
// ErrHandlerPanic) holds.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string   { return fmt.Sprintf("dedup: handler panicked: %v", e.Value) }
func (e *PanicError) Is(t error) bool { return t == ErrHandlerPanic }

// Named crash points, reached in this order inside one Process attempt. They
// are for tests (see WithCrashPoint): a test binary kills itself at a point
// to prove what a crash there does.
const (
	// PointKeyRecorded: the key row is inserted (or the sequence advanced)
	// in the open transaction, before fn.
	PointKeyRecorded = "dedup.key-recorded"
	// PointBeforeCommit: fn returned nil, the transaction is not committed.
	PointBeforeCommit = "dedup.before-commit"
	// PointAfterCommit: the key and fn's writes are committed; Process has
	// not returned yet (so the caller's offset commit has not happened).
	PointAfterCommit = "dedup.after-commit"
)

// Store processes records at most once per key, in the same database
// transaction as the handler's own SQL. Create it with New; it is safe for
// concurrent use.
type Store struct {
	db      *sql.DB
	dialect Dialect
	scope   string
	cfg     config
}

type config struct {
	keyFunc    func(*kgo.Record) string
	topicID    func(topic string) [16]byte
	sequence   bool
	hooks      Hooks
	crash      func(point string)
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
	pruneBatch int
	now        func() time.Time
	txOptions  *sql.TxOptions
}

// Option configures New.
type Option func(*config)

// WithKeyFunc sets the key used for records without a kawa-message-id header.
// f returns "" to fall back to the offset key. The key must be valid UTF-8 of
// at most MaxKeyLen bytes (else ErrInvalidKey). Use a business key that is
// the same on every copy of a message (an order id), never a payload hash.
func WithKeyFunc(f func(*kgo.Record) string) Option { return func(c *config) { c.keyFunc = f } }

// WithTopicIDs supplies the topic ID (KIP-516) used in offset keys instead of
// the topic name, so that a deleted and recreated topic does not reuse keys.
// franz-go's kgo.Record carries no topic ID, so the caller resolves it (for
// example from kgo.FetchTopic.TopicID); a zero ID falls back to the name.
func WithTopicIDs(f func(topic string) [16]byte) Option { return func(c *config) { c.topicID = f } }

// WithSequence turns on sequence mode: a record carrying both kawa-seq and
// kawa-source is checked against the highest applied sequence of (source,
// topic, record key) instead of being recorded by message id. See the package
// doc for the rules and the bootstrap of a key's first sequence.
func WithSequence() Option { return func(c *config) { c.sequence = true } }

// WithHooks sets the counter hook (nil: none).
func WithHooks(h Hooks) Option { return func(c *config) { c.hooks = h } }

// WithCrashPoint sets a function called at each named crash point
// (PointKeyRecorded, PointBeforeCommit, PointAfterCommit). It is for tests
// only; nil (the default) costs one comparison per point.
func WithCrashPoint(f func(point string)) Option { return func(c *config) { c.crash = f } }

// WithRetry sets how many times one Process call runs its transaction when it
// fails transiently (PostgreSQL 40001 serialization_failure and 40P01
// deadlock_detected, SQLite SQLITE_BUSY and SQLITE_LOCKED, from any
// statement including fn's own), and the first backoff, which doubles with
// full jitter up to 1 s. Defaults: 5 attempts, 10 ms. attempts < 1 means 1;
// firstBackoff <= 0 means rerun at once.
func WithRetry(attempts int, firstBackoff time.Duration) Option {
	return func(c *config) { c.attempts, c.backoff = max(attempts, 1), max(firstBackoff, 0) }
}

// WithTxOptions sets the options of the transactions Process opens (nil: the
// driver's default, READ COMMITTED on PostgreSQL). Under SERIALIZABLE,
// concurrent copies of one message end in a retried 40001, then Duplicate.
func WithTxOptions(o *sql.TxOptions) Option { return func(c *config) { c.txOptions = o } }

// New returns a Store for db (opened with the driver of dialect) that scopes
// every key by scope, the name of the consumer or handler: two handlers that
// share a database and consume the same message each process it once. The
// scope must be non-empty UTF-8 of at most MaxKeyLen bytes. New does not touch
// the database; call Migrate (or apply DDL) first.
//
// For SQLite, open the database with _txlock=immediate, WAL and a
// busy_timeout (package sqlurl does), else a concurrent writer gets
// SQLITE_BUSY at once instead of waiting its turn.
func New(db *sql.DB, dialect Dialect, scope string, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("dedup: nil *sql.DB")
	}
	if dialect != SQLite && dialect != Postgres {
		return nil, fmt.Errorf("dedup: unknown dialect %d", int(dialect))
	}
	if err := checkText("scope", scope); err != nil {
		return nil, err
	}
	s := &Store{db: db, dialect: dialect, scope: scope, cfg: config{
		attempts:   5,
		backoff:    10 * time.Millisecond,
		maxBackoff: time.Second,
		pruneBatch: 500,
		now:        time.Now,
	}}
	for _, o := range opts {
		o(&s.cfg)
	}
	return s, nil
}

// Scope returns the scope given to New.
func (s *Store) Scope() string { return s.scope }

// Process runs fn at most once per key of rec, inside one database
// transaction that also records the key, and commits them together.
//
// The steps: begin; record the key first (INSERT ... ON CONFLICT DO NOTHING,
// or the sequence step); if it was already there, roll back and return
// Duplicate (or Stale, or Gap with ErrGap) without calling fn; else call fn
// with the transaction and commit. A concurrent copy of the same message
// blocks on the key row until the first copy commits (then it is Duplicate)
// or rolls back (then it runs), so fn's effects commit once.
//
// If fn returns an error or panics, the transaction rolls back, which
// releases the key: a later delivery runs fn again. The error is returned
// wrapped; a panic comes back as a *PanicError (the panic does not unwind
// through Process). Transient errors (see WithRetry) rerun the whole
// transaction, fn included, so fn may be called more than once but commits
// at most once; fn must do only work in tx (a network call inside fn is not
// undone by the rollback) and must not commit or roll back tx itself. Other database errors are returned wrapped, and
// nothing is recorded. If the commit itself fails with a broken connection,
// whether it happened is unknown; the redelivered record then answers
// Duplicate or Applied, never both.
//
// The key, in order: kawa-message-id (sequence mode: kawa-seq with
// kawa-source first), then the KeyFunc, then the record's topic (ID or
// name), partition and offset. Key errors wrap ErrInvalidKey.
func (s *Store) Process(ctx context.Context, rec *kgo.Record, fn func(ctx context.Context, tx *sql.Tx) error) (Result, error) {
	k, err := s.keyOf(rec)
	if err != nil {
		s.event(EventError)
		return 0, err
	}
	backoff := s.cfg.backoff
	for attempt := 1; ; attempt++ {
		res, err := s.attempt(ctx, rec, k, fn)
		if err == nil {
			s.event(res.event())
			return res, nil
		}
		if res == Gap {
			s.event(EventGap)
			return Gap, err
		}
		if attempt >= s.cfg.attempts || !s.transient(err) || ctx.Err() != nil {
			s.event(EventError)
			return 0, err
		}
		s.event(EventRetried)
		t := time.NewTimer(jitter(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			s.event(EventError)
			return 0, fmt.Errorf("%w (retry abandoned: %w)", err, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, s.cfg.maxBackoff)
	}
}

// jitter is a full-jitter wait below d (0 when d is 0).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// attempt is one transaction of Process.
func (s *Store) attempt(ctx context.Context, rec *kgo.Record, k key, fn func(context.Context, *sql.Tx) error) (Result, error) {
	tx, err := s.db.BeginTx(ctx, s.cfg.txOptions)
	if err != nil {
		return 0, fmt.Errorf("dedup: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback() // the error of a rollback after a failure adds nothing
		}
	}()
	var res Result
	if k.seq > 0 {
		res, err = s.advanceSeq(ctx, tx, k)
	} else {
		res, err = s.insertKey(ctx, tx, rec, k)
	}
	if err != nil || res != Applied {
		return res, err
	}
	s.point(PointKeyRecorded)
	if err := callHandler(ctx, tx, fn); err != nil {
		return 0, err
	}
	s.point(PointBeforeCommit)
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("dedup: commit: %w", err)
	}
	committed = true
	s.point(PointAfterCommit)
	return Applied, nil
}

func callHandler(ctx context.Context, tx *sql.Tx, fn func(context.Context, *sql.Tx) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return fmt.Errorf("dedup: handler: %w", err)
	}
	return nil
}

func (s *Store) insertKey(ctx context.Context, tx *sql.Tx, rec *kgo.Record, k key) (Result, error) {
	d := s.dialect
	r, err := tx.ExecContext(ctx, `INSERT INTO kawa_dedup (scope, key, seen_at, topic, "partition", "offset") VALUES (`+
		d.ph(1)+`, `+d.ph(2)+`, `+d.ph(3)+`, `+d.ph(4)+`, `+d.ph(5)+`, `+d.ph(6)+`) ON CONFLICT (scope, key) DO NOTHING`,
		s.scope, k.text, s.cfg.now().UnixMicro(), rec.Topic, rec.Partition, rec.Offset)
	if err != nil {
		return 0, fmt.Errorf("dedup: record key: %w", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("dedup: record key: %w", err)
	}
	if n == 0 {
		return Duplicate, nil
	}
	return Applied, nil
}

func (s *Store) point(name string) {
	if s.cfg.crash != nil {
		s.cfg.crash(name)
	}
}

func (s *Store) event(e Event) {
	if s.cfg.hooks != nil {
		s.cfg.hooks.OnEvent(e)
	}
}

// key is a record's resolved dedup identity: text for kawa_dedup, or, when
// seq > 0, the sequence-mode identity.
type key struct {
	text   string
	seq    int64
	source string
	rkey   []byte
	topic  string
}

// Key prefixes keep the three key sources apart in one column.
const (
	prefixMessageID = "m:"
	prefixUser      = "u:"
	prefixOffset    = "o:"
)

func (s *Store) keyOf(rec *kgo.Record) (key, error) {
	if rec == nil {
		return key{}, fmt.Errorf("%w: nil record", ErrInvalidKey)
	}
	if s.cfg.sequence {
		seqV, hasSeq := header(rec, HeaderSequence)
		src, hasSrc := header(rec, HeaderSource)
		switch {
		case hasSeq && hasSrc:
			n, err := strconv.ParseInt(seqV, 10, 64)
			if err != nil || n < 1 {
				return key{}, fmt.Errorf("%w: %s header %q is not a positive decimal", ErrInvalidKey, HeaderSequence, seqV)
			}
			if err := checkText(HeaderSource, src); err != nil {
				return key{}, err
			}
			if len(rec.Key) > MaxKeyLen {
				return key{}, fmt.Errorf("%w: record key of %d bytes is over %d", ErrInvalidKey, len(rec.Key), MaxKeyLen)
			}
			return key{seq: n, source: src, rkey: append([]byte{}, rec.Key...), topic: rec.Topic}, nil
		case hasSeq != hasSrc:
			return key{}, fmt.Errorf("%w: %s and %s must come together", ErrInvalidKey, HeaderSequence, HeaderSource)
		}
	}
	if id, ok := header(rec, HeaderMessageID); ok {
		if err := checkText(HeaderMessageID, id); err != nil {
			return key{}, err
		}
		return key{text: prefixMessageID + id}, nil
	}
	if s.cfg.keyFunc != nil {
		if k := s.cfg.keyFunc(rec); k != "" {
			if err := checkText("key function result", k); err != nil {
				return key{}, err
			}
			return key{text: prefixUser + k}, nil
		}
	}
	topic := rec.Topic
	if s.cfg.topicID != nil {
		if id := s.cfg.topicID(rec.Topic); id != ([16]byte{}) {
			topic = fmt.Sprintf("%x", id[:])
		}
	}
	return key{text: prefixOffset + topic + "/" + strconv.Itoa(int(rec.Partition)) + "/" + strconv.FormatInt(rec.Offset, 10)}, nil
}

// header returns the value of the first header named name.
func header(rec *kgo.Record, name string) (string, bool) {
	for _, h := range rec.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// checkText rejects what a TEXT primary-key column cannot hold well.
func checkText(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, what)
	case len(v) > MaxKeyLen:
		return fmt.Errorf("%w: %s of %d bytes is over %d", ErrInvalidKey, what, len(v), MaxKeyLen)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, what)
	}
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			return fmt.Errorf("%w: %s contains NUL", ErrInvalidKey, what)
		}
	}
	return nil
}

// transient reports whether err is worth rerunning the whole transaction
// for. The drivers' error types are matched by method so that this package
// imports neither driver: pgconn.PgError has SQLState() string, and
// modernc.org/sqlite's *Error has Code() int (extended codes; the low byte
// is the primary code).
func (s *Store) transient(err error) bool {
	switch s.dialect {
	case Postgres:
		var pg interface{ SQLState() string }
		if errors.As(err, &pg) {
			switch pg.SQLState() {
			case "40001", "40P01": // serialization_failure, deadlock_detected
				return true
			}
		}
	case SQLite:
		var sq interface{ Code() int }
		if errors.As(err, &sq) {
			switch sq.Code() & 0xff {
			case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
				return true
			}
		}
	}
	return false
}

// ph is the dialect's i-th (1-based) bind placeholder.
func (d Dialect) ph(i int) string {
	if d == Postgres {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

// lockID derives a PostgreSQL advisory lock key from a name.
func lockID(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}
