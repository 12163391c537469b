// Package verify is `kawa verify`: it runs real client workloads for each
// delivery semantic against a Kafka-compatible broker, injects faults,
// records the complete history and checks it.
//
// It talks to the broker only over the wire (kgo, kadm) and controls a
// spawned broker only as a process (SIGKILL, SIGSTOP/SIGCONT, restart), so
// it runs unchanged against Kawa or any other broker.
//
// # Usage
//
//	res, err := verify.Run(ctx, verify.Config{
//		Semantics: verify.AllSemantics,
//		Faults:    []verify.FaultKind{verify.FaultKill, verify.FaultClientCrash},
//		Duration:  time.Minute,
//		Seed:      1,
//		Broker:    spawned,                              // or Brokers: []string{addr}
//		Launcher:  &verify.ProcLauncher{Command: ...},  // or verify.InprocLauncher{}
//	})
//	res.WriteTable(os.Stdout)
//	if !res.Pass() { ... }
//
// # Shape of a run
//
// NewPlan lays out topics, groups and worker slots. Each slot runs one worker
// (a producer, queue consumer, EOS pipeline member, transactional writer or
// reader) as a subprocess (`kawa verify worker SPEC`), so the client-crash
// fault is a real SIGKILL mid-batch or mid-transaction; a supervisor starts a
// new incarnation of the slot whenever its worker dies. Workers write events
// as JSON lines on stdout; the controller merges them, and its own fault
// events, into one History. At the end the controller stops producers,
// waits for the groups to commit up to the log end, stops the consumers,
// writes a fence record to every partition, lets the readers read up to the
// fences, scans every topic itself (read_uncommitted and read_committed) and
// lists end offsets and committed offsets. Check then turns the history into
// findings per semantic and anomaly.
//
// # Ownership and concurrency
//
// History is the only shared state: Add takes its mutex, and events are
// only appended. Each slot is owned by its supervisor goroutine; the fault
// executor reaches slots only through Supervisor.Crash. The spawned broker
// process is owned by the fault executor while faults run and by Run after.
//
// # Semantics and what is checked
//
// See Expectations for the matrix of anomaly × semantic; every anomaly is
// counted for every semantic, and only the expected-zero cells decide PASS.
package verify
