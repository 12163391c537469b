package broker

import (
	"fmt"
	"maps"
	"slices"

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

// PartitionCleaning is one compacted partition's log-cleaner state.
type PartitionCleaning struct {
	Topic     string
	Partition int32
	cleaner.Status
}

// CleanerProgress returns the cleaner state of every live partition of a compacted topic (cleanup.policy
// compact or compact,delete) that the cleaner has looked at (it looks at each in its first round), sorted
// by topic and partition.
func (b *Broker) CleanerProgress() []PartitionCleaning {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []PartitionCleaning
	for _, name := range slices.Sorted(maps.Keys(b.parts)) {
		t, ok := b.catalog.Get(name)
		if !ok || !b.topicConfig(t).Compact() {
			continue
		}
		for _, p := range b.parts[name] {
			if p == nil {
				continue
			}
			if st, ok := b.cleaner.StatusOf(p.Log()); ok {
				out = append(out, PartitionCleaning{Topic: name, Partition: p.Index, Status: st})
			}
		}
	}
	return out
}
