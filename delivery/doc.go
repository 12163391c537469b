// Package delivery runs Kafka consumer-group processing loops with one
// stated delivery semantic each, over a franz-go client it builds and
// configures itself: NewAtMostOnce, NewAtLeastOnce and NewExactlyOnce. Each
// constructor refuses kgo options that contradict its semantic
// (ErrContradictingOption); each Consumer's Run blocks until its ctx is
// cancelled (a clean stop: finished work is committed, the group is left) or
// a fatal condition, which Run returns.
//
// # Guarantees
//
// "Crash" means the consumer process dies at that point (SIGKILL, power
// loss); the broker keeps what it acknowledged. The named points are the
// Crash* constants, which the tests kill the process at.
//
//	semantic       crash window                                   loses                  duplicates
//	-------------  ---------------------------------------------  ---------------------  -------------------------------
//	at-most-once   after the poll's commit, before/inside the     the rest of that one   never
//	               handlers (CrashAfterCommitBeforeHandler)       batch (<= MaxPollRecords
//	                                                              per partition)
//	at-most-once   before the commit                              nothing                nothing (batch not processed)
//	at-least-once  after a handler, before the commit that        never                  exactly the finished records
//	               covers it (CrashAfterHandlerBeforeCommit)                             above the last committed
//	                                                                                     watermark (handled again)
//	at-least-once  inside a handler or a retry backoff            never                  that record's side effects, if
//	                                                                                     the handler made any
//	at-least-once  after a dead-letter/park write, before the     never                  the dead-letter/park record
//	               commit                                                                (written again on redelivery)
//	at-least-once  rebalance (revoke)                             never                  records in flight at the revoke
//	                                                                                     (finished ones are committed)
//	exactly-once   anywhere, incl. after producing outputs and    never                  never, in Kafka: read_committed
//	               before End (CrashAfterProduceBeforeEnd),                              readers see each input's outputs
//	               a zombie resumed after its partitions moved                           once; handler DB side effects
//	                                                                                     are repeated (use dedup)
//
// Exactly-once here means exactly-once inside Kafka only: the outputs and
// the input offsets commit in one transaction (KIP-98, KIP-447 fencing by
// group generation). A handler's writes to a database, an email, an HTTP
// call are side effects that an aborted batch repeats; make them idempotent
// with the dedup package (dedup.Process inside an at-least-once handler is
// the usual way to get effectively-once database effects).
//
// # At-least-once in detail
//
// The committed offset of a partition is the lowest offset not yet finished
// (one past the last dispatched record when none is unfinished): it never
// passes a record still in its handler, its retries, or its dead-letter
// write, also with KeyConcurrency > 1. A record is finished when its handler
// returned nil, or when its dead-letter (or park) write was acknowledged
// (acks=all, idempotent producer). A failing dead-letter write stops the loop
// with the error and the record's offset is never committed. A handler panic
// is recovered, reported (Hooks.OnPanic, with the stack) and counts as a
// failed attempt. Retries wait with full-jitter exponential backoff, and the
// total time per record stays below the group's rebalance timeout, so a
// poison record cannot get the member kicked out while it is retried.
//
// On revoke the loop cancels the revoked partitions' handlers, commits what
// finished, and drops the rest; when partitions are lost (session expired)
// nothing is committed. Results of work from a partition the member no
// longer owns never reach a commit: a new assignment starts a new state.
//
// Key parking (ParkOptions) is a sequenced dead-letter queue: after key K is
// dead-lettered, later records of K in that partition wait in a park topic,
// until ReleaseKey; see ParkOptions for how it is persisted.
//
// # Hooks and crash points
//
// Hooks receives metric events (delivery/prommetrics adapts it to
// Prometheus). Config.CrashPoint is a test-only callback called at each
// named point; it is nil, and costs nothing, in production.
package delivery
