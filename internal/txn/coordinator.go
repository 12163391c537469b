package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/producer"
)

// Store is the durable log behind the coordinator (partition 0 of
// __transaction_state), implemented by the broker. Append returns once recs
// are durable per the broker's flush policy, in the given order; an error
// means none may be relied on. It must be safe for concurrent use: the
// coordinator appends for different transactional.ids at once, but never two
// records of one transactional.id concurrently.
type Store interface {
	Append(ctx context.Context, recs []Record) error
}

// Markers writes transaction markers (control batches, KIP-98) to data
// partitions. WriteMarker returns once the marker is durable. It returns
// kerr.UnknownTopicOrPartition when the partition no longer exists (the
// marker is then skipped), kerr.InvalidProducerEpoch or
// kerr.TransactionCoordinatorFenced when a newer marker already closed the
// producer there (also skipped), and any other error to be retried.
type Markers interface {
	WriteMarker(ctx context.Context, tp TopicPartition, m producer.MarkerInfo) error
}

// Groups applies a transaction's end to the offsets it staged in a consumer
// group (group.Coordinator.CompleteTxn). It must be idempotent; errors are
// retried.
type Groups interface {
	CompleteTxn(ctx context.Context, group string, producerID int64, commit bool) error
}

// IDs hands out cluster-unique producer IDs (producer.Allocator).
type IDs interface {
	Next() (int64, error)
}

