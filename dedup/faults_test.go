package dedup_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/sqlurl"
)

// eventSignal is a Hooks that counts like Counters and also signals the
// first occurrence of one event on a channel, so a test can wait for it.
type eventSignal struct {
	dedup.Counters
	on   dedup.Event
	once atomic.Bool
	ch   chan struct{}
}

func (e *eventSignal) OnEvent(ev dedup.Event) {
	e.Counters.OnEvent(ev)
	if ev == e.on && e.once.CompareAndSwap(false, true) {
		close(e.ch)
	}
}

// TestTransientDeadlockRetried provokes a real deadlock (40P01) between two
// handlers that update two rows in opposite order; PostgreSQL aborts one, and
// Process reruns it: both end Applied with one retry.
func TestTransientDeadlockRetried(t *testing.T) {
	b := sqltest.New(t, "postgres")
	setup(t, b)
	ctx := context.Background()
	if _, err := b.DB.Exec(`INSERT INTO inventory (id, count, version) VALUES ('r1', 100, 0), ('r2', 100, 0)`); err != nil {
		t.Fatal(err)
	}
	s, c := countedStore(t, b, "c", dedup.WithRetry(10, time.Millisecond))
	held := map[string]chan struct{}{"r1": make(chan struct{}), "r2": make(chan struct{})}
	handler := func(first, second string) func(context.Context, *sql.Tx) error {
		var attempt atomic.Int32
		return func(ctx context.Context, tx *sql.Tx) error {
			// Detect the deadlock quickly (superuser setting, this transaction only).
			if _, err := tx.ExecContext(ctx, `SET LOCAL deadlock_timeout = '50ms'`); err != nil {
				return err
			}
			for i, id := range []string{first, second} {
				if _, err := tx.ExecContext(ctx, `UPDATE inventory SET count = count - 1 WHERE id = $1`, id); err != nil {
					return err
				}
				if i == 0 && attempt.Add(1) == 1 {
					close(held[first]) // this transaction holds `first`
					<-held[second]     // and the other one holds `second`
				}
			}
			return nil
		}
	}
	errs := make(chan error, 2)
	for _, pair := range [][2]string{{"r1", "r2"}, {"r2", "r1"}} {
		go func() {
			res, err := s.Process(ctx, msg("m-"+pair[0]), handler(pair[0], pair[1]))
			if err == nil && res != dedup.Applied {
				err = fmt.Errorf("result %v", res)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("Process: %v", err)
		}
	}
	// At least the first deadlock's victim was rerun. The rerun can deadlock
	// again: it may lock its first row before the woken winner re-locks it.
	if got := c.Get(dedup.EventRetried); got < 1 || c.Get(dedup.EventApplied) != 2 || c.Get(dedup.EventError) != 0 {
		t.Fatalf("retried=%d applied=%d errors=%d, want >=1 2 0", got, c.Get(dedup.EventApplied), c.Get(dedup.EventError))
	}
	if n := count(t, b.DB, `SELECT SUM(count) FROM inventory`); n != 196 {
		t.Fatalf("inventory sum = %d, want 196 (each handler committed once)", n)
	}
	if n := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup`); n != 2 {
		t.Fatalf("dedup rows = %d, want 2", n)
	}
}

// sqliteWithDSN returns a set-up SQLite backend and the driver DSN of its
// file, for tests that open it a second way.
func sqliteWithDSN(t *testing.T) (sqltest.Backend, string) {
	b := sqltest.New(t, "sqlite")
	setup(t, b)
	_, dsn, _, err := sqlurl.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	return b, dsn
}

// TestTransientBusyRetried holds SQLite's write lock from another connection
// so that Process, on a pool with a short busy timeout, gets SQLITE_BUSY; once
// the first retry is counted the lock is released and Process applies.
func TestTransientBusyRetried(t *testing.T) {
	b, dsn := sqliteWithDSN(t)
	ctx := context.Background()
	short, err := sql.Open("sqlite", strings.Replace(dsn, "busy_timeout(10000)", "busy_timeout(20)", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	holder, err := b.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	h := &eventSignal{on: dedup.EventRetried, ch: make(chan struct{})}
	s, err := dedup.New(short, dedup.SQLite, "c", dedup.WithHooks(h), dedup.WithRetry(50, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := s.Process(ctx, msg("m1"), insertApplied(b, "o1"))
		if err == nil && res != dedup.Applied {
			err = fmt.Errorf("result %v", res)
		}
		done <- err
	}()
	<-h.ch
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Process: %v", err)
	}
	if h.Get(dedup.EventRetried) < 1 || h.Get(dedup.EventApplied) != 1 {
		t.Fatalf("retried=%d applied=%d", h.Get(dedup.EventRetried), h.Get(dedup.EventApplied))
	}
	// Bounded: with the lock held for good, Process gives up after its attempts.
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer holder.ExecContext(ctx, "ROLLBACK")
	bc := new(dedup.Counters)
	// (A zero backoff reruns at once; it used to panic in rand.N.)
	bounded, err := dedup.New(short, dedup.SQLite, "c", dedup.WithHooks(bc), dedup.WithRetry(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bounded.Process(ctx, msg("m2"), insertApplied(b, "o2")); err == nil {
		t.Fatal("Process succeeded while the write lock was held")
	} else if !strings.Contains(err.Error(), "SQLITE_BUSY") && !strings.Contains(err.Error(), "locked") {
		t.Fatalf("error %v, want the busy error", err)
	}
	if got := bc.Get(dedup.EventRetried); got != 2 {
		t.Fatalf("retried = %d, want 2 (3 attempts)", got)
	}
}

// TestPostgresGoesAway: while a handler runs, the database stops accepting
// connections and its backends are terminated. Process returns errors (not
// retried as transient), the dedup and handler row counts do not change, and
// after recovery the failed record applies once.
func TestPostgresGoesAway(t *testing.T) {
	b := sqltest.New(t, "postgres")
	setup(t, b)
	ctx := context.Background()
	s, c := countedStore(t, b, "c")
	for i := range 5 {
		if _, err := s.Process(ctx, msg(fmt.Sprint("m", i)), insertApplied(b, fmt.Sprint("o", i))); err != nil {
			t.Fatal(err)
		}
	}
	// keep is reserved (the pool never hands it to Process) and survives the
	// outage to count rows; admin is on the server's maintenance database,
	// since a database cannot disallow connections to itself.
	keep, err := b.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	var name string
	var keepPID int
	if err := keep.QueryRowContext(ctx, `SELECT current_database(), pg_backend_pid()`).Scan(&name, &keepPID); err != nil {
		t.Fatal(err)
	}
	admin, _, err := sqlurl.Open(ctx, os.Getenv(sqltest.EnvPostgresURL))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	defer admin.Exec(`ALTER DATABASE ` + name + ` ALLOW_CONNECTIONS true`)
	goAway := func(ctx context.Context, tx *sql.Tx) error {
		if err := insertApplied(b, "o5")(ctx, tx); err != nil {
			return err
		}
		if _, err := admin.ExecContext(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS false`); err != nil {
			return fmt.Errorf("test setup: %w", err)
		}
		if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> $2`, name, keepPID); err != nil {
			return fmt.Errorf("test setup: %w", err)
		}
		return nil
	}
	if _, err := s.Process(ctx, msg("m5"), goAway); err == nil || strings.Contains(err.Error(), "test setup") {
		t.Fatalf("Process across the outage = %v, want a database error", err)
	} else {
		t.Logf("across the outage: %v", err)
	}
	for i := 5; i < 8; i++ {
		if _, err := s.Process(ctx, msg(fmt.Sprint("m", i)), insertApplied(b, fmt.Sprint("o", i))); err == nil {
			t.Fatalf("Process m%d succeeded with the database gone", i)
		} else if i == 5 {
			t.Logf("with the database gone: %v", err)
		}
	}
	countOn := func(q string) (n int) {
		if err := keep.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if d, a := countOn(`SELECT COUNT(*) FROM kawa_dedup`), countOn(`SELECT COUNT(*) FROM applied`); d != 5 || a != 5 {
		t.Fatalf("during the outage: dedup rows %d, applied %d; want 5 5", d, a)
	}
	if got := c.Get(dedup.EventRetried); got != 0 {
		t.Fatalf("retried = %d: a lost database is not transient", got)
	}
	if got := c.Get(dedup.EventError); got != 4 {
		t.Fatalf("errors = %d, want 4", got)
	}
	if _, err := admin.ExecContext(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 8; i++ {
		if res, err := s.Process(ctx, msg(fmt.Sprint("m", i)), insertApplied(b, fmt.Sprint("o", i))); err != nil || res != dedup.Applied {
			t.Fatalf("after recovery m%d = %v, %v", i, res, err)
		}
	}
	if d, a := countOn(`SELECT COUNT(*) FROM kawa_dedup`), countOn(`SELECT COUNT(*) FROM applied`); d != 8 || a != 8 {
		t.Fatalf("after recovery: dedup rows %d, applied %d; want 8 8", d, a)
	}
}

// TestSQLiteGoesAway does the same for SQLite through a driver wrapper that
// starts failing every operation (including COMMIT) on command: CI runs as
// root, so file permissions could not make SQLite fail.
func TestSQLiteGoesAway(t *testing.T) {
	b, dsn := sqliteWithDSN(t)
	ctx := context.Background()
	var fail atomic.Bool
	db := sql.OpenDB(&failingConnector{dsn: dsn, drv: b.DB.Driver(), fail: &fail})
	defer db.Close()
	c := new(dedup.Counters)
	s, err := dedup.New(db, dedup.SQLite, "c", dedup.WithHooks(c))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Process(ctx, msg(fmt.Sprint("m", i)), insertApplied(b, fmt.Sprint("o", i))); err != nil {
			t.Fatal(err)
		}
	}
	goAway := func(ctx context.Context, tx *sql.Tx) error {
		if err := insertApplied(b, "o5")(ctx, tx); err != nil {
			return err
		}
		fail.Store(true)
		return nil
	}
	if _, err := s.Process(ctx, msg("m5"), goAway); !errors.Is(err, errInjected) {
		t.Fatalf("Process across the failure = %v, want the injected error", err)
	}
	for i := 5; i < 8; i++ {
		if _, err := s.Process(ctx, msg(fmt.Sprint("m", i)), insertApplied(b, fmt.Sprint("o", i))); !errors.Is(err, errInjected) {
			t.Fatalf("Process m%d with the database failing = %v", i, err)
		}
	}
	if d, a := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup`), count(t, b.DB, `SELECT COUNT(*) FROM applied`); d != 5 || a != 5 {
		t.Fatalf("during the failure: dedup rows %d, applied %d; want 5 5", d, a)
	}
	if c.Get(dedup.EventRetried) != 0 || c.Get(dedup.EventError) != 4 {
		t.Fatalf("retried=%d errors=%d, want 0 4", c.Get(dedup.EventRetried), c.Get(dedup.EventError))
	}
	fail.Store(false)
	for i := 5; i < 8; i++ {
		if res, err := s.Process(ctx, msg(fmt.Sprint("m", i)), insertApplied(b, fmt.Sprint("o", i))); err != nil || res != dedup.Applied {
			t.Fatalf("after recovery m%d = %v, %v", i, res, err)
		}
	}
	if d, a := count(t, b.DB, `SELECT COUNT(*) FROM kawa_dedup`), count(t, b.DB, `SELECT COUNT(*) FROM applied`); d != 8 || a != 8 {
		t.Fatalf("after recovery: dedup rows %d, applied %d; want 8 8", d, a)
	}
}

