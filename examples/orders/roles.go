package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/outbox"
	"github.com/kawa-broker/kawa/sqlurl"
)

// order is the OrderCreated record's value.
type order struct {
	OrderID string `json:"order_id"`
	Product string `json:"product"`
	Qty     int64  `json:"qty"`
}

// The crash rotations: a child with --crash-index k arms point k modulo the
// list, so successive incarnations of a role crash at every point in turn.
var (
	relayPoints = []string{outbox.PointAfterSelect, outbox.PointAfterProduce, outbox.PointAfterAcks}
	// PointInsideEndTxn exists only in transactional mode.
	txnRelayPoints = append(append([]string(nil), relayPoints...), outbox.PointInsideEndTxn)
	consumerPoints = []string{dedup.PointKeyRecorded, dedup.PointBeforeCommit, dedup.PointAfterCommit,
		delivery.CrashAfterHandlerBeforeCommit}
)

// crasher SIGKILLs the process at its armed point once the process has
// handled at least every records (0: never).
type crasher struct {
	every int64
	point string
	role  string
	log   io.Writer
	done  atomic.Int64
}

func newCrasher(c *config, points []string, log io.Writer) *crasher {
	return &crasher{every: int64(c.crashEvery), point: points[c.crashIndex%len(points)], role: c.role, log: log}
}

func (k *crasher) handled(n int) { k.done.Add(int64(n)) }

func (k *crasher) at(point string) {
	if k.every == 0 || point != k.point || k.done.Load() < k.every {
		return
	}
	fmt.Fprintf(k.log, "orders %s: SIGKILL at %s after %d records\n", k.role, point, k.done.Load())
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; nothing after the point may run
}

func openDB(ctx context.Context, c *config) (*sql.DB, dedup.Dialect, error) {
	return sqlurl.Open(ctx, c.db)
}

// runRelay is the relay process: one outbox relay until ctx is cancelled.
func runRelay(ctx context.Context, c *config, log io.Writer) error {
	db, d, err := openDB(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	ob, err := outbox.New(db, d, outbox.Config{Source: c.source(), Shards: c.shards})
	if err != nil {
		return err
	}
	points := relayPoints
	if c.mode() == outbox.Transactional {
		points = txnRelayPoints
	}
	k := newCrasher(c, points, log)
	r, err := ob.NewRelay(outbox.RelayConfig{
		Mode:       c.mode(),
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.seedBrokers()...)},
		// A stable owner per role instance; a restarted relay still waits for
		// its old leases to expire (LeaseTTL), because a lease is only taken
		// free or expired.
		Owner:     "orders-relay-" + c.runID,
		BatchSize: c.batch,
		LeaseTTL:  c.leaseTTL,
		PollMax:   c.pollMax,
		Hooks: outbox.Hooks{
			CrashPoint: k.at,
			Published:  func(_, n int) { k.handled(n) },
			Error: func(shard int, err error) {
				fmt.Fprintf(log, "orders relay: shard %d: %v (retrying)\n", shard, err)
			},
			Dead: func(row outbox.DeadRow) {
				fmt.Fprintf(log, "orders relay: row %d (key %s seq %d) moved to the dead table: %s\n", row.ID, row.Key, row.Seq, row.Error)
			},
		},
	})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// runConsumer is one consumer process: delivery's at-least-once loop whose
