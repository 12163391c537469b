package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/kawa-broker/kawa/dedup"
)

// SchemaVersion is the schema version Migrate brings a database to. It is
// recorded in the table kawa_outbox_schema.
const SchemaVersion = 1

// The outbox's tables. Rows are deleted once the broker has acknowledged
// them, so kawa_outbox holds only unsent rows (keep autovacuum on and a
// fillfactor below 100 on PostgreSQL for busy outboxes).
//
//	kawa_outbox         unsent rows: id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at (unix ms), attempts, last_error
//	kawa_outbox_keys    per-(topic, msg_key) counter: last_seq, the last kawa-seq handed out
//	kawa_outbox_leases  per shard: owner, epoch, expires_at (unix ms, database clock)
//	kawa_outbox_relays  per live relay: owner, expires_at (heartbeat; the fair share of shards is shards / live relays)
//	kawa_outbox_dead    poison rows: the kawa_outbox columns plus error and died_at (unix ms); a key with a dead row is parked
//	kawa_outbox_schema  version
var ddlTemplate = []string{
	// {serial}: a row id is never handed out twice (SQLite's
	// AUTOINCREMENT), which the transactional relay's progress records
	// rely on.
	`CREATE TABLE IF NOT EXISTS kawa_outbox (
	id {serial},
	shard INTEGER NOT NULL,
	topic TEXT NOT NULL,
	msg_key {blob} NOT NULL,
	value {blob},
	headers {blob} NOT NULL,
	part INTEGER,
	seq BIGINT NOT NULL,
	message_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	last_error TEXT
)`,
	`CREATE INDEX IF NOT EXISTS kawa_outbox_shard_id ON kawa_outbox (shard, id)`,
	`CREATE TABLE IF NOT EXISTS kawa_outbox_keys (
	topic TEXT NOT NULL,
	msg_key {blob} NOT NULL,
	last_seq BIGINT NOT NULL,
	PRIMARY KEY (topic, msg_key)
)`,
	`CREATE TABLE IF NOT EXISTS kawa_outbox_leases (
	shard INTEGER PRIMARY KEY,
	owner TEXT NOT NULL,
	epoch BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
)`,
	`CREATE TABLE IF NOT EXISTS kawa_outbox_relays (
	owner TEXT PRIMARY KEY,
	expires_at BIGINT NOT NULL
)`,
	`CREATE TABLE IF NOT EXISTS kawa_outbox_dead (
	id BIGINT PRIMARY KEY,
	shard INTEGER NOT NULL,
	topic TEXT NOT NULL,
	msg_key {blob} NOT NULL,
	value {blob},
	headers {blob} NOT NULL,
	part INTEGER,
	seq BIGINT NOT NULL,
	message_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	attempts INTEGER NOT NULL,
	error TEXT NOT NULL,
	died_at BIGINT NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS kawa_outbox_dead_key ON kawa_outbox_dead (topic, msg_key)`,
}

// ddl is ddlTemplate in each dialect's types. SQLite's BIGINT has INTEGER
// affinity (64-bit), so only the id and byte columns differ.
var ddl = map[dedup.Dialect][]string{
	dedup.SQLite:   expand(strings.NewReplacer("{serial}", "INTEGER PRIMARY KEY AUTOINCREMENT", "{blob}", "BLOB")),
	dedup.Postgres: expand(strings.NewReplacer("{serial}", "BIGSERIAL PRIMARY KEY", "{blob}", "BYTEA")),
}

func expand(r *strings.Replacer) []string {
	out := make([]string, len(ddlTemplate))
	for i, s := range ddlTemplate {
		out[i] = r.Replace(s)
	}
	return out
}

// DDL returns the statements that create schema version SchemaVersion for
// dialect, for users who run their own migration tool (they must also keep
// kawa_outbox_schema themselves, or never call Migrate). It returns nil for
// an unknown dialect.
func DDL(d dedup.Dialect) []string {
	return append([]string(nil), ddl[d]...)
}

// Migrate creates or upgrades the outbox schema in db to SchemaVersion. It
// runs in one transaction under a lock so that concurrent callers (several
// service instances starting at once) serialise: pg_advisory_xact_lock on
// PostgreSQL, the write lock of a BEGIN IMMEDIATE transaction on SQLite
// (open SQLite through sqlurl, or with _txlock=immediate). It returns an
// error if the database holds a newer schema than this package knows.
func Migrate(ctx context.Context, db *sql.DB, d dedup.Dialect) error {
	stmts, ok := ddl[d]
	if !ok {
		return fmt.Errorf("outbox: migrate: unknown dialect %v", d)
	}
	// A current schema needs no lock and no DDL: checking first lets an
	// application user without CREATE on the schema start (a DBA migrated).
	if have, err := storedVersion(ctx, db, d); err != nil {
		return fmt.Errorf("outbox: migrate: read version: %w", err)
	} else if have == SchemaVersion {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: migrate: begin: %w", err)
	}
	defer tx.Rollback()
	if d == dedup.Postgres {
		// The key is an arbitrary constant naming this package's lock.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7461697701)`); err != nil {
			return fmt.Errorf("outbox: migrate: lock: %w", err)
		}
	}
	// Under the lock, create the version table before reading it: after
	// pg_advisory_xact_lock, to_regclass may still answer from a catalog
	// cache that predates the table another caller just committed.
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS kawa_outbox_schema (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("outbox: migrate: version table: %w", err)
	}
	var have int
	err = tx.QueryRowContext(ctx, `SELECT version FROM kawa_outbox_schema`).Scan(&have)
	switch {
	case err == sql.ErrNoRows:
		have = 0
	case err != nil:
		return fmt.Errorf("outbox: migrate: read version: %w", err)
	}
	if have > SchemaVersion {
		return fmt.Errorf("outbox: migrate: database has schema version %d, this package knows up to %d", have, SchemaVersion)
	}
	if have == SchemaVersion {
		return tx.Commit() // another caller migrated while we waited for the lock
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("outbox: migrate: %s: %w", firstLine(s), err)
		}
	}
	if have == 0 {
		_, err = tx.ExecContext(ctx, `INSERT INTO kawa_outbox_schema (version) VALUES (`+strconv.Itoa(SchemaVersion)+`)`)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE kawa_outbox_schema SET version = `+strconv.Itoa(SchemaVersion))
	}
	if err != nil {
		return fmt.Errorf("outbox: migrate: write version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: migrate: commit: %w", err)
	}
	return nil
}

// storedVersion returns the version recorded in kawa_outbox_schema, 0 when
// the table or its row does not exist, reading only (see dedup.TableExists).
func storedVersion(ctx context.Context, q dedup.RowQueryer, d dedup.Dialect) (int, error) {
	ok, err := dedup.TableExists(ctx, q, d, "kawa_outbox_schema")
	if err != nil || !ok {
		return 0, err
	}
	var have int
	err = q.QueryRowContext(ctx, `SELECT version FROM kawa_outbox_schema`).Scan(&have)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return have, err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// rebind turns a statement written with ? placeholders into the dialect's
// form ($1, $2, ... on PostgreSQL).
func rebind(d dedup.Dialect, q string) string {
	if d != dedup.Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// nowMS is the dialect's expression for the database clock in unix
// milliseconds. Leases use the database clock so that relays on different
// hosts agree on expiry without synchronised clocks.
func nowMS(d dedup.Dialect) string {
	if d == dedup.Postgres {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST(unixepoch('subsec') * 1000 AS INTEGER)`
}

// placeholders returns "?, ?, ..., ?" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
