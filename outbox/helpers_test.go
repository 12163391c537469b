package outbox_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

const (
	testTopic      = "orders"
	testPartitions = 3
	testShards     = 4
	testSource     = "ordersdb"
)

// env is one test's broker, database and outbox.
type env struct {
	t  *testing.T
	b  *kawatest.Broker
	be sqltest.Backend
	ob *outbox.Outbox
}

func newEnv(t *testing.T, be sqltest.Backend, opts ...kawatest.Option) *env {
	t.Helper()
	b := kawatest.NewBroker(t, opts...)
	b.CreateTopic(testTopic, testPartitions, nil)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, be.DB, be.Dialect); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	ob, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: testSource, Shards: testShards})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, b: b, be: be, ob: ob}
}

// enqueued is what the application committed (or rolled back).
type enqueued struct {
	id  outbox.MessageID
	key string
}

// workload enqueues n records over keys key-0..key-(k-1), one transaction
// each; every rollbackEvery-th transaction rolls back after its Enqueue
// (A1). It returns the committed records in commit order and the ids of the
// rolled-back ones.
func (e *env) workload(n, k, rollbackEvery int) (committed []enqueued, rolledBack map[outbox.MessageID]bool) {
	e.t.Helper()
	ctx := context.Background()
	rolledBack = map[outbox.MessageID]bool{}
	for i := range n {
		key := "key-" + strconv.Itoa(i%k)
		tx, err := e.be.DB.BeginTx(ctx, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		id, err := e.ob.Enqueue(ctx, tx, outbox.Record{Topic: testTopic, Key: []byte(key), Value: []byte("v" + strconv.Itoa(i))})
		if err != nil {
			e.t.Fatalf("enqueue: %v", err)
		}
		if rollbackEvery > 0 && i%rollbackEvery == rollbackEvery-1 {
			if err := tx.Rollback(); err != nil {
				e.t.Fatal(err)
			}
			rolledBack[id] = true
			continue
		}
		if err := tx.Commit(); err != nil {
			e.t.Fatal(err)
		}
		committed = append(committed, enqueued{id, key})
	}
	return committed, rolledBack
}

// relay runs a relay in this process until the test ends.
type runningRelay struct {
	published chan struct{}
	cancel    context.CancelFunc
	done      chan error
	mu        sync.Mutex
	dead      []outbox.DeadRow
	errs      []error
	relay     *outbox.Relay
}

func (e *env) startRelay(cfg outbox.RelayConfig) *runningRelay {
	e.t.Helper()
	rr := &runningRelay{published: make(chan struct{}, 1), done: make(chan error, 1)}
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.SeedBrokers(e.b.Addr))
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 2 * time.Second
	}
	cfg.Hooks.Published = func(int, int) { rr.kick() }
	cfg.Hooks.Dead = func(d outbox.DeadRow) {
		rr.mu.Lock()
		rr.dead = append(rr.dead, d)
		rr.mu.Unlock()
		rr.kick()
	}
	cfg.Hooks.Error = func(_ int, err error) {
		rr.mu.Lock()
		rr.errs = append(rr.errs, err)
		rr.mu.Unlock()
	}
	r, err := e.ob.NewRelay(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	rr.relay = r
	ctx, cancel := context.WithCancel(context.Background())
	rr.cancel = cancel
	go func() { rr.done <- r.Run(ctx) }()
	e.t.Cleanup(rr.stop)
	return rr
}

func (rr *runningRelay) kick() {
	select {
	case rr.published <- struct{}{}:
	default:
	}
}

func (rr *runningRelay) stop() {
	if rr.cancel == nil {
		return
	}
	rr.cancel()
	<-rr.done
	rr.cancel = nil
}

// waitUnsent waits (on the relay's publish and dead events) until the outbox
// holds exactly want unsent rows.
func (e *env) waitUnsent(rr *runningRelay, want int64) {
	e.t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second) // rows published by another process raise no event here
	defer tick.Stop()
	for {
		st, err := e.ob.Status(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		if st.Unsent == want {
			return
		}
		select {
		case <-rr.published:
		case <-tick.C:
		case <-deadline.C:
			rr.mu.Lock()
			defer rr.mu.Unlock()
			e.t.Fatalf("outbox still holds %d unsent rows, want %d; relay errors: %v", st.Unsent, want, rr.errs)
		}
	}
}

// got is one record read back from the topic.
type got struct {
	key string
	id  string
	seq int64
}

// readTopic reads the whole topic with read_committed. It first writes an
// end marker to every partition with a plain producer and reads until it
// has seen all of them, so it knows it has read everything before.
func (e *env) readTopic() []got {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := e.b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for part := range int32(testPartitions) {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: testTopic, Partition: part, Key: []byte("__end__")}).FirstErr(); err != nil {
			e.t.Fatalf("end marker: %v", err)
		}
	}
	c := e.b.Client(kgo.ConsumeTopics(testTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []got
	ends := 0
	for ends < testPartitions {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			e.t.Fatalf("read topic: %v (read %d records, %d end markers)", err, len(out), ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == "__end__" {
				ends++
				return
			}
			g := got{key: string(r.Key)}
			for _, h := range r.Headers {
				switch h.Key {
				case dedup.HeaderMessageID:
					g.id = string(h.Value)
				case dedup.HeaderSequence:
					g.seq, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			out = append(out, g)
		})
	}
	return out
}

// checkExact asserts the topic holds every committed record, nothing else,
// each key's sequence 1..n in order, and at most maxDup duplicates in all
// (0: exactly once). It returns the number of duplicates.
func (e *env) checkExact(recs []got, committed []enqueued, rolledBack map[outbox.MessageID]bool, maxDup int) int {
	e.t.Helper()
	want := map[string]string{}
	perKey := map[string]int64{}
	for _, c := range committed {
		want[string(c.id)] = c.key
		perKey[c.key]++
	}
	seen := map[string]int{}
	next := map[string]int64{} // per key: highest seq seen so far
	dups := 0
	for _, g := range recs {
		if rolledBack[outbox.MessageID(g.id)] {
			e.t.Errorf("record %s of a rolled-back transaction is in the topic", g.id)
		}
		k, ok := want[g.id]
		if !ok {
			e.t.Errorf("record %s (key %s) was never committed", g.id, g.key)
			continue
		}
		if k != g.key {
			e.t.Errorf("record %s has key %s, want %s", g.id, g.key, k)
		}
		seen[g.id]++
		if seen[g.id] > 1 {
			dups++
			e.t.Logf("duplicate: key %s seq %d id %s", g.key, g.seq, g.id)
			if g.seq > next[g.key] {
				e.t.Errorf("key %s: duplicate seq %d ahead of the highest seen %d", g.key, g.seq, next[g.key])
			}
			continue
		}
		if g.seq != next[g.key]+1 {
			e.t.Errorf("key %s: seq %d follows %d", g.key, g.seq, next[g.key])
		}
		next[g.key] = max(next[g.key], g.seq)
	}
	for id, k := range want {
		if seen[id] == 0 {
			e.t.Errorf("committed record %s (key %s) is missing from the topic", id, k)
		}
	}
	for k, n := range perKey {
		if next[k] != n {
			e.t.Errorf("key %s: highest seq %d, want %d", k, next[k], n)
		}
	}
	if dups > maxDup {
		e.t.Errorf("%d duplicates in the topic, want at most %d", dups, maxDup)
	}
	return dups
}

func (e *env) countRows(table string) int {
	e.t.Helper()
	var n int
	if err := e.be.DB.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}
