// Package producer holds the broker side of the idempotent and transactional
// producer (KIP-98, KIP-360, KIP-890): per-partition producer state, the pure
// checks a produce batch goes through before it is appended, the snapshot
// format of that state, and the allocator of cluster-unique producer IDs.
//
// # Terms
//
// A producer is identified by its producer ID (PID) and fenced by its producer
// epoch. Each batch carries a base sequence (FirstSeq) and covers NumRecords
// sequences, so its last sequence is FirstSeq+NumRecords-1, wrapping past
// MaxInt32 to 0 (LastSeq). endOffset is Kafka's mapEndOffset: the log offset
// up to which this state has seen the log (exclusive); it is 0 only while the
// partition has never held a record.
//
// # Usage
//
// The partition owns one State and calls it under its own lock:
//
//	v := st.Check(info)               // pure: no mutation
//	switch {
//	case v.Err != nil:                // answer v.Err, append nothing
//	case v.Duplicate != nil:          // answer success with v.Duplicate.FirstOffset
//	default:                          // append, then:
//		st.Update(info, first, last, appendTime, now)
//	}
//
// Control batches (COMMIT/ABORT markers) never go through Check/Update: the
// partition validates them with CheckMarker and records them with ApplyMarker
// (or Marker), which closes the producer's open transaction and returns its
// first offset so the partition can maintain the LSO and the .txnindex.
// OngoingTxnFirstOffsets gives the first offset of every open transaction; the
// minimum is the first unstable offset.
//
// Every appended batch, producer ID -1 included, should go through Update so
// endOffset follows the log (Kafka's KAFKA-15591 rule depends on it); after
// recovery or a log-start move the partition calls AdvanceEndOffset.
//
// # Ownership and concurrency
//
// State is not safe for concurrent use: the partition serialises every call
// under its mutex. It performs no I/O and starts no goroutines; Encode and
// Decode work on byte slices, and the caller writes the .snapshot file.
// Allocator is the exception: it owns one small file and is safe for
// concurrent use.
//
// # Durability
//
// State lives in memory and is kept independently of the log: retention and
// DeleteRecords never drop a producer (BL-03 variant A, BL-04); only Expire
// does, after producer.id.expiration.ms of idleness with no open transaction.
// On restart the partition loads the latest snapshot (Decode) and replays
// the log after the offset it covers. A snapshot that fails its version or
// CRC check is rejected with an error so the caller rebuilds from the log.
// Allocator persists the end of each ID block before handing out any ID in
// it, so no ID is ever handed out twice, even across a crash.
//
// # Where the rules come from
//
// The checks follow Apache Kafka's ProducerAppendInfo.checkProducerEpoch and
// checkSequence, ProducerStateEntry.findDuplicateBatch and
// UnifiedLog.analyzeAndValidateProducerState (storage module, Kafka 4.x),
// including KAFKA-18202 (TV2: sequence 0 for a producer with no state) and
// KAFKA-15591 (never-written partition: sequence 0 for a producer with no
// state). Each branch cites its rule. Two deliberate differences, both named
// where they are coded: expiry measures idleness on the broker clock instead
// of the batch's max timestamp, and a batch of an aborted transaction is never
// used to answer a duplicate (BL-06).
package producer
