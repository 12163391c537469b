// Package raftnet is the raft transport of internal/replica over TCP (issue 16, item 3): Transport implements
// replica.Transport for a Scheduler and delivers what it receives to the Scheduler's Step, ReportUnreachable
// and ReportSnapshot.
//
// # Connections
//
// One TCP connection per pair of nodes carries every group's messages in both directions; of each pair the
// lower node ID dials (so there is never a second connection to reconcile), redialing after a failure with
// exponential backoff and jitter (Config.MinBackoff to MaxBackoff). Every connection opens with a hello
// (magic "KAWARAFT", protocol version, stream kind, from and to node IDs, cluster ID); the acceptor refuses
// another version, another cluster ID, a hello addressed to another node ID, a node not in its Peers, or a
// raft stream dialed by the higher ID, answering the reason (the dialer logs it at Error level) and logging
// it itself. The dialer in turn checks that the acceptor is the node and cluster it expected.
//
// # Frames
//
// Every frame is length uint32, CRC-32C uint32 (of what follows), kind uint8, body; integers in bodies are
// uvarints. A raft frame (kindMsgs) holds many messages, each group ID plus raft's protobuf encoding; the
// messages are those of one Scheduler Send per destination (batched per cycle) or of several Sends that
// queued while the connection was busy. Heartbeats and heartbeat responses between the pair (MsgHeartbeat,
// MsgHeartbeatResp without a ReadIndex context) are coalesced, as CockroachDB does: all those of a write go
// in one kindHeartbeats frame as (group, flags, term[, commit]), 4-8 bytes each, and are expanded back into
// raft messages on receipt (from and to are the connection's). Config.DisableHeartbeatCoalescing sends them
// as ordinary messages, for measurement.
//
// Bad input — a frame over Config.MaxFrameBytes (refused before it is read), a CRC mismatch, a malformed body,
// a message of a type raft keeps local or between another pair of nodes — closes that connection only (and
// is logged); the dialer reconnects. Messages for groups this node does not hold are dropped by
// Scheduler.Step, not treated as bad: groups are created and removed on the nodes at different moments.
//
// # Queues and loss
//
// Send never blocks: each peer has a queue bounded by Config.QueueBytes, drained by the connection's writer
// goroutine. A message that does not fit, or finds no connection, is dropped — raft retransmits — and the
// groups whose appends (MsgApp) were dropped, or lost with a broken connection, are told
// (ReportUnreachable), so their leaders fall back from pipelining appends to probing that follower. Close
// first drains: it takes no more messages and waits (at most Config.DrainTimeout) for the queued ones to be
// written, so the last messages of a shutting-down node (a leadership transfer's MsgTimeoutNow) leave it.
//
// # Snapshots
//
// A MsgSnap never enters the queue: it is streamed on a connection of its own (a snapshot stream: header
// frame with the group and the MsgSnap, payload chunks of Config.ChunkBytes from SnapshotStore.OpenSnapshot,
// an end frame, then the receiver's result), one at a time per peer, so a large snapshot never delays
// heartbeats; TCP flow control is the back-pressure. The receiver hands the payload to
// SnapshotStore.ReceiveSnapshot and steps the MsgSnap into raft once the store has it; the sender reports
// SnapshotFinish or SnapshotFailure to its raft (ReportSnapshot).
//
// Not yet: TLS and authentication of peers (the cluster ID is a guard against mistakes, not a secret); a
// per-peer limit on snapshot bandwidth; quiescence of idle groups (no heartbeats at all).
package raftnet
