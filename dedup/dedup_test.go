package dedup_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/sqltest"
)

// setup migrates a fresh database and creates the handler's table.
func setup(t testing.TB, b sqltest.Backend) {
	t.Helper()
	ctx := context.Background()
	s, err := dedup.New(b.DB, b.Dialect, "setup")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB.ExecContext(ctx, `CREATE TABLE applied (id TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB.ExecContext(ctx, `CREATE TABLE inventory (id TEXT PRIMARY KEY, count INTEGER NOT NULL, version INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

func newStore(t testing.TB, b sqltest.Backend, scope string, opts ...dedup.Option) *dedup.Store {
	t.Helper()
	s, err := dedup.New(b.DB, b.Dialect, scope, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countedStore is newStore with a Counters hook.
func countedStore(t *testing.T, b sqltest.Backend, scope string, opts ...dedup.Option) (*dedup.Store, *dedup.Counters) {
	c := new(dedup.Counters)
	return newStore(t, b, scope, append(opts, dedup.WithHooks(c))...), c
}

func msg(id string) *kgo.Record {
	return &kgo.Record{Topic: "orders", Partition: 0, Offset: 7, Value: []byte(id),
		Headers: []kgo.RecordHeader{{Key: dedup.HeaderMessageID, Value: []byte(id)}}}
}

func seqMsg(key string, seq int) *kgo.Record {
	return &kgo.Record{Topic: "orders", Key: []byte(key), Headers: []kgo.RecordHeader{
		{Key: dedup.HeaderSequence, Value: []byte(strconv.Itoa(seq))},
		{Key: dedup.HeaderSource, Value: []byte("shop-db/outbox")},
		{Key: dedup.HeaderMessageID, Value: []byte(fmt.Sprintf("%s-%d", key, seq))},
	}}
}

// insertApplied is the usual handler: one row per applied id.
func insertApplied(b sqltest.Backend, id string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO applied (id, n) VALUES (`+ph(b, 1)+`, 1)`, id)
		return err
	}
}

func ph(b sqltest.Backend, i int) string {
	if b.Dialect == dedup.Postgres {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

func count(t testing.TB, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestMigrateIdempotentAndConcurrent(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		ctx := context.Background()
		s := newStore(t, b, "m")
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() { errs <- s.Migrate(ctx) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent Migrate: %v", err)
			}
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup_schema WHERE version = 1`); n != 1 {
			t.Fatalf("version rows = %d, want 1", n)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup_schema`); n != dedup.SchemaVersion {
			t.Fatalf("schema rows = %d, want %d", n, dedup.SchemaVersion)
		}
		// A version-1 database (no offsets index) is brought forward.
		if _, err := b.DB.Exec(`DROP INDEX kawa_dedup_offsets`); err != nil {
			t.Fatal(err)
		}
		if _, err := b.DB.Exec(`DELETE FROM kawa_dedup_schema WHERE version = 2`); err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate from version 1: %v", err)
		}
		if _, err := b.DB.Exec(`DROP INDEX kawa_dedup_offsets`); err != nil {
			t.Fatalf("offsets index not recreated: %v", err)
		}
		// A newer schema than the package knows is refused.
		if _, err := b.DB.Exec(`INSERT INTO kawa_dedup_schema (version, applied_at) VALUES (99, 0)`); err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("Migrate over version 99 = %v, want a newer-schema error", err)
		}
	})
}

// TestDDLMatchesMigrate applies the exported DDL to a fresh database and
// checks that the Store works on it.
func TestDDLMatchesMigrate(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		for _, stmt := range strings.Split(dedup.DDL(b.Dialect), ";\n") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := b.DB.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		s := newStore(t, b, "ddl", dedup.WithSequence())
		for _, r := range []*kgo.Record{msg("a"), seqMsg("k", 1)} {
			if res, err := s.Process(context.Background(), r, func(context.Context, *sql.Tx) error { return nil }); err != nil || res != dedup.Applied {
				t.Fatalf("Process = %v, %v", res, err)
			}
		}
	})
}

func TestProcessOnceThenDuplicate(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		s, c := countedStore(t, b, "consumer-a")
		calls := 0
		fn := func(ctx context.Context, tx *sql.Tx) error { calls++; return insertApplied(b, "o1")(ctx, tx) }
		if res, err := s.Process(ctx, msg("m1"), fn); err != nil || res != dedup.Applied {
			t.Fatalf("first = %v, %v", res, err)
		}
		if res, err := s.Process(ctx, msg("m1"), fn); err != nil || res != dedup.Duplicate {
			t.Fatalf("second = %v, %v", res, err)
		}
		if calls != 1 {
			t.Fatalf("handler ran %d times, want 1", calls)
		}
		// Another scope sees the message as new.
		other := newStore(t, b, "consumer-b")
		if res, err := other.Process(ctx, msg("m1"), func(context.Context, *sql.Tx) error { return nil }); err != nil || res != dedup.Applied {
			t.Fatalf("other scope = %v, %v", res, err)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM applied`); n != 1 {
			t.Fatalf("applied rows = %d", n)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup`); n != 2 {
			t.Fatalf("dedup rows = %d, want 2 (one per scope)", n)
		}
		if c.Get(dedup.EventApplied) != 1 || c.Get(dedup.EventDuplicate) != 1 || c.Get(dedup.EventError) != 0 {
			t.Fatalf("counters applied=%d duplicate=%d error=%d", c.Get(dedup.EventApplied), c.Get(dedup.EventDuplicate), c.Get(dedup.EventError))
		}
	})
}

// TestFailureReleasesKey: a handler error or panic rolls the key back, so the
// retry applies (the Watermill bug the package exists to avoid).
func TestFailureReleasesKey(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		s, c := countedStore(t, b, "c")
		boom := errors.New("boom")
		res, err := s.Process(ctx, msg("m1"), func(ctx context.Context, tx *sql.Tx) error {
			if err := insertApplied(b, "o1")(ctx, tx); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || res != 0 {
			t.Fatalf("failing handler = %v, %v; want the handler's error", res, err)
		}
		res, err = s.Process(ctx, msg("m1"), func(ctx context.Context, tx *sql.Tx) error {
			if err := insertApplied(b, "o1")(ctx, tx); err != nil {
				return err
			}
			panic("handler bug")
		})
		var pe *dedup.PanicError
		if !errors.Is(err, dedup.ErrHandlerPanic) || !errors.As(err, &pe) || pe.Value != "handler bug" || len(pe.Stack) == 0 {
			t.Fatalf("panicking handler = %v, %v; want a PanicError", res, err)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup`) + count(t, b.DB, `SELECT COUNT(*) FROM applied`); n != 0 {
			t.Fatalf("%d rows left behind by failed attempts", n)
		}
		if res, err := s.Process(ctx, msg("m1"), insertApplied(b, "o1")); err != nil || res != dedup.Applied {
			t.Fatalf("retry = %v, %v; want Applied", res, err)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM applied WHERE id = 'o1'`); n != 1 {
			t.Fatalf("applied rows = %d", n)
		}
		if c.Get(dedup.EventError) != 2 || c.Get(dedup.EventApplied) != 1 {
			t.Fatalf("counters error=%d applied=%d, want 2 1", c.Get(dedup.EventError), c.Get(dedup.EventApplied))
		}
	})
}

// TestConcurrentCopies delivers the same message on two goroutines at once.
// Both enter Process (the key function is the barrier); whichever runs the
// handler holds its transaction open until the other is inside Process too
// and, on PostgreSQL, until the server shows it waiting on the key's lock.
// The handler must run once and the results must be {Applied, Duplicate}.
func TestConcurrentCopies(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		for round := range 10 {
			key := fmt.Sprintf("order-%d", round)
			c := newCopies(b)
			s := newStore(t, b, "c", dedup.WithKeyFunc(func(*kgo.Record) string { c.entered.Done(); return key }))
			c.run(t, func(fn func(context.Context, *sql.Tx) error) (dedup.Result, error) {
				return s.Process(context.Background(), &kgo.Record{Topic: "orders"}, fn)
			}, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO applied (id, n) VALUES (`+ph(b, 1)+`, 1)`, key)
				return err
			})
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM applied`); n != 10 {
			t.Fatalf("applied rows = %d, want 10", n)
		}
	})
}

// TestConcurrentSequenceCopies is TestConcurrentCopies for sequence mode, on
// a key's first record and on an existing key row.
func TestConcurrentSequenceCopies(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		s := newStore(t, b, "c", dedup.WithSequence())
		for seq := 1; seq <= 4; seq++ {
			c := newCopies(b)
			c.run(t, func(fn func(context.Context, *sql.Tx) error) (dedup.Result, error) {
				c.entered.Done()
				return s.Process(context.Background(), seqMsg("p", seq), fn)
			}, func(context.Context, *sql.Tx) error { return nil })
		}
	})
}

// copies is the barrier of the concurrent-copy tests.
type copies struct {
	b       sqltest.Backend
	entered sync.WaitGroup // Done once by each copy as it enters Process
	mu      sync.Mutex
	calls   int
}

func newCopies(b sqltest.Backend) *copies {
	c := &copies{b: b}
	c.entered.Add(2)
	return c
}

// run calls process on two goroutines at once with a handler that counts
// its calls, waits for both copies to be inside Process (and, on
// PostgreSQL, for one to wait on a lock), then does work. It fails the test
// unless the handler ran once and the results were {Applied, Duplicate}.
func (c *copies) run(t *testing.T, process func(fn func(context.Context, *sql.Tx) error) (dedup.Result, error), work func(context.Context, *sql.Tx) error) {
	t.Helper()
	// proceed lets the handler do its work; the test goroutine closes it
	// once the other copy waits on the lock (PostgreSQL), at once otherwise,
	// and on any exit, so the copies never outlive the test.
	proceed := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	fn := func(ctx context.Context, tx *sql.Tx) error {
		c.mu.Lock()
		c.calls++
		c.mu.Unlock()
		c.entered.Wait()
		<-proceed
		return work(ctx, tx)
	}
	results := make(chan dedup.Result, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer release()
	for range 2 {
		wg.Go(func() {
			res, err := process(fn)
			if err != nil {
				t.Errorf("copy: %v", err)
			}
			results <- res
		})
	}
	if c.b.Dialect == dedup.Postgres {
		waitForLockWaiter(t, c.b.DB)
	}
	release()
	wg.Wait()
	close(results)
	got := map[dedup.Result]int{}
	for r := range results {
		got[r]++
	}
	if c.calls != 1 || got[dedup.Applied] != 1 || got[dedup.Duplicate] != 1 {
		t.Fatalf("handler ran %d times, results %v; want once, {Applied, Duplicate}", c.calls, got)
	}
}

// waitForLockWaiter returns once another backend of this database waits on a
// lock (the second copy's INSERT blocked on the first copy's key row). It
// polls the server's state because PostgreSQL has no event for it.
func waitForLockWaiter(t *testing.T, db *sql.DB) {
	t.Helper()
	wait.Until(t, 10*time.Second, "a backend to wait on the key lock", func() bool {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		return n > 0
	})
}

func TestSequenceMode(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		s, c := countedStore(t, b, "c", dedup.WithSequence())
		var applied []int
		run := func(key string, seq int) (dedup.Result, error) {
			return s.Process(ctx, seqMsg(key, seq), func(context.Context, *sql.Tx) error {
				applied = append(applied, seq)
				return nil
			})
		}
		steps := []struct {
			seq  int
			want dedup.Result
		}{{1, dedup.Applied}, {1, dedup.Duplicate}, {3, dedup.Gap}, {2, dedup.Applied}, {3, dedup.Applied}, {2, dedup.Stale}, {1, dedup.Stale}, {3, dedup.Duplicate}, {5, dedup.Gap}, {4, dedup.Applied}}
		for i, st := range steps {
			res, err := run("p1", st.seq)
			if res != st.want {
				t.Fatalf("step %d (seq %d) = %v, %v; want %v", i, st.seq, res, err, st.want)
			}
			if st.want == dedup.Gap {
				var ge *dedup.GapError
				if !errors.Is(err, dedup.ErrGap) || !errors.As(err, &ge) || ge.Got != int64(st.seq) || ge.Stored != int64(st.seq-2) {
					t.Fatalf("step %d: gap error = %v", i, err)
				}
			} else if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if fmt.Sprint(applied) != "[1 2 3 4]" {
			t.Fatalf("applied %v, want [1 2 3 4]", applied)
		}
		// Bootstrap: a key first seen at 7 takes 7 as its baseline.
		if res, err := run("p2", 7); err != nil || res != dedup.Applied {
			t.Fatalf("baseline = %v, %v", res, err)
		}
		if res, _ := run("p2", 6); res != dedup.Stale {
			t.Fatalf("below baseline = %v, want Stale", res)
		}
		if n := count(t, b.DB, `SELECT seq FROM kawa_dedup_seq WHERE scope = 'c' AND key = `+ph(b, 1), []byte("p1")); n != 4 {
			t.Fatalf("stored seq of p1 = %d, want 4", n)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup_seq`); n != 2 {
			t.Fatalf("sequence rows = %d, want 2 (one per key)", n)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup`); n != 0 {
			t.Fatalf("message-id rows = %d, want 0 in sequence mode", n)
		}
		want := map[dedup.Event]int64{dedup.EventApplied: 5, dedup.EventDuplicate: 2, dedup.EventStale: 3, dedup.EventGap: 2, dedup.EventBaseline: 1, dedup.EventError: 0}
		for e, n := range want {
			if got := c.Get(e); got != n {
				t.Errorf("counter %v = %d, want %d", e, got, n)
			}
		}
		// A failing handler does not advance the sequence.
		if _, err := s.Process(ctx, seqMsg("p1", 5), func(context.Context, *sql.Tx) error { return errors.New("no") }); err == nil {
			t.Fatal("failing handler returned nil")
		}
		if res, err := run("p1", 5); err != nil || res != dedup.Applied {
			t.Fatalf("seq 5 after a failure = %v, %v", res, err)
		}
		// A gap that will never fill is skipped by the operator.
		if res, _ := run("p1", 9); res != dedup.Gap {
			t.Fatalf("seq 9 = %v, want Gap", res)
		}
		if err := s.SetSequence(ctx, "shop-db/outbox", "orders", []byte("p1"), 8); err != nil {
			t.Fatal(err)
		}
		if res, err := run("p1", 9); err != nil || res != dedup.Applied {
			t.Fatalf("seq 9 after SetSequence(8) = %v, %v", res, err)
		}
		// A record without a key has its own (empty-key) sequence.
		if res, err := run("", 1); err != nil || res != dedup.Applied {
			t.Fatalf("keyless seq 1 = %v, %v", res, err)
		}
		if res, _ := run("", 1); res != dedup.Duplicate {
			t.Fatalf("keyless seq 1 again = %v", res)
		}
		// Malformed sequence headers are rejected, never guessed at.
		bad := []*kgo.Record{
			{Topic: "orders", Headers: []kgo.RecordHeader{{Key: dedup.HeaderSequence, Value: []byte("x")}, {Key: dedup.HeaderSource, Value: []byte("s")}}},
			{Topic: "orders", Headers: []kgo.RecordHeader{{Key: dedup.HeaderSequence, Value: []byte("0")}, {Key: dedup.HeaderSource, Value: []byte("s")}}},
			{Topic: "orders", Headers: []kgo.RecordHeader{{Key: dedup.HeaderSequence, Value: []byte("3")}}},
		}
		for i, r := range bad {
			if _, err := s.Process(ctx, r, func(context.Context, *sql.Tx) error { t.Fatal("handler called"); return nil }); !errors.Is(err, dedup.ErrInvalidKey) {
				t.Errorf("bad record %d: %v, want ErrInvalidKey", i, err)
			}
		}
	})
}

func TestVersioned(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		if _, err := b.DB.Exec(`INSERT INTO inventory (id, count, version) VALUES ('p1', 10, 0)`); err != nil {
			t.Fatal(err)
		}
		v, err := dedup.NewVersioned(b.Dialect, "inventory", "id", "version", "count")
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			id       string
			expected int64
			count    int
			want     dedup.VersionResult
		}{
			{"p1", 0, 9, dedup.VersionApplied},
			{"p1", 0, 9, dedup.VersionAlreadyApplied},
			{"p1", 1, 7, dedup.VersionApplied},
			{"p1", 0, 5, dedup.VersionAlreadyApplied},
			{"p1", 5, 5, dedup.VersionConflict},
			{"nope", 0, 1, dedup.VersionNotFound},
		}
		for i, st := range steps {
			tx, err := b.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Apply(ctx, tx, st.id, st.expected, dedup.Set("count", st.count))
			if err != nil || got != st.want {
				t.Fatalf("step %d: Apply = %v, %v; want %v", i, got, err, st.want)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		var cnt, ver int
		if err := b.DB.QueryRow(`SELECT count, version FROM inventory WHERE id = 'p1'`).Scan(&cnt, &ver); err != nil {
			t.Fatal(err)
		}
		if cnt != 7 || ver != 2 {
			t.Fatalf("row = count %d version %d, want 7 2", cnt, ver)
		}
		if _, err := v.Apply(ctx, b.DB, "p1", 2, dedup.Set("version", 1)); err == nil {
			t.Fatal("assigning the version column was accepted")
		}
		if _, err := v.Apply(ctx, b.DB, "p1", 2, dedup.Set("count", 1), dedup.Set("count", 2)); err == nil {
			t.Fatal("assigning a column twice was accepted")
		}
		if _, err := v.Apply(ctx, b.DB, "p1", 2, dedup.Set("count = 0, version", 1)); err == nil {
			t.Fatal("an undeclared column was accepted")
		}
	})
	bad := [][4]string{
		{"inventory; DROP TABLE x", "id", "version", "count"},
		{"a.b.c", "id", "version", "count"},
		{"inventory", "1id", "version", "count"},
		{"inventory", "id", "ver sion", "count"},
		{"inventory", "id", "id", "count"},
		{"inventory", "id", "version", "version"},
		{"inventory", "id", "version", "cöunt"},
		{"inventory", "id", "version", strings.Repeat("c", 64)},
	}
	for _, c := range bad {
		if _, err := dedup.NewVersioned(dedup.SQLite, c[0], c[1], c[2], c[3]); err == nil {
			t.Errorf("NewVersioned(%q) accepted", c)
		}
	}
	if _, err := dedup.NewVersioned(dedup.Postgres, "shop.inventory", "id", "version", "count", "updated_at"); err != nil {
		t.Errorf("schema-qualified table refused: %v", err)
	}
}

func TestPrune(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
		s := newStore(t, b, "c")
		other := newStore(t, b, "other")
		dedup.SetPruneBatch(s, 2)
		nop := func(context.Context, *sql.Tx) error { return nil }
		for i := range 10 {
			// Keys 0..6 are 8 days old, 7..9 one hour old.
			at := now.Add(-8 * 24 * time.Hour)
			if i >= 7 {
				at = now.Add(-time.Hour)
			}
			dedup.SetNow(s, func() time.Time { return at })
			dedup.SetNow(other, func() time.Time { return at })
			for _, st := range []*dedup.Store{s, other} {
				if _, err := st.Process(ctx, msg(fmt.Sprintf("m%d", i)), nop); err != nil {
					t.Fatal(err)
				}
			}
		}
		dedup.SetNow(s, func() time.Time { return now })
		n, err := s.Prune(ctx, 7*24*time.Hour)
		if err != nil || n != 7 {
			t.Fatalf("Prune = %d, %v; want 7 (in batches of 2)", n, err)
		}
		if got := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup WHERE scope = 'c'`); got != 3 {
			t.Fatalf("keys left = %d, want 3", got)
		}
		if got := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup WHERE scope = 'other'`); got != 10 {
			t.Fatalf("other scope's keys = %d, want 10 untouched", got)
		}
		if n, err := s.Prune(ctx, 7*24*time.Hour); err != nil || n != 0 {
			t.Fatalf("second Prune = %d, %v", n, err)
		}
		// Offset keys of one partition go below the committed offset; the
		// message-id keys and other partitions stay.
		for p := range int32(2) {
			for off := range int64(5) {
				if _, err := s.Process(ctx, &kgo.Record{Topic: "orders", Partition: p, Offset: off}, nop); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n, err := s.PruneOffsets(ctx, "orders", 1, 3); err != nil || n != 3 {
			t.Fatalf("PruneOffsets = %d, %v; want 3", n, err)
		}
		if got := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup WHERE scope = 'c'`); got != 3+7 {
			t.Fatalf("keys left = %d, want 10", got)
		}
		if res, _ := s.Process(ctx, &kgo.Record{Topic: "orders", Partition: 1, Offset: 3}, nop); res != dedup.Duplicate {
			t.Fatalf("offset 3 (not below committed) = %v, want Duplicate", res)
		}
		// A pruned key is forgotten (documented); a kept one is not.
		if res, _ := s.Process(ctx, msg("m0"), nop); res != dedup.Applied {
			t.Fatalf("pruned key = %v, want Applied", res)
		}
		if res, _ := s.Process(ctx, msg("m9"), nop); res != dedup.Duplicate {
			t.Fatalf("kept key = %v, want Duplicate", res)
		}
	})
}