var errInjected = errors.New("injected: disk I/O error")

// failingConnector opens real SQLite connections that fail every operation
// while *fail is set. A COMMIT that fails rolls the real transaction back, as
// a write error would.
type failingConnector struct {
	dsn  string
	drv  driver.Driver
	fail *atomic.Bool
}

func (c *failingConnector) Connect(context.Context) (driver.Conn, error) {
	if c.fail.Load() {
		return nil, errInjected
	}
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &failingConn{inner: conn, fail: c.fail}, nil
}

func (c *failingConnector) Driver() driver.Driver { return c.drv }

type failingConn struct {
	inner driver.Conn
	fail  *atomic.Bool
}

func (c *failingConn) check() error {
	if c.fail.Load() {
		return errInjected
	}
	return nil
}

func (c *failingConn) Prepare(q string) (driver.Stmt, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.inner.Prepare(q)
}

func (c *failingConn) Close() error              { return c.inner.Close() }
func (c *failingConn) Begin() (driver.Tx, error) { return nil, errors.New("use BeginTx") }

func (c *failingConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	tx, err := c.inner.(driver.ConnBeginTx).BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return &failingTx{inner: tx, conn: c}, nil
}

func (c *failingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.inner.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *failingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.inner.(driver.QueryerContext).QueryContext(ctx, q, args)
}

