package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/outbox"
)

// supervise is the main process: prepare, run the children and the
// application's transactions, wait for the consumer to apply every committed
// order, stop the children and verify.
func supervise(ctx context.Context, c *config, stdout, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	db, d, err := openDB(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := prepare(ctx, db, d, c); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seedBrokers()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := createTopics(ctx, adm, c); err != nil {
		return err
	}
	if c.latency {
		dir, err := os.MkdirTemp("", "orders-latency-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.latencyFile = filepath.Join(dir, "commits")
	}

	f, err := newFleet(c, log)
	if err != nil {
		return err
	}
	defer f.stopAll()
	f.start("relay", 0)
	for i := range c.consumers {
		f.start("consumer", i)
	}

	// Orders start once the group has every consumer, so that --latency
	// measures the pipeline, not the first join.
	if err := waitGroupStable(ctx, adm, c, f); err != nil {
		return err
	}
	w, err := writeOrders(ctx, db, d, c, log)
	if err != nil {
		return fmt.Errorf("application: %w", err)
	}
	fmt.Fprintf(log, "orders: %d orders committed, %d transactions rolled back, in %v\n", len(w.committed), len(w.rolledBack), time.Since(start).Round(time.Millisecond))
	if err := waitApplied(ctx, db, adm, c, f, len(w.committed)); err != nil {
		return err
	}
	applyDone := time.Since(start)
	f.stopAll()

	// Read the topic before checking the consumer's commits: the check needs
	// the offset of each partition's last record.
	topic, err := readTopic(ctx, c)
	if err != nil {
		return err
	}
	if err := ensureCommitted(ctx, adm, c, log, topic); err != nil {
		return err
	}
	stats, err := verify(ctx, db, d, adm, c, w, topic)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s: relay %s, dedup key %s, %s; applied in %v; relay crashes %d, consumer crashes %d; topic: %d records, %d duplicates (dedup answered them)\n",
		c.runID, c.relayMode, c.dedupKey, d, applyDone.Round(time.Millisecond), f.crashes("relay"), f.crashes("consumer"), stats.records, stats.duplicates)
	if c.latency {
		if err := printLatency(stdout, c.latencyFile, w); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "verified: %d orders, %d applied exactly once, inventory consistent\n", len(w.committed), stats.applied)
	return nil
}

func createTopics(ctx context.Context, adm *kadm.Client, c *config) error {
	resp, err := adm.CreateTopics(ctx, int32(c.partitions), 1, nil, c.topic(), c.dlt())
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Sorted() {
		if t.Err != nil {
			return fmt.Errorf("create topic %s: %w (a topic of an earlier run with this --run-id?)", t.Topic, t.Err)
		}
	}
	return nil
}

// workload is what the application did.
type workload struct {
	committed   map[string]order     // by order id
	rolledBack  map[string]bool      // order ids whose transaction rolled back after Enqueue
	committedAt map[string]time.Time // when each order's transaction commit returned
}

// writeOrders runs the application: one transaction per order that inserts
// the order row and Enqueues its OrderCreated record (keyed by product);
// --rollback-pct of them roll back after the Enqueue, drawn from --seed,
// until --orders have committed. Order ids number the attempts, so a
// rolled-back id is never reused.
func writeOrders(ctx context.Context, db *sql.DB, d dedup.Dialect, c *config, log io.Writer) (*workload, error) {
	ob, err := outbox.New(db, d, outbox.Config{Source: c.source(), Shards: c.shards})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x6f7264657273))
	w := &workload{committed: map[string]order{}, rolledBack: map[string]bool{}, committedAt: map[string]time.Time{}}
	var pace <-chan time.Time
	if c.rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(c.rate))
		defer t.Stop()
		pace = t.C
	}
	for i := 1; len(w.committed) < c.orders; i++ {
		if pace != nil {
			select {
			case <-pace:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		o := order{OrderID: fmt.Sprintf("o-%06d", i), Product: productName(rng.IntN(c.products)), Qty: 1 + rng.Int64N(5)}
		rollback := rng.IntN(100) < c.rollbackPct
		value, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		committed, err := placeOrder(ctx, db, d, ob, c, o, value, rollback, log)
		if err != nil {
			return nil, err
		}
		if !committed {
			w.rolledBack[o.OrderID] = true
			continue
		}
		w.committedAt[o.OrderID] = time.Now()
		w.committed[o.OrderID] = o
	}
	return w, nil
}

// pollUntil calls check every interval until it reports done or an error,
// a child fails, or ctx ends; then the error names what was awaited
// (check's status string from its last call).
func (f *fleet) pollUntil(ctx context.Context, every time.Duration, check func() (done bool, status string, err error)) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	status := "not checked yet"
	for {
		select {
		case err := <-f.failed:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), status)
		case <-tick.C:
		}
		done, st, err := check()
		if ctx.Err() != nil {
			continue // the next round reports the timeout
		}
		if err != nil || done {
			return err
		}
		status = st
	}
}