// Config holds the coordinator's knobs; zero fields take the defaults noted.
type Config struct {
	// MaxTimeout is transaction.max.timeout.ms: InitProducerId asking for a
	// longer transaction.timeout.ms gets INVALID_TRANSACTION_TIMEOUT.
	// Default 15 minutes.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms: an idle
	// transactional.id with no open transaction is removed after it.
	// Default 7 days.
	IDExpiration time.Duration
	// ExpirationCheck is how often expired transactional.ids are looked for
	// (transaction.remove.expired.transaction.cleanup.interval.ms). Default 1 h.
	ExpirationCheck time.Duration
	// BusyWait is how long a request for a transactional.id that is in the
	// middle of a transition (a record being written, markers being written)
	// waits for it before answering CONCURRENT_TRANSACTIONS. Default 500 ms.
	BusyWait time.Duration
	// CoordinatorEpoch is written into every marker. Kawa is one node, so it
	// never changes. Default 0.
	CoordinatorEpoch int32
	// StallMarkers is a test hook: when non-nil, a transaction's markers are
	// not written until it is closed (crash tests SIGKILL the broker between
	// the EndTxn acknowledgement and the markers).
	StallMarkers <-chan struct{}
	// Now is the clock for timestamps. Nil means time.Now. Timers use the
	// runtime's timers, so tests drive them with testing/synctest.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.MaxTimeout, 15*time.Minute)
	def(&c.IDExpiration, 7*24*time.Hour)
	def(&c.ExpirationCheck, time.Hour)
	def(&c.BusyWait, 500*time.Millisecond)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrClosed is what requests get (as COORDINATOR_NOT_AVAILABLE) after Close.
var ErrClosed = errors.New("txn: coordinator closed")

// Coordinator is the transaction coordinator of one broker. See doc.go.
type Coordinator struct {
	cfg     Config
	store   Store
	markers Markers
	groups  Groups
	ids     IDs
	lg      *slog.Logger

	mu     sync.Mutex // guards txns and every txn; never held across I/O
	txns   map[string]*txn
	closed bool

	ctx    context.Context // ends at Close; bounds every background write
	cancel context.CancelFunc
	wg     sync.WaitGroup // completions, timeout aborts, the expiration loop
}

// txn is one transactional.id: its durable Metadata plus what only exists in
// memory. All fields are guarded by Coordinator.mu.
type txn struct {
	id  string
	cur Metadata
	// pending is the state a record being written moves to (noState when
	// none). While set, other transitions wait or get CONCURRENT_TRANSACTIONS.
	pending State
	// changed is closed and replaced whenever pending or cur changes.
	changed chan struct{}
	// pins counts produce appends and TxnOffsetCommits verified against the
	// open transaction and not yet done; markers wait for zero (KIP-890
	// part 1: a verified write always lands before its marker).
	pins     int
	unpinned chan struct{} // closed when pins drops to 0
	timer    *time.Timer   // transaction.timeout.ms of an Ongoing transaction
}

func newTxn(id string, m Metadata) *txn {
	return &txn{id: id, cur: m, pending: noState, changed: make(chan struct{})}
}

// busy reports a transition in flight: a record being written or markers
// being written.
func (t *txn) busy() bool {
	return t.pending != noState || t.cur.State == PrepareCommit || t.cur.State == PrepareAbort
}

func (t *txn) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// New returns a coordinator with no transactional.ids. Call Load before
// serving; Load starts the background work that Close stops.
func New(cfg Config, store Store, markers Markers, groups Groups, ids IDs) *Coordinator {
	cfg = cfg.withDefaults()
	c := &Coordinator{
		cfg: cfg, store: store, markers: markers, groups: groups, ids: ids, lg: cfg.Logger,
		txns: make(map[string]*txn),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Load rebuilds state from the __transaction_state records in log order (the
// last record of a transactional.id wins; a tombstone removes it), then
// finishes what the log says was decided: every PrepareCommit/PrepareAbort
// gets its markers written and completes, every Ongoing transaction gets its
// timeout (it may abort at once). A record it cannot decode is an error:
// guessing could commit or abort the wrong transaction.
func (c *Coordinator) Load(recs []Record) error {
	state := make(map[string]Metadata)
	for i, r := range recs {
		id, err := decodeKey(r.Key)
		if err != nil {
			return fmt.Errorf("txn: record %d: %w", i, err)
		}
		if r.Value == nil {
			delete(state, id)
			continue
		}
		m, err := decodeValue(r.Value)
		if err != nil {
			return fmt.Errorf("txn: record %d (%q): %w", i, id, err)
		}
		state[id] = m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, m := range state {
		t := newTxn(id, m)
		c.txns[id] = t
		c.afterTransitLocked(t)
	}
	c.wg.Add(1)
	go c.expirationLoop()
	return nil
}

// Close stops timers and background work and waits for it. A transaction
// whose markers were not all written stays PrepareCommit/PrepareAbort in the
// log and is completed by the next Load. Later requests get
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, t := range c.txns {
		if t.timer != nil {
			t.timer.Stop()
			t.timer = nil
		}
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// transitLocked makes next durable and then current: it marks t pending,
// releases mu while the Store writes, and re-takes it. It never runs two
// writes for one transactional.id at once. On error nothing changes in
// memory, so a failed fencing write can be retried without its epoch bump
// ever being counted twice (BL-13, KAFKA-9666). The write runs on the
// coordinator's context, not the request's: a client giving up must not make
// memory and log disagree.
func (c *Coordinator) transitLocked(t *txn, pending State, next Metadata) error {
	if c.closed {
		return ErrClosed
	}
	t.pending = pending
	t.notifyLocked()
	next.UpdateMs = c.nowMs()
	rec := Record{Key: encodeKey(t.id), Value: encodeValue(next)}
	c.mu.Unlock()
	err := c.store.Append(c.ctx, []Record{rec})
	c.mu.Lock()
	t.pending = noState
	if err == nil {
		t.cur = next
		c.afterTransitLocked(t)
	}
	t.notifyLocked()
	if err != nil {
		c.lg.Warn("transaction state write failed", "transactional_id", t.id, "to", next.State, "err", err)
	} else {
		c.lg.Debug("transaction state", "transactional_id", t.id, "state", next.State, "producer_id", next.ProducerID, "epoch", next.Epoch, "partitions", len(next.Partitions))
	}
	return err
}

// afterTransitLocked starts what the new current state needs: a timeout
// for Ongoing, marker writing for PrepareCommit/PrepareAbort.
func (c *Coordinator) afterTransitLocked(t *txn) {
	if t.cur.State != Ongoing && t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	switch t.cur.State {
	case Ongoing:
		c.scheduleTimeoutLocked(t)
	case PrepareCommit, PrepareAbort:
		if c.closed {
			return // the next Load completes it
		}
		c.wg.Add(1)
		go c.complete(t, t.cur.clone())
	}
}

// lookupLocked waits (releasing mu) until id is not busy, at most
// Config.BusyWait, and returns its txn: nil if unknown,
// CONCURRENT_TRANSACTIONS if still busy, ErrClosed after Close. A request
// whose producer is already fenced (fenced(t.cur) true; nil for none) gets
// PRODUCER_FENCED without waiting: Kafka checks the producer ID and epoch
// before the transaction's state, so a producer whose transaction the
// coordinator is aborting (timeout, KIP-890 PrepareEpochFence) learns it at
// once instead of retrying CONCURRENT_TRANSACTIONS while markers are written.
func (c *Coordinator) lookupLocked(ctx context.Context, id string, fenced func(Metadata) bool) (*txn, error) {
	deadline := time.Now().Add(c.cfg.BusyWait)
	for {
		if c.closed {
			return nil, ErrClosed
		}
		t := c.txns[id]
		if t == nil || !t.busy() {
			return t, nil
		}
		if fenced != nil && fenced(t.cur) {
			return nil, kerr.ProducerFenced
		}
		d := time.Until(deadline)
		if d <= 0 {
			return nil, kerr.ConcurrentTransactions
		}
		ch := t.changed
		c.mu.Unlock()
		tm := time.NewTimer(d)
		select {
		case <-ch:
		case <-tm.C:
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
		tm.Stop()
		c.mu.Lock()
		if ctx.Err() != nil {
			return nil, kerr.ConcurrentTransactions
		}
	}
}

// storeErr maps a failed Store write to what clients get (Kafka maps log
// append failures of the coordinator to COORDINATOR_NOT_AVAILABLE, which
// clients retry).
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: transaction log write failed: %v", kerr.CoordinatorNotAvailable, err)
}

// closedErr maps ErrClosed to COORDINATOR_NOT_AVAILABLE and keeps kerr errors.
func closedErr(err error) error {
	if errors.Is(err, ErrClosed) {
		return kerr.CoordinatorNotAvailable
	}
	return err
}
