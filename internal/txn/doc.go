// Package txn is Kawa's transaction coordinator (KIP-98, KIP-360, KIP-588,
// KIP-664, KIP-890): it maps each transactional.id to a producer ID and
// epoch, runs the transaction state machine, keeps that state in the internal
// topic __transaction_state, and ends transactions by writing COMMIT/ABORT
// markers to their partitions and completing their groups' staged offsets.
//
// # Usage
//
// The broker builds one Coordinator over four small interfaces it implements
// (Store over __transaction_state partition 0, Markers over data partitions,
// Groups over the group coordinator, IDs over the producer ID allocator),
// replays the log into it, and routes the transaction APIs to it:
//
//	c := txn.New(txn.Config{}, store, markers, groups, pids)
//	if err := c.Load(recordsOf(txnLog)); err != nil { ... }
//	pe, err := c.InitProducerID(ctx, "tx-1", time.Minute, txn.ProducerIDEpoch{ProducerID: -1, Epoch: -1})
//	err = c.AddPartitions(ctx, "tx-1", pe, []txn.TopicPartition{{"orders", 0}})
//	release, err := c.Pin("tx-1", pe, txn.TopicPartition{"orders", 0}) // produce path
//	... append the batch ...; release()
//	_, err = c.EndTxn(ctx, "tx-1", pe, true, false)
//	c.Close()
//
// Methods take plain values and return kerr errors (the Kafka code to
// answer); the broker maps them per request version (PRODUCER_FENCED became
// a code in KIP-588; older versions get INVALID_PRODUCER_EPOCH).
//
// # States
//
//	Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit --markers--> CompleteCommit
//	                                       |                PrepareAbort  --markers--> CompleteAbort
//	                                       '--InitProducerId or timeout (PrepareEpochFence)--> PrepareAbort
//	Empty/Complete* --InitProducerId--> Empty (epoch+1, or a new producer ID at exhaustion)
//	Empty/Complete* --expiry--> Dead (tombstone)
//
// Any other transition asked for is INVALID_TXN_STATE; a transition while
// another is in flight waits up to Config.BusyWait, then is
// CONCURRENT_TRANSACTIONS, except that a producer already fenced (an older
// epoch, as after a timeout abort) gets PRODUCER_FENCED at once, because
// Kafka checks the epoch before the state. Epochs never wrap: MaxEpoch is only ever used to
// fence, and an exhausted epoch moves the transactional.id to a new producer
// ID with epoch 0 (KAFKA-5283, KAFKA-18660, KAFKA-19367).
//
// # Who owns what
//
// One mutex, Coordinator.mu, guards the map of transactional.ids and all
// their state. It is never held across I/O: a transition marks the txn
// pending, releases mu while the Store makes the record durable, then applies
// it under mu (transitLocked). So memory only ever shows what the log holds,
// and a failed write changes nothing. Methods ending in Locked need mu.
//
// Goroutines, all stopped and awaited by Close: one per transaction being
// completed (complete: wait for pins, write markers in parallel, complete
// groups, write the Complete record, retrying each step), one
// transactional.id expiration loop, and time.AfterFunc callbacks for
// transaction.timeout.ms (onTimeout). Lock order: Coordinator.mu, then
// whatever the Store, Markers and Groups take (never called under mu, except
// IDs.Next).
//
// # Durability
//
// Every answer that changes state is sent after its record is durable. EndTxn
// answers once PrepareCommit/PrepareAbort is durable; markers follow. A
// decision once recorded is always completed: by the completion goroutine, or
// after a crash by Load, which resumes every PrepareCommit/PrepareAbort. A
// write verified by Pin lands before the marker of its transaction because
// completion waits for every pin to be released (KIP-890 part 1 without
// partition-side state). Record bytes are this package's own and versioned
// (records.go).
package txn
