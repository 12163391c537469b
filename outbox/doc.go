// Package outbox is a transactional outbox for Kafka: the application
// enqueues records inside its own database transaction, and a relay
// publishes them to Kafka after the transaction commits, per key in commit
// order, deleting each row only after the broker acknowledged it.
//
// # Writing
//
// Enqueue(ctx, tx, rec) takes the caller's open transaction explicitly (no
// ambient transaction, so it cannot be bypassed by accident). It stamps the
// headers of the SDK's contract (see package dedup): kawa-message-id (a
// UUIDv7), kawa-seq (the key's next sequence number, from a per-(topic, key)
// counter row upserted in the same transaction, so sequence order is commit
// order per key and a rolled-back transaction gives its number back),
// kawa-source and, when the context carries one, traceparent.
//
// # Relaying
//
// Rows are hashed by (topic, key) into Config.Shards shards (default 16).
// A relay leases shards through kawa_outbox_leases (owner, epoch,
// expires_at by the database clock; conditional updates, renewal about
// every LeaseTTL/3 with jitter), taking at most its fair share when several
// relays run. Per shard it selects up to BatchSize rows in id order (which
// is kawa-seq order per key), produces them keyed with acks=all, waits for
// every ack and deletes them in one database transaction that first checks
// it still holds the lease epoch. The relay keeps no cursor: it publishes
// whatever rows are present, so a row whose transaction commits late is
// published late, never skipped.
//
// Polling always runs, adaptively (PollMin after work, doubling to PollMax
// when idle). Relay.Notify (or Relay.Commit) wakes a relay in the same
// process at once; package outbox/pgnotify adds PostgreSQL LISTEN/NOTIFY
// for relays in other processes.
//
// A record that fails to publish is charged an attempt; later rows of its
// key wait, other keys keep flowing. After a failed batch the shard
// publishes one record at a time until a batch goes through clean, so a
// failure is charged to the row that caused it. After MaxAttempts (or at
// once for a row whose stored columns cannot be read) the row moves to
// kawa_outbox_dead with its error and attempt count, and its key is parked:
// its later rows wait until the dead row is retried (RetryDead, published
// with its original kawa-seq before them) or dropped (DropDead, leaving a
// kawa-seq gap consumers can see). `kawa outbox dead list|retry|drop` does
// the same from the shell.
//
// Per-key order in the topic needs every relay to map a key to the same
// partition: the relay uses Kafka's default (murmur2) key hash, so the
// topic's partition count must not change while keys are in flight.
//
// # Modes and what a crash costs
//
// Idempotent mode uses one idempotent producer for the relay's shards.
// Transactional mode gives each shard its own producer with
// transactional.id kawa-outbox-<Source>-<shard>, so a new lease holder's
// InitProducerID fences a paused old holder at the broker and aborts its
// open transaction. Each batch is one Kafka transaction that also writes a
// progress record (key <Source>/<shard>, value the batch's row ids) to
// partition <shard> of the progress topic; a new holder reads the last
// committed progress record with read_committed and deletes the rows it
// names before publishing. Kawa refuses cleanup.policy=compact today, so
// the progress topic is a normal topic read by its tail; it should become
// compacted once the broker supports compaction.
//
// Crash points (the names are the Point constants, used by the tests):
//
//	window                                              Idempotent                   Transactional (read_committed)
//	app: after Enqueue, before its tx commits (A1)      neither: the row rolls back  neither
//	relay: after select, before produce (R1)            neither                      neither
//	relay: produced, acks not awaited (R2)              duplicates (<= B per shard)  neither: the open txn is aborted
//	relay: acked / committed, rows not deleted (R3)     duplicates (<= B per shard)  neither: progress record deletes them
//	relay: inside EndTxn, outcome unknown (R4)          n/a                          neither: the progress record decides
//	relay paused past its lease, then resumes (R5)      duplicates (<= B per shard)  neither: the old producer is fenced
//	broker rejects a record for good (poison row)       neither; key parked          neither; key parked
//	dead row dropped by an operator                     that record is lost (gap)    that record is lost (gap)
//
// B is BatchSize; "per shard" means per shard the crashed relay held, since
// its shards publish in parallel and each may be inside the window.
//
// No window loses a committed row: a row is deleted only after the broker
// acknowledged it, or committed it in the transaction named by the progress
// record. One idempotent-mode corner: when the broker rejects one record of
// a key for good while a later record of the same key in the same batch is
// accepted, the later one is in the topic ahead of it and is published
// again after it (a duplicate, out of order once); consumers checking
// kawa-seq (dedup's sequence mode) see it as Stale. Transactional mode
// aborts such a batch instead. Read transactional-mode topics with
// read_committed; read_uncommitted consumers also see aborted batches.
//
// Key size depends on the backend. On PostgreSQL the (topic, key) counter
// row is a btree index entry, so Enqueue fails with the database's error
// ("index row size ... exceeds btree version 4 maximum 2704", or "index row
// requires ... bytes, maximum size is 8191" past that) for keys that do not
// compress to about 2.7 KB; random keys of 2800 bytes already fail. SQLite
// accepts any key at Enqueue, so a record the broker refuses for its size
// (MESSAGE_TOO_LARGE) is found only at publish, where it dead-letters and
// parks its key.
//
// On SQLite every writer shares one write lock, so a relay process that is
// paused (SIGSTOP, a VM freeze) inside a database transaction stalls every
// writer, the application included, until it resumes; PostgreSQL has no
// such coupling.
//
// # Operations
//
// Status returns the gauges that matter (rows unsent, oldest unsent age,
// dead rows, parked keys and rows, leases; a released lease has no owner and
// a zero ExpiresAt, which `kawa outbox status` prints as "-"); Hooks.Status gets them every
// lease round and Hooks.Published / Hooks.Dead / Hooks.Error count events.
// Sent rows are deleted, so the table stays small; on PostgreSQL keep
// autovacuum on for it. Relays record a heartbeat in kawa_outbox_relays and
// each takes about shards / live relays shards (RelayConfig.MaxShards caps
// it); a relay giving a shard back, or shutting down, finishes the batch in
// flight first. The relay's Run, pgnotify's Listen and every shard
// goroutine stop when the context given to Run (or Listen) is cancelled.
package outbox
