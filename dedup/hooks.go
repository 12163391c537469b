package dedup

import "sync/atomic"

// Event is what a Hooks implementation counts.
type Event int

const (
	// EventApplied: Process committed fn's work (one per Applied result).
	EventApplied Event = iota + 1
	// EventDuplicate: Process returned Duplicate.
	EventDuplicate
	// EventStale: Process returned Stale.
	EventStale
	// EventGap: Process returned Gap.
	EventGap
	// EventRetried: a transaction failed transiently and is being rerun
	// (one per rerun, so one Process call can count several).
	EventRetried
	// EventError: Process returned an error other than a Gap (bad key,
	// handler error or panic, database error after the retries).
	EventError
	// EventBaseline: sequence mode saw a key for the first time with
	// kawa-seq > 1 and took it as the baseline (a consumer starting
	// mid-stream, or a topic whose older records expired). It is counted in
	// addition to that record's EventApplied.
	EventBaseline
	numEvents
)

func (e Event) String() string {
	switch e {
	case EventApplied:
		return "applied"
	case EventDuplicate:
		return "duplicate"
	case EventStale:
		return "stale"
	case EventGap:
		return "gap"
	case EventRetried:
		return "retried"
	case EventError:
		return "error"
	case EventBaseline:
		return "baseline"
	}
	return "unknown"
}

// event maps a nil-error Result to its counter.
func (r Result) event() Event {
	switch r {
	case Duplicate:
		return EventDuplicate
	case Stale:
		return EventStale
	case Gap:
		return EventGap
	}
	return EventApplied
}

// Hooks receives Process's events, for metrics. OnEvent is called on the
// goroutine that called Process, so it must not block; it may be called
// concurrently.
type Hooks interface {
	OnEvent(Event)
}

// Counters is a Hooks that counts every event in memory; a metrics exporter
// can read it with Get. The zero value is ready to use.
type Counters struct {
	n [numEvents]atomic.Int64
}

// OnEvent implements Hooks.
func (c *Counters) OnEvent(e Event) {
	if e > 0 && e < numEvents {
		c.n[e].Add(1)
	}
}

// Get returns how many times e was counted.
func (c *Counters) Get(e Event) int64 {
	if e > 0 && e < numEvents {
		return c.n[e].Load()
	}
	return 0
}
