package broker

import (
	"fmt"

	"github.com/kawa-broker/kawa/internal/cleaner"
	"github.com/kawa-broker/kawa/internal/config"
)

// cleanerTargets lists every open partition for the log cleaner, each with its topic's current configs.
func (b *Broker) cleanerTargets() []cleaner.Target {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []cleaner.Target
	for name, ps := range b.parts {
		cfg := func() config.Topic {
			t, ok := b.catalog.Get(name)
			if !ok {
				return config.Topic{CleanupPolicy: "delete"} // deleted meanwhile: nothing to compact
			}
			return b.topicConfig(t)
		}
		for _, p := range ps {
			if p == nil {
				continue
			}
			out = append(out, cleaner.Target{
				Name: fmt.Sprintf("%s-%d", name, p.Index), Log: p.Log(),
				LastStable: p.LastStableOffset, HighWatermark: p.HighWatermark, Config: cfg,
				ForgetMarkers: p.ForgetMarkers,
			})
		}
	}
	return out
}

// CleanNow runs one log-cleaner round now on every compacted partition, whatever their dirty ratio (tests,
// and `kawa` admin paths); it returns the first error.
func (b *Broker) CleanNow() error { return b.cleaner.CleanNow() }

// CleanerStats returns the log cleaner's counters.
func (b *Broker) CleanerStats() cleaner.Stats { return b.cleaner.Stats() }
