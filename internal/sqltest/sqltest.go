// Package sqltest gives SDK tests a fresh database per test on each backend:
// a SQLite file in t.TempDir() and a new PostgreSQL database on the server
// named by KAWA_TEST_POSTGRES_URL (a superuser URL; .ci/run starts one, see
// scripts/pg-test-cluster.sh). Without that variable PostgreSQL tests skip,
// unless KAWA_REQUIRE_POSTGRES=1, where they fail: CI must not pass by
// skipping them.
package sqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/sqlurl"
)

// EnvPostgresURL names the variable holding the test server's superuser URL.
const EnvPostgresURL = "KAWA_TEST_POSTGRES_URL"

// SQLiteURL returns the sqlurl URL of a new, empty SQLite file in t.TempDir().
func SQLiteURL(t testing.TB) string {
	t.Helper()
	return "sqlite://" + filepath.Join(t.TempDir(), "test.db")
}

// PostgresURL creates an empty database with a unique name on the test
// server, drops it when the test ends, and returns its URL.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvPostgresURL)
	if base == "" {
		if os.Getenv("KAWA_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("KAWA_REQUIRE_POSTGRES=1 but %s is empty (start one with scripts/pg-test-cluster.sh)", EnvPostgresURL)
		}
		t.Skipf("PostgreSQL tests need %s (eval \"$(scripts/pg-test-cluster.sh start /tmp/kawa-pg)\")", EnvPostgresURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, _, err := sqlurl.Open(ctx, base)
	if err != nil {
		t.Fatalf("connect to the test PostgreSQL: %v", err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "kawa_t_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvPostgresURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Open opens rawURL through sqlurl and closes it when the test ends.
func Open(t testing.TB, rawURL string) (*sql.DB, dedup.Dialect) {
	t.Helper()
	db, d, err := sqlurl.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, d
}

// Backend is one database a test runs against.
type Backend struct {
	Name    string // "sqlite" or "postgres"
	URL     string
	DB      *sql.DB
	Dialect dedup.Dialect
}

// Each runs fn as a subtest on a fresh SQLite database and on a fresh
// PostgreSQL database.
func Each(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			b := New(t, name)
			fn(t, b)
		})
	}
}

// New returns a fresh database of the named backend ("sqlite" or "postgres").
func New(t testing.TB, name string) Backend {
	t.Helper()
	var u string
	switch strings.ToLower(name) {
	case "sqlite":
		u = SQLiteURL(t)
	case "postgres":
		u = PostgresURL(t)
	default:
		t.Fatalf("sqltest: unknown backend %q", name)
	}
	db, d := Open(t, u)
	return Backend{Name: name, URL: u, DB: db, Dialect: d}
}

// AppUserURL returns the URL of a least-privilege application user of b's
// database: on PostgreSQL a new LOGIN role with SELECT, INSERT, UPDATE and
// DELETE on the tables that exist now in schema public (and USAGE on its
// sequences) but no CREATE on the schema, dropped when the test ends; call it
// after migrating as the superuser. SQLite has no privileges, so there it
// returns b.URL.
func AppUserURL(t testing.TB, b Backend) string {
	t.Helper()
	if b.Dialect != dedup.Postgres {
		return b.URL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r [6]byte
	rand.Read(r[:])
	role := "kawa_app_" + hex.EncodeToString(r[:])
	for _, s := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + role,
		"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO " + role,
	} {
		if _, err := b.DB.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// Registered after b.DB's cleanups, so it runs before they close it.
	// DROP OWNED revokes the role's privileges in this database and on
	// shared objects, which DROP ROLE requires.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, s := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := b.DB.ExecContext(ctx, s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("user", role)
	u.RawQuery = q.Encode()
	u.User = nil
	return u.String()
}
