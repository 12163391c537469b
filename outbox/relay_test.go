package outbox_test

import (
	"testing"

	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

func TestRelayExactSets(t *testing.T) {
	for _, mode := range []outbox.Mode{outbox.Idempotent, outbox.Transactional} {
		t.Run(mode.String(), func(t *testing.T) {
			sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
				e := newEnv(t, be)
				committed, rolledBack := e.workload(120, 7, 9)
				rr := e.startRelay(outbox.RelayConfig{Mode: mode, BatchSize: 16})
				e.waitUnsent(rr, 0)
				// A second wave after the relay went idle: Notify-free, by polling.
				more, rb2 := e.workload(30, 7, 9)
				committed = append(committed, more...)
				for id := range rb2 {
					rolledBack[id] = true
				}
				e.waitUnsent(rr, 0)
				rr.stop()
				e.checkExact(e.readTopic(), committed, rolledBack, 0)
				if n := e.countRows("kawa_outbox_dead"); n != 0 {
					t.Errorf("%d dead rows, want 0", n)
				}
			})
		})
	}
}