// handler applies each order through dedup.Process.
func runConsumer(ctx context.Context, c *config, log io.Writer) error {
	db, d, err := openDB(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	k := newCrasher(c, consumerPoints, log)
	counts := &dedup.Counters{}
	opts := []dedup.Option{dedup.WithCrashPoint(k.at), dedup.WithHooks(counts)}
	if c.dedupKey == "seq" {
		opts = append(opts, dedup.WithSequence())
	}
	store, err := dedup.New(db, d, c.group(), opts...)
	if err != nil {
		return err
	}
	a, err := newApplier(d)
	if err != nil {
		return err
	}
	var lat *latencyLog
	if c.latencyFile != "" {
		if lat, err = openLatencyLog(c.latencyFile); err != nil {
			return err
		}
		defer lat.close()
	}
	hooks := &consumerHooks{lat: lat, log: log, pending: map[int32][]pendingOrder{}}
	cons, err := delivery.NewAtLeastOnce(delivery.Config{
		Brokers: c.seedBrokers(),
		Group:   c.group(),
		Topics:  []string{c.topic()},
		KgoOpts: []kgo.Opt{
			// Transactional relays leave aborted batches in the topic.
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			// Static membership: a restarted consumer takes its old member's
			// place at once instead of waiting out its session timeout.
			kgo.InstanceID(c.group() + "-" + strconv.Itoa(c.instance)),
			kgo.SessionTimeout(10 * time.Second),
		},
		Hooks:      hooks,
		CrashPoint: k.at,
	}, func(ctx context.Context, r *kgo.Record) error {
		res, err := store.Process(ctx, r, func(ctx context.Context, tx *sql.Tx) error { return a.apply(ctx, tx, r) })
		if err != nil {
			return err
		}
		if res == dedup.Applied {
			// Only applied records count towards --crash-every, so every
			// incarnation makes progress however many redeliveries it sees.
			hooks.applied(r)
			k.handled(1)
		}
		return nil
	}, delivery.AtLeastOnceOptions{
		// A database outage fails every attempt; retry long enough (within
		// the budget, half the rebalance timeout) to ride out a short one
		// instead of dead-lettering the orders.
		Retry: delivery.RetryPolicy{Attempts: 30, Max: time.Second},
	})
	if err != nil {
		return err
	}
	err = cons.Run(ctx)
	// The counts of this incarnation (a clean stop only); the tests read them.
	fmt.Fprintf(log, "orders consumer %d: dedup applied=%d duplicate=%d stale=%d gap=%d\n", c.instance,
		counts.Get(dedup.EventApplied), counts.Get(dedup.EventDuplicate), counts.Get(dedup.EventStale), counts.Get(dedup.EventGap))
	return err
}

// applier is the consumer's handler SQL.
type applier struct {
	d         dedup.Dialect
	inventory *dedup.Versioned
}

func newApplier(d dedup.Dialect) (*applier, error) {
	v, err := dedup.NewVersioned(d, "inventory", "product", "version", "stock")
	if err != nil {
		return nil, err
	}
	return &applier{d: d, inventory: v}, nil
}

// errNotApplied is the handler's error when the version helper did not apply
// the decrement; the transaction rolls back (releasing the dedup key) and the
// loop retries the record.
var errNotApplied = errors.New("inventory update not applied")

// apply records the order in applied and takes its quantity from the
// product's stock with the optimistic version check, in the dedup
// transaction tx.
func (a *applier) apply(ctx context.Context, tx *sql.Tx, r *kgo.Record) error {
	var o order
	if err := json.Unmarshal(r.Value, &o); err != nil || o.OrderID == "" || o.Product == "" {
		return fmt.Errorf("malformed OrderCreated value %q: %v", r.Value, err)
	}
	seq := int64(0)
	for _, h := range r.Headers {
		if h.Key == dedup.HeaderSequence {
			seq, _ = strconv.ParseInt(string(h.Value), 10, 64)
		}
	}
	var applyOrder int64
	if err := tx.QueryRowContext(ctx, `UPDATE apply_counter SET n = n + 1 WHERE id = 1 RETURNING n`).Scan(&applyOrder); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, q(a.d, `INSERT INTO applied (order_id, product, seq, apply_order) VALUES (?, ?, ?, ?)`),
		o.OrderID, o.Product, seq, applyOrder); err != nil {
		return err
	}
	var stock, version int64
	if err := tx.QueryRowContext(ctx, q(a.d, `SELECT stock, version FROM inventory WHERE product = ?`), o.Product).Scan(&stock, &version); err != nil {
		return fmt.Errorf("product %s: %w", o.Product, err)
	}
	res, err := a.inventory.Apply(ctx, tx, o.Product, version, dedup.Set("stock", stock-o.Qty))
	if err != nil {
		return err
	}
	if res != dedup.VersionApplied {
		// A concurrent change of the row between the read and the update (two
		// members briefly sharing a partition during a rebalance).
		return fmt.Errorf("%w: product %s at version %d: %v", errNotApplied, o.Product, version, res)
	}
	return nil
}

// consumerHooks logs errors and, with --latency, writes the time each
// applied order's offset was first committed.
type consumerHooks struct {
	delivery.NopHooks
	lat *latencyLog
	log io.Writer

	mu      sync.Mutex
	pending map[int32][]pendingOrder // applied, offset not yet committed
}

type pendingOrder struct {
	offset  int64
	orderID string
}

func (h *consumerHooks) applied(r *kgo.Record) {
	if h.lat == nil {
		return
	}
	var o order
	if json.Unmarshal(r.Value, &o) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending[r.Partition] = append(h.pending[r.Partition], pendingOrder{r.Offset, o.OrderID})
}

func (h *consumerHooks) OnCommit(offsets map[string]map[int32]kgo.EpochOffset, _ time.Duration, err error) {
	if h.lat == nil || err != nil {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, parts := range offsets {
		for p, eo := range parts {
			ps := h.pending[p]
			i := 0
			for ; i < len(ps) && ps[i].offset < eo.Offset; i++ {
				h.lat.write(ps[i].orderID, now)
			}
			h.pending[p] = ps[i:]
		}
	}
	h.lat.flush()
}

func (h *consumerHooks) OnRetry(r *kgo.Record, attempt int, err error, _ time.Duration) {
	fmt.Fprintf(h.log, "orders consumer: %s/%d@%d attempt %d failed, retrying: %v\n", r.Topic, r.Partition, r.Offset, attempt, err)
}

func (h *consumerHooks) OnDeadLettered(r *kgo.Record, dlt string, attempts int, err error) {
	fmt.Fprintf(h.log, "orders consumer: %s/%d@%d dead-lettered to %s after %d attempts: %v\n", r.Topic, r.Partition, r.Offset, dlt, attempts, err)
}

// latencyLog appends "order_id unix_nanos" lines.
type latencyLog struct {
	f *os.File
	w *bufio.Writer
}

func openLatencyLog(path string) (*latencyLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &latencyLog{f: f, w: bufio.NewWriter(f)}, nil
}

func (l *latencyLog) write(orderID string, t time.Time) {
	fmt.Fprintf(l.w, "%s %d\n", orderID, t.UnixNano())
}

func (l *latencyLog) flush() { l.w.Flush() }

func (l *latencyLog) close() {
	l.w.Flush()
	l.f.Close()
}
