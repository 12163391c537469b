package delivery

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Hooks receives the loops' events, for metrics and logs. Every method is
// called synchronously from the goroutine that saw the event (a partition
// worker, the poll loop or a rebalance callback), possibly from several
// goroutines at once, so implementations must be safe for concurrent use and
// must not block. Embed NopHooks to implement only some methods: methods may
// be added to this interface, and embedding NopHooks keeps such
// implementations compiling.
type Hooks interface {
	// OnHandled is called after every handler attempt with its wall time
	// and its result (nil, the handler's error, or a *PanicError).
	OnHandled(r *kgo.Record, attempt int, took time.Duration, err error)
	// OnProcessed is called once a record is finished: handled successfully
	// (all semantics), or, for exactly-once, when its batch committed.
	OnProcessed(r *kgo.Record)
	// OnRetry is called before an at-least-once retry of r; attempt is the
	// attempt that failed (1 for the first) and wait the jittered backoff.
	OnRetry(r *kgo.Record, attempt int, err error, wait time.Duration)
	// OnDeadLettered is called once the dead-letter write of r to topic
	// dlt has been acknowledged.
	OnDeadLettered(r *kgo.Record, dlt string, attempts int, err error)
	// OnParked is called once r has been diverted to the park topic
	// because its key is parked (r is the source record).
	OnParked(r *kgo.Record, parkTopic string)
	// OnCommit is called after every offset commit the loop issues,
	// with the offsets asked for (one past the last finished record per
	// partition) and the commit's error (nil when every partition committed).
	OnCommit(offsets map[string]map[int32]kgo.EpochOffset, took time.Duration, err error)
	// OnPanic is called when a handler panics, with the recovered value and
	// the goroutine's stack; the attempt counts as failed.
	OnPanic(r *kgo.Record, err *PanicError)
	// OnInFlight reports a change of the number of records dispatched and
	// not yet finished (delta is +n or -n); the running sum is the gauge.
	OnInFlight(delta int)
	// OnError reports a condition that the loop handled without stopping:
	// a retryable fetch error, an at-most-once handler failure (the record
	// is not retried, by that semantic), or a dropped exactly-once batch
	// (a *BatchAbortedError).
	OnError(err error)
}

// NopHooks implements Hooks with methods that do nothing; embed it.
type NopHooks struct{}

func (NopHooks) OnHandled(*kgo.Record, int, time.Duration, error)                    {}
func (NopHooks) OnProcessed(*kgo.Record)                                             {}
func (NopHooks) OnRetry(*kgo.Record, int, error, time.Duration)                      {}
func (NopHooks) OnDeadLettered(*kgo.Record, string, int, error)                      {}
func (NopHooks) OnParked(*kgo.Record, string)                                        {}
func (NopHooks) OnCommit(map[string]map[int32]kgo.EpochOffset, time.Duration, error) {}
func (NopHooks) OnPanic(*kgo.Record, *PanicError)                                    {}
func (NopHooks) OnInFlight(int)                                                      {}
func (NopHooks) OnError(error)                                                       {}

// Named crash points, passed to Config.CrashPoint. They exist for tests that
// kill the process at an exact place (see the package doc); production code
// leaves Config.CrashPoint nil.
const (
	// AtMostOnce: the polled offsets are committed, the handler has not run.
	// A crash here loses exactly the batch just committed.
	CrashAfterCommitBeforeHandler = "after-commit-before-handler"
	// AtLeastOnce: a record's handler succeeded (or its dead-letter or park
	// write was acknowledged) and its offset is not committed yet. A crash
	// here redelivers every finished-but-uncommitted record.
	CrashAfterHandlerBeforeCommit = "after-handler-before-commit"
	// ExactlyOnce: the batch's outputs are produced and flushed inside the
	// open transaction, End has not been called. A crash here aborts the
	// transaction; the batch is processed again and its outputs appear once.
	CrashAfterProduceBeforeEnd = "after-produce-before-end"
)
