package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Mode is the relay's producer mode; see the package doc for what each
// guarantees.
type Mode int

const (
	// Idempotent publishes with an idempotent producer, acks=all:
	// at-least-once into the topic, with duplicates only from the window
	// between the broker's acks and the row delete (at most one batch per
	// crash) and from a paused relay that lost its lease.
	Idempotent Mode = iota + 1
	// Transactional publishes each batch as one Kafka transaction under the
	// shard's transactional.id together with a progress record: no
	// duplicate in the topic for read_committed consumers.
	Transactional
)

func (m Mode) String() string {
	switch m {
	case Idempotent:
		return "idempotent"
	case Transactional:
		return "transactional"
	}
	return "unknown"
}

// Named crash points, passed to Hooks.CrashPoint. They exist for tests that
// kill the relay at an exact place (the SDK's crash suite); production code
// leaves Hooks.CrashPoint nil.
const (
	// PointAfterSelect: a batch was read from the database, nothing of it
	// produced yet (R1).
	PointAfterSelect = "after-select"
	// PointAfterProduce: the batch's records were handed to the producer,
	// acks not yet awaited (R2).
	PointAfterProduce = "after-produce-before-acks"
	// PointAfterAcks: every record was acknowledged (transactional: EndTxn
	// committed) and the rows are not yet deleted (R3).
	PointAfterAcks = "after-acks-before-delete"
	// PointInsideEndTxn: an EndTxn request (commit, or the abort of a
	// failed batch) was written to the broker and its response not yet
	// read; the outcome is unknown (R4, transactional mode only).
	PointInsideEndTxn = "inside-end-txn"
)

// Hooks observe the relay. Every field may be nil. They are called from
// relay goroutines and must not block for long.
type Hooks struct {
	// CrashPoint is called with one of the Point constants each time the
	// relay passes it. Test-only.
	CrashPoint func(point string)
	// Published is called after n records of shard were acknowledged and
	// their rows deleted.
	Published func(shard, n int)
	// Dead is called after a row moved to the dead table, parking its key.
	Dead func(row DeadRow)
	// Error is called with each error the relay recovers from by retrying
	// (database or broker unavailable, a failed publish attempt, a lost
	// lease, a fenced producer). shard is -1 for errors outside a shard.
	Error func(shard int, err error)
	// Status is called once per lease round (about LeaseTTL/3) with the
	// outbox's gauges: rows unsent, oldest unsent age, dead and parked.
	Status func(Status)
}

// RelayConfig configures a relay. Zero values take the defaults named.
type RelayConfig struct {
	// Mode is Idempotent or Transactional. Required.
	Mode Mode
	// ClientOpts are franz-go options for the relay's clients: seed
	// brokers, TLS, SASL, dialer. The relay appends its own producer
	// options after them (acks=all, idempotence, partitioner,
	// transactional.id), so those cannot be overridden.
	ClientOpts []kgo.Opt
	// Owner names this relay instance in the lease table. Default
	// hostname-pid-random.
	Owner string
	// BatchSize is the most rows one batch publishes. Default 100.
	BatchSize int
	// MaxShards caps how many shards this relay leases at once (its fair
	// share among the live relays is the other cap). Default: no cap.
	MaxShards int
	// MaxAttempts is how many failed publish attempts move a row to the
	// dead table. Default 5.
	MaxAttempts int
	// LeaseTTL is how long a shard lease lasts without renewal; renewals
	// run about every LeaseTTL/3 (with jitter). Default 15s.
	LeaseTTL time.Duration
	// PollMin and PollMax bound the adaptive poll interval of an idle
	// shard: it starts at PollMin after work and doubles up to PollMax.
	// Defaults 10ms and 1s. Notify cuts a wait short.
	PollMin, PollMax time.Duration
	// ProgressTopic is the transactional mode's progress topic, one
	// partition per shard. Default "kawa-outbox-progress-<Source>". It is a
	// normal (delete-policy) topic, read by its tail; it should become
	// compacted once the broker supports cleanup.policy=compact.
	ProgressTopic string
	// TransactionTimeout is the transactional producer's
	// transaction.timeout.ms. Default 60s.
	TransactionTimeout time.Duration
	Hooks              Hooks
}

// Relay publishes the outbox's rows to Kafka. Create it with
// Outbox.NewRelay, start it with Run; Notify wakes it. Several relays (in
// one process or many) share the shards through leases.
type Relay struct {
	o   *Outbox
	cfg RelayConfig
	q   queries

	wakeMu sync.Mutex
	wake   chan struct{}

	idem *kgo.Client // Idempotent mode: one client for all shards
}