// placeOrder runs one order's application transaction: insert the order,
// Enqueue its record, then commit (or, when rollback, roll back on purpose).
// A database error retries the whole transaction, as a service would, until
// ctx ends. A failed commit has an unknown outcome (the connection may have
// died after the server committed), so the order row decides: present means
// committed. It reports whether the order committed.
func placeOrder(ctx context.Context, db *sql.DB, d dedup.Dialect, ob *outbox.Outbox, c *config, o order, value []byte, rollback bool, log io.Writer) (bool, error) {
	insert := q(d, `INSERT INTO orders (order_id, product, qty) VALUES (?, ?, ?)`)
	attempt := func() (committed, unknown bool, err error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return false, false, err
		}
		if _, err := tx.ExecContext(ctx, insert, o.OrderID, o.Product, o.Qty); err != nil {
			tx.Rollback()
			return false, false, err
		}
		if _, err := ob.Enqueue(ctx, tx, outbox.Record{Topic: c.topic(), Key: []byte(o.Product), Value: value}); err != nil {
			tx.Rollback()
			return false, false, err
		}
		if rollback {
			tx.Rollback() // on purpose; a failed rollback also leaves nothing
			return false, false, nil
		}
		if err := tx.Commit(); err != nil {
			return false, true, err
		}
		return true, false, nil
	}
	backoff := 50 * time.Millisecond
	for unknown := false; ; {
		if unknown {
			var n int
			err := db.QueryRowContext(ctx, q(d, `SELECT COUNT(*) FROM orders WHERE order_id = ?`), o.OrderID).Scan(&n)
			if err == nil && n == 1 {
				return true, nil
			}
			if err == nil {
				unknown = false // it did not commit: run it again
			}
		}
		if !unknown {
			committed, u, err := attempt()
			if err == nil {
				return committed, nil
			}
			unknown = u
			fmt.Fprintf(log, "orders application: order %s: %v; retrying\n", o.OrderID, err)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("order %s: %w", o.OrderID, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// waitGroupStable waits until the consumer group is Stable with
// --consumers members.
func waitGroupStable(ctx context.Context, adm *kadm.Client, c *config, f *fleet) error {
	return f.pollUntil(ctx, 50*time.Millisecond, func() (bool, string, error) {
		status := fmt.Sprintf("group %s not Stable with %d members", c.group(), c.consumers)
		gs, err := adm.DescribeGroups(ctx, c.group())
		if err != nil {
			return false, status, nil // the coordinator may not know the group yet
		}
		g, ok := gs[c.group()]
		return ok && g.Err == nil && g.State == "Stable" && len(g.Members) == c.consumers, status, nil
	})
}

// waitApplied polls the database until the consumer applied want orders and
// the outbox is empty, failing early on a child's failure, dead rows or dead
// letters.
func waitApplied(ctx context.Context, db *sql.DB, adm *kadm.Client, c *config, f *fleet, want int) error {
	return f.pollUntil(ctx, 100*time.Millisecond, func() (bool, string, error) {
		var applied, unsent, dead int64
		err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM applied), (SELECT COUNT(*) FROM kawa_outbox), (SELECT COUNT(*) FROM kawa_outbox_dead)`).Scan(&applied, &unsent, &dead)
		status := fmt.Sprintf("%d of %d orders applied, %d outbox rows unsent", applied, want, unsent)
		switch {
		case err != nil:
			return false, "database: " + err.Error(), nil // unavailable for a while: keep waiting
		case dead > 0:
			return false, status, fmt.Errorf("%d outbox rows moved to the dead table", dead)
		case applied > int64(want):
			return false, status, fmt.Errorf("%d orders applied, more than the %d committed", applied, want)
		}
		if n, err := dltRecords(ctx, adm, c); err != nil {
			return false, status, err
		} else if n > 0 {
			return false, status, fmt.Errorf("the consumer dead-lettered %d records to %s", n, c.dlt())
		}
		return applied == int64(want) && unsent == 0, status, nil
	})
}

func dltRecords(ctx context.Context, adm *kadm.Client, c *config) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, c.dlt())
	if err != nil {
		return 0, err
	}
	if err := ends.Error(); err != nil {
		return 0, err
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// ensureCommitted checks that the group's committed offsets cover every
// partition's last data record. When the stopped consumers left it short (a
// consumer killed itself while being stopped), it runs one consumer without
// crashes until they do.
func ensureCommitted(ctx context.Context, adm *kadm.Client, c *config, log io.Writer, t *topicContents) error {
	short, err := uncommitted(ctx, adm, c, t)
	if err != nil || short == "" {
		return err
	}
	fmt.Fprintf(log, "orders: commits short after stop (%s); running a last consumer without crashes\n", short)
	final := *c
	final.crashEvery = 0
	f, err := newFleet(&final, log)
	if err != nil {
		return err
	}
	defer f.stopAll()
	f.start("consumer", 0)
	return f.pollUntil(ctx, 100*time.Millisecond, func() (bool, string, error) {
		short, err := uncommitted(ctx, adm, c, t)
		return short == "", "group " + c.group() + " committed offsets short: " + short, err
	})
}

// uncommitted names the partitions whose committed offset is below their
// last data record + 1 ("" when none).
func uncommitted(ctx context.Context, adm *kadm.Client, c *config, t *topicContents) (string, error) {
	offs, err := adm.FetchOffsets(ctx, c.group())
	if err != nil {
		return "", err
	}
	if err := offs.Error(); err != nil {
		return "", err
	}
	var short []string
	for p, last := range t.lastData {
		got := int64(-1)
		if o, ok := offs.Lookup(c.topic(), p); ok {
			got = o.At
		}
		if got < last+1 {
			short = append(short, fmt.Sprintf("partition %d committed %d, last record %d", p, got, last))
		}
	}
	slices.Sort(short)
	return strings.Join(short, "; "), nil
}

// fleet runs and restarts the child processes.
type fleet struct {
	c      *config
	exe    string
	log    io.Writer
	failed chan error // the first child failure (one slot)

	mu       sync.Mutex
	stopping bool
	running  map[string]*exec.Cmd
	crashN   map[string]int
	wg       sync.WaitGroup
}

func newFleet(c *config, log io.Writer) (*fleet, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return &fleet{c: c, exe: exe, log: log, failed: make(chan error, 1), running: map[string]*exec.Cmd{}, crashN: map[string]int{}}, nil
}

// start runs role's instance in a goroutine that restarts it after each
// SIGKILL it gave itself, until stopAll. Any other exit before stopAll is a
// failure, reported on f.failed.
func (f *fleet) start(role string, instance int) {
	name := role + "-" + strconv.Itoa(instance)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for incarnation := 0; ; incarnation++ {
			cmd := exec.Command(f.exe, append(f.c.args(role, incarnation, instance), "--parent-pipe")...)
			cmd.Stdout, cmd.Stderr = f.log, f.log
			// Kept open, never written: the child stops when it reads EOF,
			// which the kernel delivers when this process dies.
			if _, err := cmd.StdinPipe(); err != nil {
				f.fail(fmt.Errorf("start %s: %w", name, err))
				return
			}
			f.mu.Lock()
			if f.stopping {
				f.mu.Unlock()
				return
			}
			if err := cmd.Start(); err != nil {
				f.mu.Unlock()
				f.fail(fmt.Errorf("start %s: %w", name, err))
				return
			}
			f.running[name] = cmd
			f.mu.Unlock()
			err := cmd.Wait()
			f.mu.Lock()
			delete(f.running, name)
			stopping := f.stopping
			killed := false
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				ws, ok := ee.Sys().(syscall.WaitStatus)
				killed = ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
			}
			if killed && f.c.crashEvery > 0 {
				f.crashN[role]++
			}
			f.mu.Unlock()
			switch {
			case stopping:
				return
			case killed && f.c.crashEvery > 0:
				continue // it crashed on purpose: restart it
			case err != nil:
				f.fail(fmt.Errorf("%s exited: %w", name, err))
				return
			default:
				f.fail(fmt.Errorf("%s exited before it was stopped", name))
				return
			}
		}
	}()
}

func (f *fleet) fail(err error) {
	select {
	case f.failed <- err:
	default:
	}
}

// stopAll sends SIGTERM to every child, stops restarting them and waits
// for them to exit.
func (f *fleet) stopAll() {
	f.mu.Lock()
	f.stopping = true
	for _, cmd := range f.running {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fleet) crashes(role string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashN[role]
}

// printLatency prints the end-to-end latency percentiles, from each order's
// Enqueue transaction commit to the first consumer offset commit covering it.
func printLatency(w io.Writer, path string, wl *workload) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	first := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, ns, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			continue // a line torn by a SIGKILL
		}
		if t, seen := first[id]; !seen || n < t {
			first[id] = n
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	var lats []time.Duration
	for id, at := range wl.committedAt {
		if n, ok := first[id]; ok {
			lats = append(lats, time.Duration(n-at.UnixNano()))
		}
	}
	if len(lats) == 0 {
		return errors.New("latency: no offset commit recorded")
	}
	slices.Sort(lats)
	pct := func(p float64) time.Duration { return lats[min(len(lats)-1, int(p*float64(len(lats))))] }
	fmt.Fprintf(w, "latency (Enqueue commit -> consumer offset commit): n=%d p50=%v p99=%v max=%v\n",
		len(lats), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), lats[len(lats)-1].Round(time.Millisecond))
	return nil
}
