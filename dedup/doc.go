// Package dedup is an idempotent-consumer store over database/sql: it makes a
// Kafka consumer's database side effects happen once per message, even though
// Kafka delivers at least once.
//
// Store.Process records the message's key and runs the handler's SQL in one
// database transaction: begin, insert the key first (INSERT ... ON CONFLICT
// DO NOTHING), skip the handler if the key was there (Duplicate), else run it
// and commit both. A failing or panicking handler rolls back and so releases
// the key; a concurrent copy of the message waits on the key row and then
// skips. Dialects: SQLite (modernc.org/sqlite, opened with _txlock=immediate,
// WAL and a busy timeout, as package sqlurl does) and PostgreSQL 12+ (pgx's
// database/sql driver; pgx pool users pass stdlib.OpenDBFromPool). This
// package imports neither driver.
//
//	store, err := dedup.New(db, dedup.Postgres, "inventory-consumer")
//	err = store.Migrate(ctx)
//	res, err := store.Process(ctx, rec, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE ...")
//		return err
//	})
//	// commit rec's offset when err == nil (Applied, Duplicate, Stale);
//	// retry or park it otherwise (errors, Gap).
//
// # Keys
//
// In order: the kawa-message-id header (stamped by package outbox, or by any
// producer following the header contract in contract.go); a user KeyFunc
// (WithKeyFunc); then the record's topic (its ID with WithTopicIDs, else its
// name), partition and offset. Every key is scoped by the scope given to New
// (the consumer or handler name), so two handlers sharing a database each
// process a message once. Offset keys only catch redelivery of the same
// record: a producer that resends a message writes it at a new offset, which
// is a new key. Key parts longer than MaxKeyLen, empty or not UTF-8 are
// rejected with ErrInvalidKey.
//
// # Sequence mode
//
// With WithSequence, a record carrying kawa-seq and kawa-source is checked
// against one row per (scope, source, topic, record key) holding the highest
// applied sequence s. Incoming n: n == s+1 is Applied (s advances in the same
// transaction as the handler); n == s is Duplicate (the same message again);
// n < s is Stale (an older message, e.g. from a fenced relay); n > s+1 is Gap:
// nothing is applied or recorded and Process returns an error wrapping ErrGap,
// so the consuming loop retries or parks the record rather than committing
// past it. Bootstrap: the first sequence seen for a key is taken as the
// baseline and applied, whatever its value (a consumer starting mid-stream, or
// a topic whose older records expired); a baseline above 1 is counted as
// EventBaseline. Storage is one row per key, with no retention window.
// Records without both headers fall back to the keys above.
//
// # Guarantees
//
// What each failure window does to the handler's committed effects, assuming
// the caller commits a record's offset only after Process returned a nil error
// and the handler does only database work in tx:
//
//	window                                          message-id / KeyFunc key   offset key        sequence mode
//	crash or error inside fn, before commit         neither (key released)     neither           neither
//	crash after commit, before the offset commit    neither (Duplicate)        neither           neither (Duplicate)
//	commit outcome unknown (connection lost)        neither                    neither           neither
//	two copies processed concurrently               neither (one Applied)      neither           neither
//	database unreachable mid-run                    neither (errors, no key)   neither           neither
//	producer resends the message to a new offset    neither                    DUPLICATE         neither (Duplicate)
//	key pruned before its last redelivery           DUPLICATE                  DUPLICATE         n/a (not pruned)
//	consumer seeks back below PruneOffsets' offset  n/a                        DUPLICATE         n/a
//	topic recreated under its name, no topic IDs    neither                    LOSS (old keys)   n/a
//	first record of a key seen has kawa-seq > 1     n/a                        n/a               LOSS of earlier seqs arriving later (Stale; EventBaseline)
//	offset committed past a Gap by the caller       n/a                        n/a               LOSS (the caller's bug)
//	scope renamed                                   DUPLICATE                  DUPLICATE         DUPLICATE (new baseline)
//	fn calls the network or writes files            those effects DUPLICATE on any retry or redelivery
//
// Transient failures (PostgreSQL 40001/40P01, SQLITE_BUSY/LOCKED) rerun the
// whole transaction, fn included, a bounded number of times (WithRetry).
//
// # Retention
//
// Store.Prune deletes keys older than a window, in small batches outside the
// handlers' transactions. A key costs about 130 bytes on PostgreSQL, so a
// 7-day window at 1,000 msg/s is about 600M keys (about 80 GB); prefer
// sequence mode, whose storage is one row per record key, at such rates.
// Store.PruneOffsets deletes a partition's offset keys below the group's
// committed offset, which is safe as long as the consumer never moves back.
// Store.SetSequence moves a sequence-mode key past a gap that will never
// fill (an outbox row dropped as dead).
//
// # Optimistic concurrency
//
// Versioned wraps UPDATE ... SET ..., version = version + 1 WHERE id = ? AND
// version = ? with a typed result (VersionApplied, VersionAlreadyApplied,
// VersionConflict, VersionNotFound) instead of a rows-affected count.
//
// # Tests and metrics
//
// WithHooks receives a counter event per outcome (Counters counts them in
// memory). WithCrashPoint calls a function at the named points
// PointKeyRecorded, PointBeforeCommit and PointAfterCommit, so a test binary
// can kill itself exactly there.
package dedup