// NewRelay returns a relay for the outbox's rows.
func (o *Outbox) NewRelay(cfg RelayConfig) (*Relay, error) {
	if o.source == "" {
		return nil, ErrNoSource
	}
	if cfg.Mode != Idempotent && cfg.Mode != Transactional {
		return nil, fmt.Errorf("outbox: relay: Mode must be Idempotent or Transactional")
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()>>32, 36)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.PollMin <= 0 {
		cfg.PollMin = 10 * time.Millisecond
	}
	if cfg.PollMax <= 0 {
		cfg.PollMax = time.Second
	}
	if cfg.PollMax < cfg.PollMin {
		cfg.PollMax = cfg.PollMin
	}
	if cfg.ProgressTopic == "" {
		cfg.ProgressTopic = "kawa-outbox-progress-" + o.source
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = 60 * time.Second
	}
	return &Relay{o: o, cfg: cfg, q: newQueries(o.dialect), wake: make(chan struct{})}, nil
}

// Notify wakes every shard this relay holds to look for rows now instead of
// at the end of its poll interval. It never blocks; call it after
// committing a transaction that enqueued (or use Commit).
func (r *Relay) Notify() {
	r.wakeMu.Lock()
	close(r.wake)
	r.wake = make(chan struct{})
	r.wakeMu.Unlock()
}

func (r *Relay) wakeCh() <-chan struct{} {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	return r.wake
}

// Commit commits tx and then calls Notify, so that a relay in the same
// process publishes at once. It returns tx.Commit's error (and then does not
// notify).
func (r *Relay) Commit(tx interface{ Commit() error }) error {
	if err := tx.Commit(); err != nil {
		return err
	}
	r.Notify()
	return nil
}

func (r *Relay) crash(point string) {
	if r.cfg.Hooks.CrashPoint != nil {
		r.cfg.Hooks.CrashPoint(point)
	}
}

func (r *Relay) report(shard int, err error) {
	if r.cfg.Hooks.Error != nil && err != nil {
		r.cfg.Hooks.Error(shard, err)
	}
}

// shardRun is one held lease and the goroutine publishing its shard.
type shardRun struct {
	shard    int
	epoch    int64
	deadline atomic.Int64       // unix nanos: the lease is surely ours until then
	cancel   context.CancelFunc // stops now: the lease is lost
	stop     chan struct{}      // closed: stop after the batch in flight
	stopOnce sync.Once
	done     chan struct{}
	retryAt  time.Time // when an exited worker may restart
}

func (s *shardRun) stopAfterBatch() { s.stopOnce.Do(func() { close(s.stop) }) }

// shutdownGrace bounds how long Run waits for batches in flight when its
// context is cancelled.
const shutdownGrace = 10 * time.Second

func (s *shardRun) held() bool { return time.Now().UnixNano() < s.deadline.Load() }

// Run leases shards and publishes their rows until ctx is done. It returns
// nil after ctx is cancelled, having let the batches in flight finish (for
// up to 10s), stopped its shard goroutines and released its leases; or an error if it cannot start: the producer client
// cannot be created, the progress topic cannot be created, or rows exist
// for shards beyond Config.Shards.
func (r *Relay) Run(ctx context.Context) error {
	if n, err := r.q.rowsBeyond(ctx, r.o.db, r.o.shards); err != nil {
		return fmt.Errorf("outbox: relay: %w", err)
	} else if n > 0 {
		return fmt.Errorf("outbox: relay: %d rows belong to shards >= %d: every process must use the same Config.Shards", n, r.o.shards)
	}
	switch r.cfg.Mode {
	case Idempotent:
		cl, err := kgo.NewClient(r.clientOpts(-1)...)
		if err != nil {
			return fmt.Errorf("outbox: relay: client: %w", err)
		}
		r.idem = cl
		defer cl.Close()
	case Transactional:
		if err := r.ensureProgressTopic(ctx); err != nil {
			return err
		}
	}
	held := map[int]*shardRun{}
	exited := make(chan *shardRun, r.o.shards)
	defer func() {
		// Let batches in flight finish (so idempotent mode does not
		// re-send them after a restart), then cut what is left.
		for _, s := range held {
			s.stopAfterBatch()
		}
		grace := time.NewTimer(shutdownGrace)
		defer grace.Stop()
		for _, s := range held {
			select {
			case <-s.done:
			case <-grace.C:
				for _, s := range held {
					s.cancel()
				}
				<-s.done
			}
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range held {
			_ = r.q.release(rctx, r.o.db, s.shard, r.cfg.Owner, s.epoch)
		}
		_ = r.q.leave(rctx, r.o.db, r.cfg.Owner)
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case s := <-exited:
			s.retryAt = time.Now().Add(r.cfg.PollMax)
			continue
		}
		r.leaseRound(ctx, held, exited)
		// Jitter spreads the rounds of relays started together.
		d := r.cfg.LeaseTTL / 3
		timer.Reset(d - d/5 + rand.N(2*d/5+1))
	}
}