type failingTx struct {
	inner driver.Tx
	conn  *failingConn
}

func (t *failingTx) Commit() error {
	if err := t.conn.check(); err != nil {
		t.inner.Rollback()
		return err
	}
	return t.inner.Commit()
}

func (t *failingTx) Rollback() error { return t.inner.Rollback() }

// TestCrashKill runs a child process that SIGKILLs itself at each named crash
// point inside Process, on both backends, and checks what the crash left:
// nothing before the commit (the redelivery applies), the work and the key
// after it (the redelivery is a Duplicate).
func TestCrashKill(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
		setup(t, b)
		ctx := context.Background()
		s := newStore(t, b, "c")
		for i, tc := range []struct {
			point string
			want  dedup.Result // of the redelivery
		}{
			{dedup.PointKeyRecorded, dedup.Applied},
			{dedup.PointBeforeCommit, dedup.Applied},
			{dedup.PointAfterCommit, dedup.Duplicate},
		} {
			id := fmt.Sprint("m", i)
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
			cmd.Env = append(os.Environ(), "DEDUP_CRASH_URL="+b.URL, "DEDUP_CRASH_POINT="+tc.point, "DEDUP_CRASH_ID="+id)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("%s: child ended with %v, want SIGKILL:\n%s", tc.point, err, out)
			}
			res, err := s.Process(ctx, msg(id), insertApplied(b, id))
			if err != nil || res != tc.want {
				t.Fatalf("%s: redelivery = %v, %v; want %v", tc.point, res, err, tc.want)
			}
			if n := count(t, b.DB, `SELECT COUNT(*) FROM applied WHERE id = `+ph(b, 1), id); n != 1 {
				t.Fatalf("%s: %s applied %d times, want once", tc.point, id, n)
			}
		}
	})
}

// TestCrashChild is TestCrashKill's child; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	url, point, id := os.Getenv("DEDUP_CRASH_URL"), os.Getenv("DEDUP_CRASH_POINT"), os.Getenv("DEDUP_CRASH_ID")
	if url == "" {
		t.Skip("child of TestCrashKill only")
	}
	db, d, err := sqlurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dedup.New(db, d, "c", dedup.WithCrashPoint(func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Process(context.Background(), msg(id), insertApplied(sqltest.Backend{Dialect: d}, id))
	t.Fatalf("Process returned %v, %v without reaching %s", res, err, point)
}
