package dedup

// The record headers that the outbox relay stamps and Process reads. They are
// the SDK's wire contract with producers written in any language: a producer
// that sets them takes part in deduplication and sequence checks.
//
// | header            | value                                                        |
// |-------------------|--------------------------------------------------------------|
// | kawa-message-id   | the message's unique id, a UUIDv7 in its 36-character text form |
// | kawa-seq          | per-key sequence number in decimal, 1 for a key's first message |
// | kawa-source       | identity of the outbox that assigned kawa-seq (scopes the sequence) |
// | traceparent       | W3C trace context copied from the enqueuing context, when present |
const (
	HeaderMessageID   = "kawa-message-id"
	HeaderSequence    = "kawa-seq"
	HeaderSource      = "kawa-source"
	HeaderTraceParent = "traceparent"
)

// Dialect names the SQL dialect of a *sql.DB. The caller picks and registers
// the driver (modernc.org/sqlite as "sqlite", pgx's stdlib as "pgx").
type Dialect int

const (
	// SQLite is modernc.org/sqlite (or any SQLite 3.35+ driver). Open it with
	// _txlock=immediate so that a transaction that reads then writes takes
	// the write lock up front instead of failing with SQLITE_BUSY.
	SQLite Dialect = iota + 1
	// Postgres is PostgreSQL 12+ through database/sql (pgx's stdlib).
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "unknown"
}
