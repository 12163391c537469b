// Package replica is Kawa's replication layer on etcd raft (go.etcd.io/raft/v3, RawNode): one raft group per
// partition (issue 16). It is the foundation only, and nothing outside this package imports it yet: single-node
// `kawa serve` does not go through it (layers.txt forbids the import).
//
// # What is here
//
// Scheduler drives many groups of one node from a fixed pool of Config.Workers goroutines, never a goroutine
// per group, in cycles: inputs (Step, Propose, Tick) into each queued group's RawNode; the Ready's entries onto
// the group's LogStore and fsynced; the changed HardStates of all groups in one append to the node-wide
// HardStateFile, fsynced when a term or vote changed; only then the messages, batched per destination node
// (Transport); then committed entries to the StateMachine, leader changes, Advance. Raft runs with PreVote, CheckQuorum,
// MaxInflightMsgs, MaxUncommittedEntriesSize and DisableProposalForwarding (Kawa answers
// NOT_LEADER_OR_FOLLOWER rather than forwarding a produce). See Scheduler for the goroutines, locks and
// failure handling.
//
// BatchLog is the LogStore over the partition log (internal/log with Options.Raft), as designed below: one
// raft entry is one Kafka record batch written once in the segments, raft's own entries internal batches.
// FileLog is the reference LogStore: one append-only file of CRC'd records per group, all entries held in
// memory, no compaction; the scheduler's tests and the first simulation run on it.
//
// The deterministic simulation (sim_test.go; `go test ./internal/replica -run 'TestSim$' -seed N -v` replays
// seed N with a trace; TestSimBatchLog runs it over BatchLog with Kafka batches as proposals) runs 3- and
// 5-node clusters of many groups on virtual time over a lossy, delaying, reordering, partitioning network,
// with crashes that lose unsynced writes between and in the middle of
// cycles, and checks: committed entries never change or get lost, no proposal commits twice, one leader per
// term, restarted nodes' durable logs agree with the committed prefix, and every sent message depends only on
// durable state; over BatchLog also that every node stores each committed data entry at the same Kafka
// offset and that offsets run contiguously over the data entries.
//
// # Not yet (in order)
//
//  1. Transport: built in internal/replica/raftnet (one TCP connection per node pair for all groups, heartbeats
//     coalesced, snapshots streamed apart through a SnapshotStore; Scheduler.ReportUnreachable and
//     ReportSnapshot are its reports to raft). The SnapshotStore over the partition log is still to build.
//  2. Snapshots and log compaction (retention moves FirstIndex; a follower behind it gets the partition's
//     prefix as "log starts at offset X" plus producer and transaction state, replacing its prefix
//     wholesale); membership changes (ConfChangeV2: learner, then voter); leadership transfer.
//  3. The metadata group, Kafka semantics on raft (acks, HW from the commit index, producer state applied
//     from committed entries, coordinators as leaders of their internal partitions), `kawa serve --peers`.
//
// # Design: raft storage over the partition log
//
// Entry = one Kafka record batch, the v2 bytes as the leader assigned its offsets, in the partition's segment
// log, written once and covered by the log's group-commit fsync (Redpanda's model). The raft term is the
// batch's partitionLeaderEpoch (outside the batch CRC, so the leader stamps it without recomputing the CRC):
// Kafka's leader epoch is the raft term, and KIP-320 fencing and OffsetForLeaderEpoch come from the same data.
//
// Raft indexes are contiguous and count every entry; Kafka offsets count records and skip raft's own entries.
// Each segment therefore also records the raft index of its first batch, and a sparse raft-index → position
// index (like the offset index) is rebuilt on recovery by the same scan that checks CRCs. Term(i) comes from a
// leader-epoch cache of (term, first raft index, first offset) runs — Kafka's leader-epoch-checkpoint shape —
// an O(log terms) lookup, rebuilt on recovery too.
//
// Entries that are not Kafka data — a new leader's empty entry, configuration changes — are internal batches:
// a batch header with a Kawa-private attribute (or magic) that takes no Kafka offset (its base offset repeats
// the next offset to assign, lastOffsetDelta marks it empty), is excluded from the offset and time indexes,
// and is never served: Read splits its file ranges around it. Not control batches: kafka-go 0.4 hands
// control batches to applications as messages. Kafka offsets stay contiguous across elections; only raft
// indexes count the internal batches.
//
// Truncation of an uncommitted suffix (Append at an index at or below the last) is log truncation to that
// entry's position, followed by a producer-state rebuild from the last snapshot, as Kafka does.
//
// The single-node append path must stay as it is (item 7 of the issue): the raft index and internal batches
// are needed only when a partition is replicated, so the log gains them behind an option; a log opened
// without it keeps today's format, checks and speed.
//
// What internal/log offers today and what item 1 above needs from it (studied, not built):
//   - Append assigns the base offset End() itself (it rewrites b[0:8]). A follower appending the leader's batch
//     gets the leader's offset exactly when their logs agree below it, which raft's log matching guarantees; the
//     LogStore should check the returned base against the offset the raft index maps to and fail the group on a
//     mismatch rather than renumber. Entry.Data is shared and immutable, so Append must get a copy.
//   - The raft term is a uint64, partitionLeaderEpoch an int32: terms above math.MaxInt32 must be refused.
//   - There is no suffix truncation: retention cuts the head (SetStart, EnforceRetention) and the cleaner
//     replaces closed segments (ReplaceSegment). Raft needs Log.TruncateTo(offset): later segments detached
//     through the delayed-close path readers rely on, the segment holding offset cut at that batch and its
//     indexes rebuilt by the recovery scan, the file and directory fsynced, and the group-commit state's durable
//     and fsynced ends lowered to offset (else WaitDurable could return at once for re-appended offsets). This
//     is the one change the single-node path would see: a new method, no change to Append, Read or recovery.
//   - Raft's own entries in a second file per partition (raft index, term, type, data, CRC'd, as FileLog) would
//     keep internal/log free of a new batch kind, but two files lose their relative order in a crash: an
//     fsynced data batch after an unsynced raft entry would, on recovery, shift to that entry's raft index with
//     the same term, and raft's (index, term) matching would then accept a wrong entry. The side file would
//     have to record, per raft entry, its index and the log end offset at its append; fsync it before the log
//     on append and after the log on truncation; and recovery would end the raft log at the first index that
//     neither file fills. Internal batches inside the segments keep one order by construction; they need
//     Header.Check, recovery's offset-continuity check and Read's ranges to know them. Deciding between the
//     two is the first step of item 1.
//
// Decided: internal batches inside the segments (internal/log Options.Raft), not a side file. The reason is
// the crash argument above: one file has one order, so after any crash the raft log is a prefix of what was
// written, and raft's (index, term) matching can never be fooled by a data batch sliding onto a lost raft
// entry's index. A side file would need its own fsync ordering against the log on both append and
// truncation and a recovery that reconciles two files; in the segments the recovery scan that checks CRCs
// already rebuilds everything. The cost is that internal/log knows one more batch shape (attribute bit 14,
// lastOffsetDelta -1, no records), checked only in a log opened with Options.Raft. Each segment's first raft
// index sits in a <base>.raft file written durably before the segment's .log exists (the one piece of raft
// state a scan of the batches cannot give, once retention removes older segments).
//
// Open questions:
//   - BatchLog refuses (and so fails the group on every replica) a normal entry that is not one Kafka batch, or
//     one carrying attribute bit 14: the leader's produce path must refuse such a batch before proposing it
//     (CORRUPT_MESSAGE), or one bad client batch would stop the partition.
//   - Raft hands Apply the proposal's bytes while the entry is in its memory, the stored bytes (offsets and
//     epoch assigned) after a restart; the partition's apply must take offsets from the log, not the entry.
//   - Proposals carry no offset, so Append checks the assigned base offset against this replica's own
//     raft-index → offset map; a leader stamping its offsets into the proposal would let every follower
//     check against the leader's too, but needs the partition to track offsets of in-flight proposals.
//   - Compaction (ReplaceSegment) is refused on a raft log and retention must stay off until snapshots exist:
//     both move or renumber raft indexes.
package replica
