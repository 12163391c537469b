// Package log is Kawa's durable partition log: an append-only sequence of Kafka record batches (v2) split into
// segment files, with sparse indexes, crash recovery, retention and group-commit fsync. It knows batches, not
// records, producers or transactions; it reads only the batch header fields it needs (base offset, length,
// magic, CRC-32C, lastOffsetDelta, maxTimestamp), through internal/batch (ParseHeader, Header.Check, CheckCRC:
// the module's one batch parser, fuzzed on the recovery path by FuzzRecover), and never decodes records. Every
// file and directory it writes goes through its vfs.FS, with vfs's durable-write helpers for the small files.
//
// # Terms
//
// log start offset (logStart): the lowest readable offset (Start). log end offset: the next offset to assign
// (End). high watermark (hw) and last stable offset (lso) belong to the caller, who passes one of them to Read as
// upTo. A segment is named by its base offset, the offset of its first batch.
//
// # On disk
//
// A partition directory (Kafka's <topic>-<partition>) holds, per segment, <base>.log (batches exactly as
// appended), <base>.index (relative offset uint32 + position uint32, one entry per IndexIntervalBytes of log) and
// <base>.timeindex (max timestamp int64 + relative offset uint32), with <base> as 20 digits; plus
// log-start-offset (versioned, CRC-32C, replaced by write-temp/fsync/rename/fsync-dir). Other files in the
// directory (the partition's .snapshot, .txnindex) are left alone, except by Delete.
//
// The .log files are the only source of truth. Indexes live in memory for every segment (8 bytes per
// IndexIntervalBytes of log, plus up to 12 for the time index) and are written to their files at roll, Sync and
// Close; Open rebuilds them while it verifies the log and rewrites any file that differs.
//
// # Usage
//
//	l, err := log.Open(dir, log.Options{OnDurable: advanceHW})
//	base, err := l.Append(batch)           // under the partition's lock
//	err = l.WaitDurable(ctx, base+n)       // outside it: acks=all waits for the group commit
//	res, err := l.Read(offset, maxBytes, hw)
//	_, err = l.EnforceRetention(time.Now()) // from a periodic task
//
// # Goroutines and locks
//
// The caller serialises Append (the partition lock); Read, OffsetForTime, MaxTimestamp, End, Start, DurableEnd,
// WaitDurable, Sync, SetConfig, SetStart and EnforceRetention may be called from any goroutine. Each Log owns a
// sync goroutine, which runs the group-commit fsync, and (with OnDurable set) a notifier goroutine, which calls
// OnDurable. Open starts both; Close stops both and waits for both, so no OnDurable call runs after Close
// returns; OnDurable therefore must not take a lock the caller of Close holds (the partition publishes its high
// watermark under a leaf lock for this reason).
//
// Lock order: adminMu (SetStart, EnforceRetention, Close, Delete) → wmu (the writer: Append and its roll, Sync,
// Close) → mu (RWMutex over the segment list and segment sizes/indexes; Read holds it only to snapshot) →
// commitState.mu (durable offset, sticky error, waiter channel). File I/O other than recovery runs without mu
// held, and OnDurable is called with no lock held. Append writes a batch before publishing its size under mu,
// so a reader never sees bytes that are not fully written.
//
// # Durability promise
//
// With FsyncAlways (the default), WaitDurable(ctx, end) returns nil only after an fsync covered every offset
// below end, and DurableEnd/OnDurable never run ahead of fsynced data, so a high watermark built on them only
// exposes records a power loss cannot take back. Concurrent waiters share one fsync. A failed write or fsync is
// sticky: it is returned to every later Append and to every waiter not yet covered, and is never retried into an
// ack. FsyncInterval and FsyncNever are explicit opt-outs: data counts as durable once appended. Every policy
// fsyncs a segment when it rolls (before the next segment's file exists), on Sync and on Close, so after any
// crash only the last segment can hold a torn tail.
//
// Recovery (Open) checks every batch of every segment: length chain, magic, CRC-32C and offsets continuing
// within and across segments. A bad batch in the last segment is a torn tail and is truncated, with a warning
// naming the offset and byte position. Anywhere else Open returns a *CorruptionError (ErrCorruption) naming the
// file and position: corruption in the middle of the log is reported, never silently dropped or renumbered.
//
// # Raft logs
//
// With Options.Raft the log is also one raft group's log (internal/replica): every batch is a raft entry, its
// partitionLeaderEpoch the raft term; internal batches (batch.NewInternal: raft's own entries) take no Kafka
// offset and Read never serves them; each segment has a <base>.raft file with its first raft index; a sparse
// raft-index → position index and a leader-epoch cache (Epochs: term, first raft index, first offset) are
// rebuilt by recovery. RaftTerm, RaftOffset, ReadRaft, TruncateToIndex and SyncData serve raft.Storage.
// TruncateTo (both kinds of log) removes an uncommitted suffix. See raft.go. Without the option nothing of
// this is on disk and Append, Read and recovery check batches as before.
//
// # File descriptors
//
// Segment files are opened through a FileCache (Options.Files, one per broker) that closes idle descriptors,
// least recently used first, and reopens them on use, so descriptors do not grow with partitions or segments.
// Failing to open a file for lack of descriptors fails only the operation that needed it; it is not sticky.
//
// # Deleted segments
//
// Retention unlinks a segment's files at once but keeps them open for FileDeleteDelay, so a reader holding a
// Chunk of it can finish; a reader slower than that, or reading after Close, gets an error and should Read again.
// So does a reader of a deleted segment whose idle descriptor the FileCache closed: an unlinked file cannot be
// reopened.
package log