// leaseRound renews held leases, restarts exited shard workers, gives back
// leases above this relay's fair share and takes free ones up to it.
func (r *Relay) leaseRound(ctx context.Context, held map[int]*shardRun, exited chan *shardRun) {
	db := r.o.db
	for shard, s := range held {
		start := time.Now()
		ok, err := r.q.renew(ctx, db, shard, r.cfg.Owner, s.epoch, r.cfg.LeaseTTL)
		switch {
		case err != nil:
			r.report(shard, fmt.Errorf("outbox: renew lease: %w", err))
		case !ok:
			r.report(shard, fmt.Errorf("%w: shard %d epoch %d", ErrLeaseLost, shard, s.epoch))
			s.cancel()
			<-s.done
			delete(held, shard)
			continue
		default:
			s.deadline.Store(start.Add(r.cfg.LeaseTTL).UnixNano())
		}
		select {
		case <-s.done:
			if time.Now().After(s.retryAt) && s.held() {
				r.startShard(ctx, s, exited)
			}
		default:
		}
	}
	others, err := r.q.otherRelays(ctx, db, r.cfg.Owner, r.cfg.LeaseTTL)
	if err != nil {
		r.report(-1, fmt.Errorf("outbox: count relays: %w", err))
		return
	}
	target := (r.o.shards + others) / (others + 1) // ceil(shards / relays)
	if r.cfg.MaxShards > 0 {
		target = min(target, r.cfg.MaxShards)
	}
	for shard, s := range held {
		if len(held) <= target {
			break
		}
		// Still ours: finish the batch in flight before giving it back.
		s.stopAfterBatch()
		<-s.done
		_ = r.q.release(ctx, db, shard, r.cfg.Owner, s.epoch)
		delete(held, shard)
	}
	if len(held) >= target {
		r.reportStatus(ctx)
		return
	}
	first := rand.N(r.o.shards)
	for i := 0; i < r.o.shards && len(held) < target; i++ {
		shard := (first + i) % r.o.shards
		if held[shard] != nil {
			continue
		}
		start := time.Now()
		epoch, ok, err := r.q.acquire(ctx, db, shard, r.cfg.Owner, r.cfg.LeaseTTL)
		if err != nil {
			r.report(shard, fmt.Errorf("outbox: acquire lease: %w", err))
			return
		}
		if !ok {
			continue
		}
		s := &shardRun{shard: shard, epoch: epoch}
		s.deadline.Store(start.Add(r.cfg.LeaseTTL).UnixNano())
		held[shard] = s
		r.startShard(ctx, s, exited)
	}
	r.reportStatus(ctx)
}

func (r *Relay) reportStatus(ctx context.Context) {
	if r.cfg.Hooks.Status == nil {
		return
	}
	st, err := r.o.Status(ctx)
	if err != nil {
		r.report(-1, err)
		return
	}
	r.cfg.Hooks.Status(st)
}

func (r *Relay) startShard(ctx context.Context, s *shardRun, exited chan *shardRun) {
	// The shard's work outlives Run's ctx by up to shutdownGrace, so that
	// a batch in flight can finish; cancel cuts it.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.stop = make(chan struct{})
	s.stopOnce = sync.Once{}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		err := r.runShard(sctx, s)
		if err != nil && sctx.Err() == nil {
			r.report(s.shard, err)
			select {
			case exited <- s:
			default:
			}
		}
	}()
}

