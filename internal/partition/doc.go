// Package partition is one topic partition: its log, its producer state, its
// high watermark (HW), log start offset, last stable offset (LSO) and the
// fetch waiters that long-polling reads park on.
//
// Ownership and locking: a Partition has one mutex, mu. Append, WriteMarker
// and the producer state are serialised under it (validate producer state ->
// assign offsets -> write -> update producer state). Waiting for durability
// (acks=all) happens outside mu, on the log's group-commit fsync. The HW is an
// atomic updated from the log's sync goroutine (FsyncAlways: only fsynced data
// is below the HW) or right after the append (other policies); every HW or LSO
// advance closes the current wake channel and installs a fresh one, so a
// fetch parked on Wake() wakes on appends, not on timers alone.
//
// Lock order: Partition.mu, then the log's internal locks. The wake lock is a
// leaf and is never held while calling out.
//
// Durability: with FsyncAlways, an acknowledged acks=all append has been
// fsynced (log.WaitDurable). Producer state is rebuilt on Open from the newest
// valid snapshot plus a scan of the log after it, so a restart keeps every
// live producer's sequence window even after retention deleted its batches.
package partition
