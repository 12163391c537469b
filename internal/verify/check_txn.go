package verify

import (
	"fmt"
	"sort"
	"strings"
)

// order: within a partition, one producer instance's sequence numbers must
// rise with the offset (gaps are fine: failed or aborted writes).
func (ix *index) order(sem Semantic) tally {
	var t tally
	byPart := map[tp][]*Event{}
	for _, src := range [][]*Event{ix.scanRU, ix.scanRC} {
		for _, e := range src {
			tpl := ix.topics[e.Topic]
			if tpl.Semantic != sem || tpl.Role == RoleOut {
				continue
			}
			// Transactional topics are judged on what read_committed returns.
			if (tpl.Role == RoleTxn) != (e.Iso == ReadCommitted) {
				continue
			}
			byPart[tp{e.Topic, e.Part}] = append(byPart[tp{e.Topic, e.Part}], e)
		}
	}
	for _, p := range sortedTPs(byPart) {
		evs := byPart[p]
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].Off < evs[j].Off })
		last := map[string]*Event{}
		for _, e := range evs {
			prod, seq, ok := splitID(e.ID)
			if !ok {
				continue
			}
			if prev := last[prod]; prev != nil {
				_, pseq, _ := splitID(prev.ID)
				if seq < pseq {
					t.add("%s: seq %d at %s/%d@%d after seq %d at @%d", prod, seq, p.topic, p.part, e.Off, pseq, prev.Off)
					continue
				}
			}
			last[prod] = e
		}
	}
	return t
}

// abortedReads: read_committed (a live reader or the final scan) returned a
// record whose transaction certainly did not commit.
func (ix *index) abortedReads(sem Semantic) tally {
	var t tally
	for _, src := range [][]*Event{ix.rcReads, ix.scanRC} {
		for _, e := range src {
			if e.Txn == "" || ix.sem(e.Topic) != sem {
				continue
			}
			if ix.txns[e.Txn].aborted() {
				who := e.W
				if e.Kind == KindScan {
					who = "final scan"
				}
				t.add("%s read %s of aborted txn %s at %s/%d@%d", who, e.ID, e.Txn, e.Topic, e.Part, e.Off)
			}
		}
	}
	return t
}

// tornTxns: a transaction that may have committed must be seen whole or not
// at all by the final read_committed scan and by every reader that read up
// to the end.
func (ix *index) tornTxns(sem Semantic) tally {
	var t tally
	seen := map[string]map[recKey]bool{} // drained reader → records read
	for _, e := range ix.rcReads {
		if !ix.drained[e.W] {
			continue
		}
		if seen[e.W] == nil {
			seen[e.W] = map[recKey]bool{}
		}
		seen[e.W][recKey{e.Topic, e.ID, e.Txn}] = true
	}
	readers := sortedKeys(seen)
	for _, tag := range sortedKeys(ix.txns) {
		tx := ix.txns[tag]
		if len(tx.sends) == 0 || ix.sem(tx.sends[0].topic) != sem || tx.aborted() {
			continue
		}
		n := 0
		for _, k := range tx.sends {
			if ix.rcKeys[k] > 0 {
				n++
			}
		}
		if n > 0 && n < len(tx.sends) {
			t.add("final scan saw %d of %d records of txn %s", n, len(tx.sends), tag)
		}
		for _, r := range readers {
			n := 0
			for _, k := range tx.sends {
				if seen[r][k] {
					n++
				}
			}
			if n > 0 && n < len(tx.sends) {
				t.add("%s saw %d of %d records of txn %s", r, n, len(tx.sends), tag)
			}
		}
	}
	return t
}

// commitAhead: a successful commit of offset o means the last data record
// before o had been processed when the commit was made.
func (ix *index) commitAhead(sem Semantic) tally {
	var t tally
	for _, c := range ix.commits {
		if ix.sem(c.Topic) != sem {
			continue
		}
		d, ok := ix.lastDataBefore(tp{c.Topic, c.Part}, c.Off)
		if !ok {
			continue
		}
		if ft, ok := ix.firstProc(d); !ok || ft > c.T {
			t.add("%s committed %s/%d@%d (gen %d) before offset %d was processed", c.W, c.Topic, c.Part, c.Off, c.Gen, d.Off)
		}
	}
	return t
}

// commitPastEnd: no commit, during the run or left at its end, may point
// past the log end offset.
func (ix *index) commitPastEnd(sem Semantic) tally {
	var t tally
	for _, src := range [][]*Event{ix.commits, ix.groupOffs} {
		for _, c := range src {
			if ix.sem(c.Topic) != sem {
				continue
			}
			if end, ok := ix.ends[tp{c.Topic, c.Part}]; ok && c.Off > end {
				t.add("%s committed %s/%d@%d past the log end %d", c.W, c.Topic, c.Part, c.Off, end)
			}
		}
	}
	return t
}

// pastLSO: a read_committed fetch returned a record at or past the LSO it
// reported, or a record of a transaction whose commit had not even been
// requested yet.
func (ix *index) pastLSO(sem Semantic) tally {
	var t tally
	for _, e := range ix.rcReads {
		if ix.sem(e.Topic) != sem {
			continue
		}
		if e.LSO >= 0 && e.Off >= e.LSO {
			t.add("%s read %s/%d@%d with LSO %d", e.W, e.Topic, e.Part, e.Off, e.LSO)
			continue
		}
		if tx := ix.txns[e.Txn]; e.Txn != "" && tx != nil && tx.commitRequested && tx.endT > e.T {
			t.add("%s read %s of txn %s %v before its commit was requested", e.W, e.ID, e.Txn, nanos(tx.endT-e.T))
		}
	}
	return t
}

func nanos(n int64) string { return fmt.Sprintf("%.1fms", float64(n)/1e6) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedTPs[V any](m map[tp]V) []tp {
	keys := make([]tp, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].part < keys[j].part
	})
	return keys
}

func fmtEvents(evs []*Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmt.Sprintf("%s/%d@%d", e.Topic, e.Part, e.Off)
		if e.Txn != "" {
			parts[i] += " (txn " + e.Txn + ")"
		}
	}
	return strings.Join(parts, ", ")
}

func fmtProcs(ps []*Event) string {
	parts := make([]string, 0, len(ps))
	for i, p := range ps {
		if i == maxExamples {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s gen %d at %d@%d", p.W, p.Gen, p.Part, p.Off))
	}
	return strings.Join(parts, "; ")
}
