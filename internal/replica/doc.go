// Package replica is Kawa's replication layer on etcd raft (go.etcd.io/raft/v3, RawNode): one raft group per
// partition (issue 16). It is the foundation only, and nothing outside this package imports it yet: single-node
// `kawa serve` does not go through it (layers.txt forbids the import).
//
// # What is here
//
// Scheduler drives many groups of one node from a fixed pool of Config.Workers goroutines, never a goroutine
// per group, in cycles: inputs (Step, Propose, Tick) into each queued group's RawNode; the Ready's entries onto
// the group's LogStore and fsynced; the changed HardStates of all groups in one append and one fsync to the
// node-wide HardStateFile; only then the messages, batched per destination node (Transport); then committed
// entries to the StateMachine, leader changes, Advance. Raft runs with PreVote, CheckQuorum,
// MaxInflightMsgs, MaxUncommittedEntriesSize and DisableProposalForwarding (Kawa answers
// NOT_LEADER_OR_FOLLOWER rather than forwarding a produce). See Scheduler for the goroutines, locks and
// failure handling.
//
// FileLog is the reference LogStore: one append-only file of CRC'd records per group, all entries held in
// memory, no compaction. It exists so the scheduler and the simulation run on a real (crash-clone) file system
// before the partition log carries raft entries.
//
// The deterministic simulation (sim_test.go; `go test ./internal/replica -run 'TestSim$' -seed N -v` replays
// seed N with a trace) runs 3- and 5-node clusters of many groups on virtual time over a lossy, delaying,
// reordering, partitioning network, with crashes that lose unsynced writes between and in the middle of
// cycles, and checks: committed entries never change or get lost, no proposal commits twice, one leader per
// term, restarted nodes' durable logs agree with the committed prefix, and every sent message depends only on
// durable state.
//
// # Not yet (in order)
//
//  1. LogStore over the partition log (internal/log), designed below.
//  2. Transport: one TCP connection per peer pair carrying all groups' messages (Message, proto-encoded raft
//     messages plus the group ID), batched per Send as the Scheduler already hands them; heartbeats
//     coalesced per peer; snapshot streaming with back-pressure.
//  3. Snapshots and log compaction (retention moves FirstIndex; a follower behind it gets the partition's
//     prefix as "log starts at offset X" plus producer and transaction state, replacing its prefix
//     wholesale); membership changes (ConfChangeV2: learner, then voter); leadership transfer.
//  4. The metadata group, Kafka semantics on raft (acks, HW from the commit index, producer state applied
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
// Open questions:
//   - where the raft index of a segment's first batch lives: a new per-segment file, or derived by a scan of
//     all segments on open (slower recovery, no new file);
//   - internal batches inside segments change what the cleaner (compaction) must preserve and what
//     log.Read's zero-copy ranges look like; the cleaner must keep them below the raft snapshot index only;
//   - whether MsgApp entries carry the batch bytes as raft Entry.Data (a copy per entry) or reference the
//     segment range (sendfile to followers), which needs a Transport that streams from files;
//   - HardState writes with only the commit index changed need no fsync (raft's MustSync is false); the
//     scheduler fsyncs them today.
package replica
