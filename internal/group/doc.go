// Package group is Kawa's classic consumer-group coordinator: Kafka's GroupCoordinator for the
// JoinGroup/SyncGroup protocol (KIP-394 member IDs, KIP-345 static membership, KIP-447 fenced
// transactional commits) and the committed offsets it keeps in the internal topic __consumer_offsets.
// It also runs KIP-848 consumer-protocol groups (ConsumerGroupHeartbeat: server-side "uniform" and
// "range" assignors, group and member epochs, revocation before assignment; consumer.go), whose
// offsets live beside the classic groups' and whose commits are checked by member epoch (KIP-1251).
//
// # Usage
//
// The broker builds one Coordinator over a Store that appends to (and fsyncs) the __consumer_offsets
// partition, replays that partition into it, then routes the group APIs to it:
//
//	c := group.New(group.Config{TopicExists: catalog.Exists}, offsetsLog)
//	if err := c.Load(recordsOf(offsetsLog)); err != nil { ... } // skipped records are reported
//	...
//	cl := group.Client{ID: clientID, Host: "/" + remoteIP}
//	resp := c.JoinGroup(ctx, cl, req) // req decoded by kmsg at the negotiated version
//	...
//	c.Close()
//
// Each handler takes the decoded kmsg request and returns req.ResponseKind() filled for that version;
// protocol outcomes are Kafka error codes inside the response, never Go errors. JoinGroup and SyncGroup
// park until the rebalance step they wait for ends; the others return at once or, for writes
// (OffsetCommit, TxnOffsetCommit, DeleteGroups, OffsetDelete, CompleteTxn), once their records are
// durable. CompleteTxn is the transaction coordinator's entry point for markers.
//
// # Who owns what
//
// One mutex, Coordinator.mu, guards the group map and every group and member. Handlers and timer
// callbacks take it, change state, and release it before waiting. Nothing under the lock blocks: parked
// requests wait on per-member channels (buffered, sent once) and writes wait on their done channel.
//
// Timers: each member has a session timer, each group a join timer (initial delay or rebalance
// timeout) and a sync timer, each KIP-394 pending member ID an expiry, and the coordinator one
// retention sweep. All are time.AfterFunc callbacks that run under mu and do nothing if their timer was
// replaced or stopped meanwhile (Coordinator.schedule). Tests drive them with testing/synctest.
//
// One writer goroutine owns Store.Append. Handlers queue writes under mu; the writer takes everything
// queued, appends it with one call (so concurrent commits share an fsync), then under mu applies each
// write to memory, or fails it, in queue order, and wakes its waiter. Close stops the timers, fails
// queued writes and waits for the writer.
//
// # Durability
//
// A success from OffsetCommit, TxnOffsetCommit, DeleteGroups, OffsetDelete or CompleteTxn means the
// Store said the records are durable. Memory changes only after that and in log order, so what
// OffsetFetch, ListGroups and DescribeGroups show is exactly what Load would rebuild after a crash
// (BL-18, BL-19). A failed append changes nothing and answers COORDINATOR_NOT_AVAILABLE.
// Group metadata records are Kafka's (GroupMetadataKey v2, GroupMetadataValue): one without members at
// each generation change, written without waiting, and one with every member and its assignment that
// the leader's SyncGroup waits for before anyone gets an assignment (Kafka's storeGroup). After a
// restart a group whose assignment was stored is Stable again with its members, whose sessions start
// at the load; members heartbeat on without a rebalance. Other groups come back Empty.
//
// Transactional offsets are staged durably and reach the committed offsets only through CompleteTxn,
// in whatever state the group is (BL-15), which stores a marker record; a staged offset then replaces
// the committed one only if its record is later in the log than the committed one's (Kafka's rule: a
// plain OffsetCommit written after the TxnOffsetCommit wins). Load replays records in order, applying
// markers by the same rule, so a restart gives the same answer. DeleteTopicOffsets removes the offsets
// of deleted topics. A require_stable OffsetFetch answers UNSTABLE_OFFSET_COMMIT
// for a staged partition until then (BL-17).
//
// A KIP-848 consumer group is kept in Kafka's ConsumerGroup* records (consumer_records.go). Its state
// changes in memory first and each ConsumerGroupHeartbeat is answered once the records of the state it
// shows are durable (consumer_persist.go), so Load rebuilds the same group epoch, member epochs,
// target and current assignments; a failed append answers COORDINATOR_NOT_AVAILABLE and the next write
// of the group stores its state again.
//
// Record bytes are this package's own, versioned, except the group metadata and consumer-group
// records, which are Kafka's; see records.go. Deliberate gaps: skipped.md.
package group
