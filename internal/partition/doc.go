// Package partition is one topic partition: its log, its producer state, its
// high watermark (HW), log start offset, last stable offset (LSO) and the
// fetch waiters that long-polling reads park on.
//
// Ownership and locking: a Partition has one mutex, mu. Append, WriteMarker
// and the producer state are serialised under it (validate producer state ->
// assign offsets -> write -> update producer state). Waiting for durability
// (acks=all) happens outside mu, on the log's group-commit fsync. The HW and
// the LSO are published together as one atomically replaced {HW, LSO} value,
// under the leaf lock pubMu: by the log's notifier goroutine (OnDurable;
// FsyncAlways: only fsynced data is below the HW) or by the appending
// goroutine right after the append (other policies, and every LSO change
// under mu). The notifier never takes mu, so Close, which holds mu, can wait
// for it; it computes the LSO from the first unstable offset kept under
// pubMu, so Append lowers that offset to a transactional batch's base before
// writing the batch (a HW published between the write and the end of Append
// must not carry the LSO past the open transaction's data). Every change of {HW, LSO} closes the current wake channel and
// installs a fresh one, so a fetch parked on Wake() wakes on appends, not on
// timers alone. A Partition starts no goroutine of its own.
//
// Lock order: Partition.mu, then the log's internal locks. pubMu is a leaf:
// taken under mu or under no lock, never held while calling out.
//
// Errors: storage failures wrap kerr.KafkaStorageError and keep their cause's
// chain (errors.Is(err, log.ErrCorruption) holds).
//
// Durability: with FsyncAlways, an acknowledged acks=all append has been
// fsynced (log.WaitDurable). Producer state is rebuilt on Open from the newest
// valid snapshot plus a scan of the log after it, so a restart keeps every
// live producer's sequence window even after retention deleted its batches.
package partition