// TestBadInput: a record without headers or key function falls back to its
// offset; key material that a key column cannot hold is refused clearly and
// nothing is recorded.
func TestBadInput(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		s := newStore(t, b, "c")
		nop := func(context.Context, *sql.Tx) error { return nil }
		rec := &kgo.Record{Topic: "orders", Partition: 2, Offset: 41}
		if res, err := s.Process(ctx, rec, nop); err != nil || res != dedup.Applied {
			t.Fatalf("headerless = %v, %v", res, err)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup WHERE key = 'o:orders/2/41' AND "partition" = 2 AND "offset" = 41`); n != 1 {
			t.Fatalf("offset key row missing")
		}
		if res, _ := s.Process(ctx, &kgo.Record{Topic: "orders", Partition: 2, Offset: 41}, nop); res != dedup.Duplicate {
			t.Fatalf("redelivered offset = %v, want Duplicate", res)
		}
		// Topic IDs replace the name when known.
		id := [16]byte{0xab, 1}
		withID := newStore(t, b, "c", dedup.WithTopicIDs(func(string) [16]byte { return id }))
		if res, _ := withID.Process(ctx, rec, nop); res != dedup.Applied {
			t.Fatalf("topic-ID key = %v, want Applied (a different key from the name's)", res)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup WHERE key = 'o:ab010000000000000000000000000000/2/41'`); n != 1 {
			t.Fatalf("topic-ID key row missing")
		}
		long := strings.Repeat("x", dedup.MaxKeyLen+1)
		bad := map[string]*dedup.Store{
			long:     s,
			"":       s,
			"a\x00b": s,
			"\xff":   s,
		}
		for id, st := range bad {
			if _, err := st.Process(ctx, msg(id), func(context.Context, *sql.Tx) error { t.Fatal("handler called"); return nil }); !errors.Is(err, dedup.ErrInvalidKey) {
				t.Errorf("message id %q: %v, want ErrInvalidKey", id, err)
			}
		}
		kf := newStore(t, b, "c", dedup.WithKeyFunc(func(*kgo.Record) string { return long }))
		if _, err := kf.Process(ctx, &kgo.Record{Topic: "orders"}, nop); !errors.Is(err, dedup.ErrInvalidKey) || !strings.Contains(err.Error(), "over 512") {
			t.Errorf("long key func result: %v", err)
		}
		if _, err := s.Process(ctx, nil, nop); !errors.Is(err, dedup.ErrInvalidKey) {
			t.Errorf("nil record: %v", err)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup`); n != 2 {
			t.Fatalf("dedup rows = %d, want 2", n)
		}
		for _, scope := range []string{"", long} {
			if _, err := dedup.New(b.DB, b.Dialect, scope); !errors.Is(err, dedup.ErrInvalidKey) {
				t.Errorf("New with scope of %d bytes: %v", len(scope), err)
			}
		}
		if _, err := dedup.New(b.DB, dedup.Dialect(9), "c"); err == nil {
			t.Error("unknown dialect accepted")
		}
	})
}

// TestCrashPointsInProcess: the points come in order on an applied record and
// not at all on a duplicate; a "crash" (panic) at before-commit leaves
// nothing, one at after-commit leaves the work committed.
func TestCrashPointsInProcess(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		var seen []string
		crashAt := ""
		s := newStore(t, b, "c", dedup.WithCrashPoint(func(p string) {
			seen = append(seen, p)
			if p == crashAt {
				panic("crash at " + p)
			}
		}))
		if _, err := s.Process(ctx, msg("m1"), insertApplied(b, "o1")); err != nil {
			t.Fatal(err)
		}
		if want := []string{dedup.PointKeyRecorded, dedup.PointBeforeCommit, dedup.PointAfterCommit}; fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("points %v, want %v", seen, want)
		}
		seen = nil
		if res, _ := s.Process(ctx, msg("m1"), insertApplied(b, "o1")); res != dedup.Duplicate || len(seen) != 0 {
			t.Fatalf("duplicate: %v, points %v", res, seen)
		}
		crash := func(point, id string) {
			defer func() { recover() }()
			crashAt = point
			s.Process(ctx, msg(id), insertApplied(b, id))
		}
		crash(dedup.PointBeforeCommit, "m2")
		crash(dedup.PointAfterCommit, "m3")
		crashAt = ""
		if res, _ := s.Process(ctx, msg("m2"), insertApplied(b, "m2")); res != dedup.Applied {
			t.Fatalf("after a crash before commit: %v, want Applied", res)
		}
		if res, _ := s.Process(ctx, msg("m3"), insertApplied(b, "m3")); res != dedup.Duplicate {
			t.Fatalf("after a crash after commit: %v, want Duplicate", res)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM applied`); n != 3 {
			t.Fatalf("applied rows = %d, want 3", n)
		}
	})
}

// TestMigrateAppUser: once the schema is current, Migrate runs no DDL, so an
// application user without CREATE on the schema (PostgreSQL: a role with
// only table privileges) can start; before, CREATE TABLE IF NOT EXISTS
// kawa_dedup_schema failed with "permission denied for schema public".
func TestMigrateAppUser(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		ctx := context.Background()
		if err := newStore(t, b, "app").Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		app, d := sqltest.Open(t, sqltest.AppUserURL(t, b))
		s, err := dedup.New(app, d, "app")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate as the application user on a current schema: %v", err)
		}
		if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup_schema`); n != dedup.SchemaVersion {
			t.Fatalf("schema rows = %d, want %d", n, dedup.SchemaVersion)
		}
	})
}
