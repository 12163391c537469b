// Package wait is the tests' one "eventually" helper: it polls a condition
// that another goroutine or process makes true, and fails the test if it
// does not become true in time. It is for conditions without an event to
// wait on (state behind a client, a broker's counters); where a channel or a
// callback exists, tests wait on that instead, and timers under test run on
// virtual time (testing/synctest). It imports only the standard library, so
// any test may use it, including those that must not link the broker.
package wait

import (
	"testing"
	"time"
)

// poll is how often Until re-checks: short against the timeouts tests use,
// long enough not to busy-spin on two shared cores.
const poll = 10 * time.Millisecond

// Until calls cond until it returns true, and fails the test with "timed out
// after d waiting for what" if that takes longer than d.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}