// runShard publishes one shard's rows while the lease is held. It returns
// on ctx cancellation or on an error after which the shard must start over
// (recovery included): the manager restarts it.
func (r *Relay) runShard(ctx context.Context, s *shardRun) error {
	var p publisher
	if r.cfg.Mode == Transactional {
		tp, err := r.newTxnPublisher(ctx, s)
		if err != nil {
			return err
		}
		defer tp.close()
		p = tp
	} else {
		p = &idemPublisher{r: r, cl: r.idem}
	}
	isolate := false
	wait := r.cfg.PollMin
	for {
		wake := r.wakeCh()
		select {
		case <-s.stop:
			return nil
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		if !s.held() {
			return fmt.Errorf("%w: shard %d: not renewed in time", ErrLeaseLost, s.shard)
		}
		rows, err := r.q.selectBatch(ctx, r.o.db, s.shard, r.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("outbox: shard %d: select: %w", s.shard, err)
		}
		if len(rows) == 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-s.stop:
				t.Stop()
				return nil
			case <-wake:
				wait = r.cfg.PollMin
			case <-t.C:
				wait = min(2*wait, r.cfg.PollMax)
			}
			t.Stop()
			continue
		}
		wait = r.cfg.PollMin
		r.crash(PointAfterSelect)
		if !s.held() {
			// Paused past the lease between select and produce: another
			// relay may own these rows now.
			return fmt.Errorf("%w: shard %d: expired before publishing", ErrLeaseLost, s.shard)
		}
		failed, err := r.publishBatch(ctx, s, p, rows, isolate)
		if err != nil {
			return err
		}
		// After a failure, publish one record at a time until a batch goes
		// through clean, so that a failure is charged to the row that
		// caused it and not to its batch mates.
		isolate = failed
		if failed {
			t := time.NewTimer(r.cfg.PollMin * 10)
			select {
			case <-ctx.Done():
			case <-s.stop:
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// errBlocked marks a row not published because an earlier row of its key
// failed in the same batch.
var errBlocked = errors.New("outbox: earlier row of the key failed")

// errRetryAlone marks a row that failed in a batch of several: it is
// retried on its own before any attempt is charged.
var errRetryAlone = errors.New("outbox: failed in a batch, retried alone")

// publishBatch publishes rows (ordered by id, which is kawa-seq order per
// key) and settles them in one database transaction: acknowledged rows are
// deleted, failed ones charged an attempt (or moved to the dead table).
// failed reports whether any row failed.
func (r *Relay) publishBatch(ctx context.Context, s *shardRun, p publisher, rows []row, isolate bool) (failed bool, err error) {
	errs := make([]error, len(rows))
	failedKey := map[string]bool{}
	var sendable []int
	for i := range rows {
		switch {
		case failedKey[rows[i].keyID()]:
			errs[i] = errBlocked
		case rows[i].bad != nil:
			errs[i] = rows[i].bad
			failedKey[rows[i].keyID()] = true
		default:
			sendable = append(sendable, i)
		}
	}
	if isolate {
		for _, i := range sendable {
			if failedKey[rows[i].keyID()] {
				errs[i] = errBlocked
				continue
			}
			one := make([]error, 1)
			if err := p.publish(ctx, s, rows[i:i+1], one); err != nil {
				return false, err
			}
			if errs[i] = one[0]; errs[i] != nil {
				failedKey[rows[i].keyID()] = true
			}
		}
	} else if len(sendable) > 0 {
		batch := make([]row, len(sendable))
		for j, i := range sendable {
			batch[j] = rows[i]
		}
		berrs := make([]error, len(batch))
		if err := p.publish(ctx, s, batch, berrs); err != nil {
			return false, err
		}
		for j, i := range sendable {
			errs[i] = berrs[j]
			if errs[i] != nil && len(batch) > 1 {
				// A broker rejects a whole partition batch for one bad
				// record: charge nobody now, retry one at a time.
				errs[i] = errRetryAlone
			}
		}
	}
	if ctx.Err() != nil {
		return false, nil // shutting down: nothing is charged
	}
	var sent []int64
	var charge []charged
	failedKey = map[string]bool{}
	for i, rw := range rows {
		e := errs[i]
		switch {
		case e == nil && !failedKey[rw.keyID()]:
			sent = append(sent, rw.id)
		case e == nil || e == errBlocked || e == errRetryAlone || errors.Is(e, errTxnAborted):
			// Published after a failed row of its key (idempotent mode
			// only), or not published: it stays for a later batch.
			failed = failed || e != nil
		default:
			failedKey[rw.keyID()] = true
			failed = true
			charge = append(charge, charged{rw, e})
		}
	}
	if len(sent) > 0 {
		r.crash(PointAfterAcks)
	}
	dead, err := r.q.settle(ctx, r.o.db, s.shard, r.cfg.Owner, s.epoch, sent, charge, r.cfg.MaxAttempts)
	if err != nil {
		return false, fmt.Errorf("outbox: shard %d: settle batch: %w", s.shard, err)
	}
	if len(sent) > 0 && r.cfg.Hooks.Published != nil {
		r.cfg.Hooks.Published(s.shard, len(sent))
	}
	for _, c := range charge {
		r.report(s.shard, fmt.Errorf("outbox: row %d (%s): attempt %d: %w", c.row.id, c.row.msgID, c.row.attempts+1, c.err))
	}
	if r.cfg.Hooks.Dead != nil {
		for _, d := range dead {
			r.cfg.Hooks.Dead(d)
		}
	}
	return failed, nil
}

type charged struct {
	row row
	err error
}
