package delivery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy is how the at-least-once loop retries a failing record in
// place (the partition, or with KeyConcurrency the record's lane, waits).
// Zero fields take the defaults.
type RetryPolicy struct {
	// Attempts is the total number of handler calls per record, first one
	// included; default 5. After the last, the record is dead-lettered.
	Attempts int
	// Base is the first backoff; default 100ms. Each further backoff doubles,
	// up to Max (default 5s), and the wait is drawn uniformly from
	// [0, backoff] ("full jitter").
	Base, Max time.Duration
	// Budget caps the total time spent on one record (handler calls plus
	// waits); when it is spent the record is dead-lettered even with
	// attempts left. It defaults to half the group's rebalance timeout and
	// must be below it: a record retried longer would hold a rebalance past
	// its deadline and get the member kicked out of the group.
	Budget time.Duration
	// Retryable classifies handler errors; nil retries every error. A
	// non-retryable error dead-letters the record at once. Panics are
	// always retryable.
	Retryable func(error) bool
}

func (p RetryPolicy) withDefaults(rebalanceTimeout time.Duration) (RetryPolicy, error) {
	if p.Attempts <= 0 {
		p.Attempts = 5
	}
	if p.Base <= 0 {
		p.Base = 100 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 5 * time.Second
	}
	if p.Max < p.Base {
		p.Max = p.Base
	}
	if p.Budget <= 0 {
		p.Budget = rebalanceTimeout / 2
	}
	if p.Budget >= rebalanceTimeout {
		return p, fmt.Errorf("%w: RetryPolicy.Budget %v is not below the rebalance timeout %v",
			ErrContradictingOption, p.Budget, rebalanceTimeout)
	}
	return p, nil
}

func (p RetryPolicy) retryable(err error) bool {
	var pe *PanicError
	if errors.As(err, &pe) || p.Retryable == nil {
		return true
	}
	return p.Retryable(err)
}

// backoff is the full-jitter wait before retry n (n >= 1).
func backoff(n int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return rand.N(d + 1)
}
