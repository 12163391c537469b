// Package cleaner is Kawa's log cleaner: it compacts partitions whose topic has cleanup.policy=compact
// (or compact,delete), keeping the latest record per key, following Kafka's cleaner rules
// (apache/kafka storage/.../log/Cleaner.java, LogCleanerManager, CleanedTransactionMetadata; KIP-98,
// KIP-534; ../shared/design-research.md section 3).
//
// # A pass over one partition
//
//  1. Cleanable range: the non-active segments from the log start whose end is at or below the last stable
//     offset (an open transaction is never cleaned) and whose newest batch is older than min.compaction.lag.ms.
//     The active segment is never cleaned.
//  2. Scheduling: a partition is cleaned when its dirty bytes (from the first dirty offset, which the cleaner
//     remembers per log, to the end of the cleanable range) are at least min.cleanable.dirty.ratio of the
//     cleanable bytes, or its oldest dirty segment is older than max.compaction.lag.ms.
//  3. Transactions: one scan of the log up to the high watermark finds each producer's last data batch and
//     the outcome of every transactional batch (the COMMIT/ABORT marker that follows it for its producer).
//     Data of aborted transactions is removed regardless of key; a batch whose transaction is undecided is
//     left alone. Control batches (markers) are never deduplicated by key. A COMMIT/ABORT marker is kept while
//     any batch of its transaction is in the log (an empty retained one included) and while it is its
//     producer's last batch; once bare it is stamped with a delete horizon (now + delete.retention.ms, KIP-534,
//     as tombstones) and a pass after the horizon removes it (Kafka's CleanedTransactionMetadata and
//     checkBatchRetention). Before such a pass swaps a segment, Target.ForgetMarkers drops the removed ABORT
//     markers' aborted-transaction entries and has the partition write a producer snapshot past them, so no
//     read_committed reader or restart ever needs a removed marker.
//  4. Offset map: the records of committed and non-transactional data batches in the dirty part go into a
//     bounded map (key hash, MD5 as in Kafka, to offset). When it is full the pass maps up to that batch only
//     and the next pass continues from there (several passes for a large dirty part).
//  5. Rewrite: every segment of the cleanable range up to the mapped end is rewritten; a record is kept
//     unless the map holds a later offset for its key. A tombstone (null value) that is kept gets its batch
//     stamped with a delete horizon (KIP-534: now + delete.retention.ms) and is removed by a pass after the
//     horizon. A batch whose records are all removed is kept as an empty batch (header only) when it holds its
//     producer's last sequence (so an idempotent retry after compaction and restart is still recognised);
//     otherwise consecutive removed batches become one empty filler batch covering their offsets, so the
//     segment's offsets stay contiguous for recovery. A batch that loses no record and needs no stamp is copied
//     as it was; a rewritten one is compressed again with its own codec (gzip, snappy, lz4, zstd).
//  6. Swap: log.ReplaceSegment writes the new segment next to the old one and renames it over it (crash: old
//     or new, never a mix).
//
// # Goroutines
//
// A Cleaner owns one goroutine, started by Start and stopped (and waited for) by Stop; CleanNow runs a round
// on the caller's goroutine. Rounds never overlap (one mutex).
package cleaner
