// Package sqlurl opens the SDK's databases from a URL, so that the examples,
// `kawa outbox` and users' services agree on one spelling and one set of
// connection settings per dialect.
//
// Accepted URLs:
//
//	sqlite:///abs/path/file.db     an absolute path
//	sqlite:relative/path/file.db   a path relative to the working directory
//	postgres://user@host:5432/db?sslmode=disable   (or postgresql://), any URL pgx accepts,
//	postgres:///db?host=/socket/dir&user=postgres  including a Unix-socket directory
//
// SQLite is opened with modernc.org/sqlite (pure Go) in WAL mode with
// synchronous=FULL (a committed transaction survives power loss, which the
// exactly-once promise needs), a 10 s busy timeout and _txlock=immediate:
// every transaction takes the write lock at BEGIN, because a deferred
// transaction that reads and then writes fails at once with SQLITE_BUSY and
// skips the busy timeout. PostgreSQL goes through pgx's database/sql driver.
package sqlurl

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"

	"github.com/kawa-broker/kawa/dedup"
)

// sqlitePragmas are applied to every SQLite connection the pool opens.
const sqlitePragmas = "_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)" +
	"&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_txlock=immediate"

// Open opens the database that rawURL names, checks that it answers, and
// reports its dialect. The caller closes the *sql.DB. Errors name the URL's
// scheme problem or wrap the driver's error; the password, if any, is never
// part of an error.
func Open(ctx context.Context, rawURL string) (*sql.DB, dedup.Dialect, error) {
	return open(ctx, rawURL, false)
}

// OpenExisting is Open for tools that inspect a database someone else
// created (`kawa outbox`): a SQLite file that does not exist is an error
// (SQLite's mode=rw) instead of a new empty database left behind. A
// PostgreSQL database is never created by connecting, so there it is Open.
func OpenExisting(ctx context.Context, rawURL string) (*sql.DB, dedup.Dialect, error) {
	return open(ctx, rawURL, true)
}

func open(ctx context.Context, rawURL string, mustExist bool) (*sql.DB, dedup.Dialect, error) {
	driver, dsn, dialect, err := Parse(rawURL)
	if err != nil {
		return nil, 0, err
	}
	if mustExist && dialect == dedup.SQLite {
		dsn += "&mode=rw"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlurl: open %s database: %w", dialect, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, 0, fmt.Errorf("sqlurl: connect to %s database %s: %w", dialect, Redact(rawURL), err)
	}
	return db, dialect, nil
}

// Parse maps rawURL to a database/sql driver name and data source name
// without connecting.
func Parse(rawURL string) (driver, dsn string, dialect dedup.Dialect, err error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok {
		return "", "", 0, fmt.Errorf("sqlurl: %q has no scheme: want sqlite:///path or postgres://host/db", Redact(rawURL))
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3":
		path := rest
		if strings.HasPrefix(path, "//") {
			// sqlite:///abs → "/abs"; sqlite://rel is not a host form we accept.
			path = strings.TrimPrefix(path, "//")
			if !strings.HasPrefix(path, "/") {
				return "", "", 0, fmt.Errorf("sqlurl: %q: write sqlite:///absolute/path or sqlite:relative/path", rawURL)
			}
		}
		if i := strings.IndexByte(path, '?'); i >= 0 {
			return "", "", 0, fmt.Errorf("sqlurl: %q: SQLite URLs take no query; Kawa sets the pragmas itself", rawURL)
		}
		if path == "" || strings.HasSuffix(path, "/") {
			return "", "", 0, fmt.Errorf("sqlurl: %q names no database file", rawURL)
		}
		// The driver hands "file:..." to SQLite as a URI, where '#' starts a
		// fragment and '%' an escape: a path holding them (t.TempDir() names
		// subtests "x#01") would silently open another file.
		path = strings.NewReplacer("%", "%25", "#", "%23").Replace(path)
		return "sqlite", "file:" + path + "?" + sqlitePragmas, dedup.SQLite, nil
	case "postgres", "postgresql":
		if _, err := url.Parse(rawURL); err != nil {
			return "", "", 0, fmt.Errorf("sqlurl: bad PostgreSQL URL %s: %v", Redact(rawURL), err)
		}
		return "pgx", rawURL, dedup.Postgres, nil
	}
	return "", "", 0, fmt.Errorf("sqlurl: unsupported scheme %q: want sqlite or postgres", scheme)
}

// Redact returns rawURL with any password replaced by "xxxxx", for logs and
// errors.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL
	}
	if _, has := u.User.Password(); !has {
		return rawURL
	}
	u.User = url.UserPassword(u.User.Username(), "xxxxx")
	return u.String()
}
