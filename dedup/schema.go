package dedup

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"
)

// offsetKeys selects offset keys (prefixOffset); PruneOffsets repeats it
// verbatim so that both databases match the partial index.
const offsetKeys = `key LIKE 'o:%'`

// schemaSteps returns the DDL statements of each schema version for d, in
// order: step i brings the schema to version i+1. It is the one source for
// both Migrate and DDL. A released step is never edited; a change is a new
// step, so Migrate can bring any older database forward.
func schemaSteps(d Dialect) [][]string {
	blob, withoutRowID := "BYTEA", ""
	if d == SQLite {
		blob, withoutRowID = "BLOB", " WITHOUT ROWID"
	}
	return [][]string{{
		// One row per processed message key. seen_at is Unix microseconds
		// (Prune's clock); topic/partition/offset are the record the key
		// was first seen on, kept for diagnostics.
		`CREATE TABLE IF NOT EXISTS kawa_dedup (
	scope TEXT NOT NULL,
	key TEXT NOT NULL,
	seen_at BIGINT NOT NULL,
	topic TEXT NOT NULL,
	"partition" INTEGER NOT NULL,
	"offset" BIGINT NOT NULL,
	PRIMARY KEY (scope, key)
)` + withoutRowID,
		// Prune walks (scope, seen_at) in small batches.
		`CREATE INDEX IF NOT EXISTS kawa_dedup_seen_at ON kawa_dedup (scope, seen_at)`,
		// Sequence mode: one row per (scope, source, topic, record key)
		// holding the highest applied kawa-seq.
		`CREATE TABLE IF NOT EXISTS kawa_dedup_seq (
	scope TEXT NOT NULL,
	source TEXT NOT NULL,
	topic TEXT NOT NULL,
	key ` + blob + ` NOT NULL,
	seq BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (scope, source, topic, key)
)` + withoutRowID,
	}, {
		// PruneOffsets walks one partition's offset keys; the partial index
		// costs nothing on message-id and user keys.
		`CREATE INDEX IF NOT EXISTS kawa_dedup_offsets ON kawa_dedup (scope, topic, "partition", "offset") WHERE ` + offsetKeys,
	}}
}

// SchemaVersion is the schema version this package writes and expects.
const SchemaVersion = 2

// DDL returns the complete schema for dialect d as one script of
// ';'-terminated statements, for users who run their own migration tool
// instead of Migrate. It does not include Migrate's version table
// (kawa_dedup_schema). The tables are:
//
//   - kawa_dedup(scope, key, seen_at, topic, partition, offset), primary key
//     (scope, key): message-id, user and offset keys. About 130 bytes per key
//     on PostgreSQL for keys of about 25 bytes.
//   - kawa_dedup_seq(scope, source, topic, key, seq, updated_at), primary key
//     (scope, source, topic, key): sequence mode's high-water marks, one row
//     per record key.
//
// On PostgreSQL kawa_dedup is insert-then-delete (Prune), so give it an
// aggressive autovacuum, e.g. ALTER TABLE kawa_dedup SET
// (autovacuum_vacuum_scale_factor = 0.01).
func DDL(d Dialect) string {
	var b strings.Builder
	for _, step := range schemaSteps(d) {
		for _, stmt := range step {
			b.WriteString(stmt)
			b.WriteString(";\n")
		}
	}
	return b.String()
}

// migrateLockID is the PostgreSQL advisory lock key Migrate holds (the
// FNV-1a hash of "kawa_dedup.migrate"); any constant works as long as no
// other schema uses it.
var migrateLockID = lockID("kawa_dedup.migrate")

