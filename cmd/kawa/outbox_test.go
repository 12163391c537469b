package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// TestOutboxCLI drives kawa outbox status / dead list / retry / drop
// against an outbox holding one dead row that parks its key.
func TestOutboxCLI(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		ctx := context.Background()
		if err := outbox.Migrate(ctx, be.DB, be.Dialect); err != nil {
			t.Fatal(err)
		}
		ob, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: "clitest"})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := be.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k", "k", "other"} {
			if _, err := ob.Enqueue(ctx, tx, outbox.Record{Topic: "t", Key: []byte(k), Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// Bury k's first row (the lowest id) as the relay does after its last
		// attempt.
		if _, err := be.DB.ExecContext(ctx, `INSERT INTO kawa_outbox_dead (id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, attempts, error, died_at)
SELECT id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, 5, 'MESSAGE_TOO_LARGE', 0 FROM kawa_outbox WHERE id = (SELECT MIN(id) FROM kawa_outbox)`); err != nil {
			t.Fatal(err)
		}
		if _, err := be.DB.ExecContext(ctx, `DELETE FROM kawa_outbox WHERE id IN (SELECT id FROM kawa_outbox_dead)`); err != nil {
			t.Fatal(err)
		}
		// Shard 0 held, shard 1 released as the relay's releaseQ leaves it
		// (owner '', expires_at 0).
		held := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		if _, err := be.DB.ExecContext(ctx, `INSERT INTO kawa_outbox_leases (shard, owner, epoch, expires_at) VALUES (0, 'relay-a', 2, `+strconv.FormatInt(held.UnixMilli(), 10)+`), (1, '', 3, 0)`); err != nil {
			t.Fatal(err)
		}
		db := "--db=" + be.URL
		out := mustRun(t, runOutbox, "", "status", db)
		for _, want := range []string{"unsent rows:   2", "dead rows:     1", "parked keys:   1 (1 rows waiting)"} {
			if !strings.Contains(out, want) {
				t.Errorf("status output lacks %q:\n%s", want, out)
			}
		}
		var leases []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 4 && (f[0] == "0" || f[0] == "1") {
				leases = append(leases, strings.Join(f, " "))
			}
		}
		if want := []string{"0 relay-a 2 2030-01-02T03:04:05Z", "1 - 3 -"}; !slices.Equal(leases, want) {
			t.Errorf("status leases = %q, want %q (a released lease's expiry is -, not 1970):\n%s", leases, want, out)
		}
		if st, err := ob.Status(ctx); err != nil || len(st.Leases) != 2 || !st.Leases[1].ExpiresAt.IsZero() || !st.Leases[0].ExpiresAt.Equal(held) {
			t.Errorf("Status leases = %+v, %v; want shard 1's ExpiresAt zero, shard 0's %v", st.Leases, err, held)
		}
		out = mustRun(t, runOutbox, "", "dead", "list", db)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.Contains(lines[1], `"k"`) || !strings.Contains(lines[1], "MESSAGE_TOO_LARGE") {
			t.Fatalf("dead list:\n%s", out)
		}
		id := strings.Fields(lines[1])[0]
		if _, err := runCmd(t, runOutbox, "", "dead", "retry", "999999", db); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("retry of a missing id: %v, want ErrNotFound", err)
		}
		mustRun(t, runOutbox, "", "dead", "retry", id, db)
		out = mustRun(t, runOutbox, "", "status", db)
		if !strings.Contains(out, "unsent rows:   3") || !strings.Contains(out, "dead rows:     0") {
			t.Errorf("status after retry:\n%s", out)
		}
		var seq int64
		if err := be.DB.QueryRowContext(ctx, `SELECT seq FROM kawa_outbox WHERE id = `+id).Scan(&seq); err != nil || seq != 1 {
			t.Errorf("retried row: seq %d, %v; want its original seq 1", seq, err)
		}
		// Bury it again and drop it.
		if _, err := be.DB.ExecContext(ctx, `INSERT INTO kawa_outbox_dead (id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, attempts, error, died_at)
SELECT id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, 5, 'x', 0 FROM kawa_outbox WHERE id = `+id); err != nil {
			t.Fatal(err)
		}
		if _, err := be.DB.ExecContext(ctx, `DELETE FROM kawa_outbox WHERE id = `+id); err != nil {
			t.Fatal(err)
		}
		mustRun(t, runOutbox, "", "dead", "drop", id, db)
		out = mustRun(t, runOutbox, "", "status", db)
		if !strings.Contains(out, "unsent rows:   2") || !strings.Contains(out, "dead rows:     0") || !strings.Contains(out, "parked keys:   0") {
			t.Errorf("status after drop:\n%s", out)
		}
	})
}

func TestOutboxCLIUsage(t *testing.T) {
	var ue *cli.UsageError
	for _, args := range [][]string{
		{},
		{"nope"},
		{"status"},
		{"dead"},
		{"dead", "list", "extra", "--db=sqlite:///tmp/x.db"},
		{"dead", "retry", "--db=sqlite:///tmp/x.db"},
		{"dead", "retry", "abc", "--db=sqlite:///tmp/x.db"},
	} {
		if _, err := runCmd(t, runOutbox, "", args...); !errors.As(err, &ue) {
			t.Errorf("kawa outbox %q: %v, want a usage error", args, err)
		}
	}
}

// TestOutboxCLIMissingSQLiteFile: a --db naming a SQLite file that does not
// exist is an error and creates no file (it used to leave an empty database
// and fail with "no such table: kawa_outbox").
func TestOutboxCLIMissingSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	if _, err := runCmd(t, runOutbox, "", "status", "--db=sqlite://"+path); err == nil {
		t.Fatal("kawa outbox status on a missing SQLite file succeeded")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("kawa outbox status created %s (stat: %v)", path, err)
	}
}
