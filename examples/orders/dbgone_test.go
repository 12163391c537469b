package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/sqlurl"
)

// TestPostgresGoneMidRun is sdk-design.md's C5 at the example level: while
// orders flow, the database refuses connections and every session of it is
// terminated, until the consumer has failed a record's attempt twice and the
// application a transaction; then it comes back. The consumer must not
// skip what failed (no dead letter, no offset past it: the example's check of
// applied = committed ids and of the committed offsets), the application
// retries its transactions with the commit outcome settled by the order row,
// and the run verifies. (SQLite's version of a database going away is
// dedup's failing-driver test: a file cannot be taken from a process.)
func TestPostgresGoneMidRun(t *testing.T) {
	be := sqltest.New(t, "postgres")
	u, err := url.Parse(be.URL)
	if err != nil {
		t.Fatal(err)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	admin, _, err := sqlurl.Open(context.Background(), os.Getenv(sqltest.EnvPostgresURL))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b := kawatest.NewBroker(t)

	// No --rate: the application outruns the consumer, so records are in
	// flight when the database goes.
	const orders = 300
	cmd := exec.Command(os.Args[0], "--brokers", b.Addr, "--db", be.URL, "--orders", fmt.Sprint(orders),
		"--products", "8", "--run-id", "gone", "--timeout", "100s")
	cmd.Env = append(os.Environ(), envMain+"=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A failing test must not leave the run behind (its children follow
	// the supervisor).
	t.Cleanup(func() { cmd.Process.Kill() })
	// Events from the example's stderr: the first applied order is seen
	// through the consumer's retries only, so watch for the failures.
	// appDone: the application committed all its orders; when that happens
	// before the cut (it outran a consumer slowed by a loaded machine) it has
	// no transaction left to fail, and only the consumer's failure is awaited.
	consumerFailed, appFailed, appDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var logs bytes.Buffer
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		var cf, af, ad bool
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logs.WriteString(line + "\n")
			if !cf && strings.Contains(line, "orders consumer:") && strings.Contains(line, "attempt 2 failed") {
				cf = true
				close(consumerFailed)
			}
			if !af && strings.Contains(line, "orders application:") {
				af = true
				close(appFailed)
			}
			if !ad && strings.HasPrefix(line, "orders: ") && strings.Contains(line, " orders committed, ") {
				ad = true
				close(appDone)
			}
		}
	}()
	exec := func(q string) {
		t.Helper()
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Cut once the consumer has applied some orders (it is then mid-stream).
	wait.Until(t, 60*time.Second, "30 orders applied", func() bool {
		var n int
		return be.DB.QueryRow(`SELECT COUNT(*) FROM applied`).Scan(&n) == nil && n >= 30
	})
	be.DB.Close() // the test's own pool would be terminated anyway
	exec(`ALTER DATABASE "` + dbName + `" ALLOW_CONNECTIONS false`)
	exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + dbName + `' AND pid <> pg_backend_pid()`)
	timeout := time.After(60 * time.Second)
	for _, ev := range []struct {
		what   string
		failed chan struct{}
		done   chan struct{} // closed when no failure can come any more (nil: never)
	}{{"consumer", consumerFailed, nil}, {"application", appFailed, appDone}} {
		select {
		case <-ev.failed:
		case <-ev.done:
			t.Logf("the %s finished before the database went: none of its transactions could fail", ev.what)
		case <-timeout:
			exec(`ALTER DATABASE "` + dbName + `" ALLOW_CONNECTIONS true`)
			t.Fatalf("no %s failure seen while the database was gone:\n%s", ev.what, logs.String())
		}
	}
	exec(`ALTER DATABASE "` + dbName + `" ALLOW_CONNECTIONS true`)
	<-scanned
	err = cmd.Wait()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := fmt.Sprintf("verified: %d orders, %d applied exactly once, inventory consistent", orders, orders)
	if err != nil || lines[len(lines)-1] != want {
		t.Fatalf("example: %v, last line %q, want %q\nstdout:\n%s\nstderr:\n%s", err, lines[len(lines)-1], want, out.String(), tail(logs.String(), 40))
	}
	t.Log(lines[0])
}
