package partition

import "fmt"

// The partition's invariants, checked only in builds with -tags invariants
// (internal/invariants); a violation panics.

// checkPublication: the published offsets never move backwards (clients
// track both; Kafka's HW and LSO are monotonic) and the LSO never passes the
// HW. The caller holds pubMu.
func checkPublication(cur, next offsets) {
	if next.lso > next.hw || next.hw < cur.hw || next.lso < cur.lso {
		panic(fmt.Sprintf("partition invariant: publication {hw %d, lso %d} after {hw %d, lso %d}", next.hw, next.lso, cur.hw, cur.lso))
	}
}

// checkAbortedLocked: the aborted-transaction index is sorted by ABORT
// marker offset with no marker twice, and each range starts at or before its
// marker, which read_committed fetches rely on (a full scan per change, so
// only under the tag). The caller holds mu.
func (p *Partition) checkAbortedLocked() {
	for i, a := range p.aborted {
		if a.FirstOffset > a.LastOffset {
			panic(fmt.Sprintf("partition invariant: %s-%d: aborted transaction %+v starts after its marker", p.Topic, p.Index, a))
		}
		if i > 0 && p.aborted[i-1].LastOffset >= a.LastOffset {
			panic(fmt.Sprintf("partition invariant: %s-%d: aborted transactions not strictly sorted by marker offset: %+v then %+v", p.Topic, p.Index, p.aborted[i-1], a))
		}
	}
}