// Migrate creates or upgrades the dedup tables to SchemaVersion. It is
// idempotent and safe to call from several processes at once: on PostgreSQL
// the DDL runs in one transaction under pg_advisory_xact_lock; on SQLite
// under BEGIN IMMEDIATE (the write lock, whatever the DSN's _txlock). The
// version reached is recorded in kawa_dedup_schema(version, applied_at).
// A database at a newer version than this package knows is an error (an
// older binary must not write a schema it does not understand).
func (s *Store) Migrate(ctx context.Context) error {
	// A current schema needs no lock and no DDL: checking first lets an
	// application user without CREATE on the schema start (a DBA migrated).
	if v, err := s.storedVersion(ctx, s.db); err != nil {
		return fmt.Errorf("dedup: migrate: read version: %w", err)
	} else if v == SchemaVersion {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("dedup: migrate: %w", err)
	}
	defer conn.Close()
	begin, lock := "BEGIN", fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", migrateLockID)
	if s.dialect == SQLite {
		begin, lock = "BEGIN IMMEDIATE", ""
	}
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		return fmt.Errorf("dedup: migrate: begin: %w", err)
	}
	if err := s.migrateLocked(ctx, conn, lock); err != nil {
		// The context may be the reason for the failure; the rollback must
		// still happen or the connection goes back to the pool mid-transaction.
		if _, rbErr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // discard the connection
		}
		return fmt.Errorf("dedup: migrate: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("dedup: migrate: commit: %w", err)
	}
	return nil
}

func (s *Store) migrateLocked(ctx context.Context, conn *sql.Conn, lock string) error {
	if lock != "" {
		if _, err := conn.ExecContext(ctx, lock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
	}
	// Under the lock, create the version table before reading it: after
	// pg_advisory_xact_lock, to_regclass may still answer from a catalog
	// cache that predates the table another caller just committed.
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS kawa_dedup_schema (
	version INTEGER PRIMARY KEY,
	applied_at BIGINT NOT NULL
)`); err != nil {
		return err
	}
	var current int
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM kawa_dedup_schema`).Scan(&current); err != nil {
		return err
	}
	steps := schemaSteps(s.dialect)
	if current > len(steps) {
		return fmt.Errorf("database schema version %d is newer than this package's %d", current, len(steps))
	}
	for v := current + 1; v <= len(steps); v++ {
		for _, stmt := range steps[v-1] {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("version %d: %w", v, err)
			}
		}
		if _, err := conn.ExecContext(ctx,
			`INSERT INTO kawa_dedup_schema (version, applied_at) VALUES (`+s.dialect.ph(1)+`, `+s.dialect.ph(2)+`)`,
			v, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("version %d: %w", v, err)
		}
	}
	return nil
}

// RowQueryer is the part of *sql.DB, *sql.Conn and *sql.Tx that TableExists
// needs.
type RowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// TableExists reports whether the table name (unqualified: the search path's
// first match on PostgreSQL, the main schema on SQLite) exists in d's
// database. It reads the catalog only (to_regclass, sqlite_master), so a
// least-privilege user without CREATE on the schema can call it: Migrate
// uses it to run no DDL when the schema is already current, because even
// CREATE TABLE IF NOT EXISTS needs CREATE on PostgreSQL.
func TableExists(ctx context.Context, q RowQueryer, d Dialect, name string) (bool, error) {
	query := `SELECT to_regclass($1) IS NOT NULL`
	if d == SQLite {
		query = `SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?`
	}
	var ok bool
	if err := q.QueryRowContext(ctx, query, name).Scan(&ok); err != nil {
		return false, fmt.Errorf("table %s exists: %w", name, err)
	}
	return ok, nil
}

// storedVersion returns the highest version recorded in kawa_dedup_schema, 0
// when the table does not exist, reading only (see TableExists).
func (s *Store) storedVersion(ctx context.Context, q RowQueryer) (int, error) {
	ok, err := TableExists(ctx, q, s.dialect, "kawa_dedup_schema")
	if err != nil || !ok {
		return 0, err
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM kawa_dedup_schema`).Scan(&v); err != nil {
		return 0, err
	}
	return v, nil
}
