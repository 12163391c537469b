package sqlurl_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/sqlurl"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		driver  string
		dialect dedup.Dialect
		dsnHas  string
		wantErr string
	}{
		{in: "sqlite:///tmp/x.db", driver: "sqlite", dialect: dedup.SQLite, dsnHas: "file:/tmp/x.db?"},
		{in: "sqlite:data/x.db", driver: "sqlite", dialect: dedup.SQLite, dsnHas: "file:data/x.db?"},
		{in: "postgres://u:p@127.0.0.1:5432/db?sslmode=disable", driver: "pgx", dialect: dedup.Postgres, dsnHas: "postgres://u:p@"},
		{in: "postgresql:///db?host=/tmp/s", driver: "pgx", dialect: dedup.Postgres},
		{in: "sqlite://x.db", wantErr: "absolute"},
		{in: "sqlite:///tmp/x.db?mode=ro", wantErr: "no query"},
		{in: "sqlite:///tmp/", wantErr: "names no database file"},
		{in: "mysql://x", wantErr: "unsupported scheme"},
		{in: "/tmp/x.db", wantErr: "no scheme"},
	}
	for _, c := range cases {
		driver, dsn, d, err := sqlurl.Parse(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Parse(%q) error = %v, want it to mention %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || driver != c.driver || d != c.dialect || !strings.Contains(dsn, c.dsnHas) {
			t.Errorf("Parse(%q) = %q, %q, %v, %v", c.in, driver, dsn, d, err)
		}
	}
}

func TestRedact(t *testing.T) {
	got := sqlurl.Redact("postgres://kawa:secret@db:5432/x")
	if strings.Contains(got, "secret") || !strings.Contains(got, "kawa:xxxxx@") {
		t.Fatalf("Redact = %q", got)
	}
}

// TestOpenSQLiteSettings checks that the pragmas the SDK relies on are in
// force on a connection from the pool.
func TestOpenSQLiteSettings(t *testing.T) {
	ctx := context.Background()
	db, d, err := sqlurl.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d != dedup.SQLite {
		t.Fatalf("dialect %v", d)
	}
	var mode string
	var sync, timeout int
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 || timeout != 10000 {
		t.Fatalf("journal_mode=%s synchronous=%d busy_timeout=%d, want wal 2 10000", mode, sync, timeout)
	}
}

func TestOpenUnreachablePostgres(t *testing.T) {
	_, _, err := sqlurl.Open(context.Background(), "postgres://kawa:pw@/nodb?host="+t.TempDir()+"&connect_timeout=2")
	if err == nil {
		t.Fatal("Open of a PostgreSQL with no server succeeded")
	}
	if strings.Contains(err.Error(), ":pw@") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// TestOpenSQLitePathWithURIChars checks that '#' and '%' in a directory name
// reach the file system as they are (SQLite's URI form would cut the path at
// '#', so two subtests "x" and "x#01" shared one stray file).
func TestOpenSQLitePathWithURIChars(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a#01%41b")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.db")
	db, _, err := sqlurl.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not at %s: %v", path, err)
	}
}

// TestOpenExistingSQLite: OpenExisting of a missing SQLite file fails and
// leaves no file behind (`kawa outbox status` with a mistyped path created
// an empty database and then said "no such table"); of a file Open created,
// it reads and writes with the same settings.
func TestOpenExistingSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "missing.db")
	if db, _, err := sqlurl.OpenExisting(ctx, "sqlite://"+path); err == nil {
		db.Close()
		t.Fatal("OpenExisting of a missing SQLite file succeeded")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("OpenExisting left %s behind (stat: %v)", path, err)
	}

	created, _, err := sqlurl.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := created.ExecContext(ctx, "CREATE TABLE t (v INTEGER)"); err != nil {
		t.Fatal(err)
	}
	created.Close()
	db, d, err := sqlurl.OpenExisting(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d != dedup.SQLite {
		t.Fatalf("dialect %v", d)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	var v int
	var mode string
	if err := db.QueryRowContext(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 7 {
		t.Fatalf("read back %d, %v; want 7", v, err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v; want wal", mode, err)
	}
}
