// Package verify is `kawa verify`: it runs real client workloads for each
// delivery semantic against a Kafka-compatible broker, injects faults,
// records the complete history and checks it.
//
// It talks to brokers only over the wire (kgo, kadm, and the fault proxy in
// internal/proxy) and controls a spawned broker only as a process (SIGKILL,
// SIGSTOP/SIGCONT, restart on the same address), so it runs unchanged
// against Kawa or any other broker; tests run it against franz-go's kfake.
//
// # Usage
//
//	res, err := verify.Run(ctx, verify.Config{
//		Semantics: verify.AllSemantics,
//		Faults:    []verify.FaultKind{verify.FaultKill, verify.FaultClientCrash},
//		Duration:  time.Minute,
//		Seed:      1,
//		Broker:    &verify.SpawnedBroker{Command: ...}, // or Brokers: []string{addr}
//		Launcher:  &verify.ProcLauncher{Command: ...},  // or verify.InprocLauncher{}
//		Proxy:     verify.NewProxy,                     // for the drop and slow faults
//	})
//	res.WriteTable(os.Stdout) // also WriteJSON, WriteHTML
//	if !res.Pass() { ... }
//
// # Shape of a run
//
// NewPlan lays out topics, groups and worker slots: per queue semantic
// (at-most-once, at-least-once) two producers and a group of two consumers;
// for exactly-once two idempotent producers into a pipeline of two
// transactional consume-transform-produce members (kgo.GroupTransactSession),
// two writers of multi-partition transactions (a quarter aborted on purpose)
// and a read_committed and a read_uncommitted reader; for share (KIP-932)
// two idempotent producers into a two-partition topic read by a share
// group of three members that accept, release and reject at random (poison
// records always released), with the group's delivery-count limit and lock
// duration set at setup. Every record carries
// a unique id "<producer instance>:<seq>" (and "@<txn tag>" when written in a
// transaction). Each slot runs one worker, normally a subprocess (`kawa
// verify worker SPEC`), so the client-crash fault is a real SIGKILL mid-batch
// or mid-transaction; the Supervisor starts a new incarnation of a slot
// whenever its worker dies. Workers write events as JSON lines on stdout,
// one write per step, so what a killed worker had not written never
// happened. The controller merges them, and its fault events, into one
// History, optionally streamed to a file.
//
// After Duration the controller stops producers and writers, waits for the
// groups to commit up to the log end (giving up on a group whose commits
// stand still for ten seconds), stops the consumers, records end offsets
// and committed offsets (a share group's members stop once its
// share-partition start offsets reach the log end; if they stall, one more
// member accepts everything but poison until they do; the start offsets
// are recorded too), writes a fence record to every partition, lets the
// readers read up to the fences (for read_committed that needs the LSO to
// pass every transaction) and scans every topic itself, read_uncommitted
// and read_committed. CheckHistory then counts each anomaly per semantic;
// Expectations says which counts must be zero.
//
// # What the consumers do
//
// at-most-once commits a polled batch before processing it and drops it if
// the commit fails; at-least-once processes, then commits. Both commit with
// the member ID and generation the batch was polled under (commitFenced), so
// a member that lost its partitions in a coordinator restart cannot move a
// partition's committed offset behind another member's back. Processing
// takes Config's ProcDelay per batch: the window a client crash hits.
//
// # Ownership and concurrency
//
// History is the only shared state: Add takes its mutex and events are only
// appended, so Events can hand out the slice. Each slot is owned by its
// supervisor goroutine; the fault injector reaches workers only through
// Supervisor.Crash. The spawned broker is driven by the injector while
// faults run and by Run before and after; a fault in progress when the run
// ends is undone (resumed, restarted) before the end-of-run steps.
package verify
