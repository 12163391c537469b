package verify

import (
	"cmp"
	"slices"
)

// commitRollback: a committed offset the broker acknowledged must never go
// back. Each partition of a workload topic is consumed by one group, whose
// members commit with the generation they polled under, so the answered
// commits of a partition, in the order they were answered, never decrease
// unless the coordinator lost one (a power cut taking back an OffsetCommit
// or a committed TxnOffsetCommit) and a member resumed from an older
// offset. The end-of-run committed offset must also be at least the
// highest answered commit.
func (ix *index) commitRollback(sem Semantic) tally {
	var t tally
	commits := slices.Clone(ix.commits)
	slices.SortStableFunc(commits, func(a, b *Event) int { return cmp.Compare(a.T, b.T) })
	high := map[tp]*Event{}
	for _, c := range commits {
		if ix.sem(c.Topic) != sem {
			continue
		}
		k := tp{c.Topic, c.Part}
		if h := high[k]; h != nil && c.Off < h.Off {
			t.add("%s committed %s/%d@%d after %s's answered commit @%d", c.W, c.Topic, c.Part, c.Off, h.W, h.Off)
			continue
		}
		high[k] = c
	}
	for _, g := range ix.groupOffs {
		if h := high[tp{g.Topic, g.Part}]; h != nil && g.Off < h.Off {
			t.add("group %s ended at %s/%d@%d below %s's answered commit @%d", g.W, g.Topic, g.Part, g.Off, h.W, h.Off)
		}
	}
	return t
}
