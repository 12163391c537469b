package verify

import (
	"fmt"
	"slices"
)

// Check names an anomaly the checkers count.
type Check string

// The anomalies, in report order.
const (
	CheckLostWrite     Check = "lost-write"      // acknowledged write (committed, if transactional) missing from the log
	CheckLostE2E       Check = "lost-e2e"        // record in the input log never processed end to end
	CheckDupLog        Check = "dup-log"         // same id at two offsets of the log
	CheckDupE2E        Check = "dup-e2e"         // same id processed twice end to end
	CheckOrder         Check = "order"           // one producer's records out of order within a partition
	CheckAbortedRead   Check = "aborted-read"    // read_committed returned a record of an aborted transaction
	CheckTornTxn       Check = "torn-txn"        // a read_committed consumer saw part of a transaction, not the rest
	CheckCommitAhead   Check = "commit-ahead"    // committed offset beyond what had been processed
	CheckCommitPastEnd Check = "commit-past-end" // committed offset beyond the log end
	CheckCommitBack    Check = "commit-rollback" // committed offset went back below an acknowledged commit
	CheckPastLSO       Check = "read-past-lso"   // read_committed returned a record at or past the LSO, or before its commit was asked for
	CheckRecords       Check = "records"         // records that made it end to end (must be > 0)

	CheckShareLost       Check = "share-lost"         // share record neither accepted, rejected nor delivered up to the limit
	CheckShareDupAccept  Check = "share-dup-accept"   // share record delivered again after a confirmed accept
	CheckShareReject     Check = "share-after-reject" // share record delivered again after a confirmed reject
	CheckShareOverLimit  Check = "share-over-limit"   // delivery count outside [1, share.delivery.count.limit]
	CheckShareCountOrder Check = "share-count-order"  // a delivery whose count is not above every earlier delivery's
	CheckSharePoison     Check = "share-poison"       // a poison record (always released) ended accepted or rejected
	CheckShareStart      Check = "share-start"        // end-of-run share-partition start offset not at the log end
)

// AllChecks lists the checks in report order.
var AllChecks = []Check{CheckLostWrite, CheckLostE2E, CheckDupLog, CheckDupE2E, CheckOrder,
	CheckAbortedRead, CheckTornTxn, CheckCommitAhead, CheckCommitPastEnd, CheckCommitBack, CheckPastLSO,
	CheckShareLost, CheckShareDupAccept, CheckShareReject, CheckShareOverLimit, CheckShareCountOrder, CheckSharePoison, CheckShareStart,
	CheckRecords}

// shareChecks are the checks only the share semantic has.
var shareChecks = []Check{CheckShareLost, CheckShareDupAccept, CheckShareReject, CheckShareOverLimit,
	CheckShareCountOrder, CheckSharePoison, CheckShareStart}

// Expect is what a semantic promises about an anomaly.
type Expect string

// Expectations.
const (
	ExpectZero     Expect = "0"   // the guarantee: any occurrence fails the semantic
	ExpectAny      Expect = "any" // allowed by the semantic; counted to show the checker sees it
	ExpectNA       Expect = "n/a" // the semantic's workload cannot produce it
	ExpectPositive Expect = ">0"  // progress: at least one record
)

// Expectations is the semantic × anomaly matrix. at-most-once may lose but
// never duplicates; at-least-once may duplicate but never loses;
// exactly-once does neither and adds the read_committed checks. Every
// semantic must keep one producer's order (none retries out of order) and
// must never commit past the log end, nor lose a commit it was answered
// for.
//
// share (KIP-932) is judged on its own rows: it keeps its producers'
// writes (idempotent, acks=all) and order, and its share-group checks are
// all guarantees; the consumer-group rows do not apply to it.
func Expectations(sem Semantic, c Check) Expect {
	if slices.Contains(shareChecks, c) {
		if sem == Share {
			return ExpectZero
		}
		return ExpectNA
	}
	if sem == Share {
		switch c {
		case CheckLostWrite, CheckDupLog, CheckOrder:
			return ExpectZero
		case CheckRecords:
			return ExpectPositive
		}
		return ExpectNA
	}
	switch c {
	case CheckRecords:
		return ExpectPositive
	case CheckOrder, CheckCommitPastEnd, CheckCommitBack:
		return ExpectZero
	case CheckAbortedRead, CheckTornTxn, CheckPastLSO:
		if sem == ExactlyOnce {
			return ExpectZero
		}
		return ExpectNA
	case CheckLostWrite, CheckLostE2E, CheckCommitAhead:
		if sem == AtMostOnce {
			return ExpectAny
		}
		return ExpectZero
	case CheckDupLog, CheckDupE2E:
		if sem == AtLeastOnce {
			return ExpectAny
		}
		return ExpectZero
	}
	return ExpectNA
}

// maxExamples is how many concrete examples a finding keeps.
const maxExamples = 3

// Finding is one cell of the report: a semantic's count of one anomaly.
type Finding struct {
	Semantic Semantic `json:"semantic"`
	Check    Check    `json:"check"`
	Expected Expect   `json:"expected"`
	Observed int      `json:"observed"`
	Pass     bool     `json:"pass"`
	Examples []string `json:"examples,omitempty"`
}

// tally counts one anomaly and keeps its first examples.
type tally struct {
	n        int
	examples []string
}

func (t *tally) add(format string, args ...any) {
	t.n++
	if len(t.examples) < maxExamples {
		t.examples = append(t.examples, fmt.Sprintf(format, args...))
	}
}

// Checked is the outcome of CheckHistory.
type Checked struct {
	Findings []Finding // per semantic, one per check in AllChecks order
	Records  int       // distinct records checked
	Txns     TxnStats
	Share    ShareStats // when the share semantic was checked
}

// TxnStats shows the transactional checks had something to check.
type TxnStats struct {
	Committed int `json:"committed"`
	Aborted   int `json:"aborted"`
	Unknown   int `json:"unknown"`   // EndTxn returned an error
	Open      int `json:"left_open"` // never ended by the writer: it died mid-transaction
	// AbortedVisibleRU counts records of aborted transactions the
	// read_uncommitted scan returned: data read_committed had to skip.
	AbortedVisibleRU int `json:"aborted_records_read_uncommitted"`
}

// CheckHistory runs every checker over a history for each semantic.
func CheckHistory(plan *Plan, events []Event, sems []Semantic) Checked {
	ix := newIndex(plan, events)
	var out Checked
	for _, sem := range sems {
		for _, c := range AllChecks {
			t := ix.run(c, sem)
			exp := Expectations(sem, c)
			out.Findings = append(out.Findings, Finding{Semantic: sem, Check: c, Expected: exp, Observed: t.n,
				Pass: pass(exp, t.n), Examples: t.examples})
		}
	}
	out.Records = ix.recordsChecked()
	out.Txns = ix.txnStats()
	if slices.Contains(sems, Share) {
		out.Share = ix.shareStats()
	}
	return out
}

func (ix *index) txnStats() TxnStats {
	var s TxnStats
	for _, t := range ix.txns {
		switch {
		case !t.done && t.endT == 0:
			s.Open++
		case t.unknown || !t.done:
			s.Unknown++
		case t.committed:
			s.Committed++
		default:
			s.Aborted++
		}
	}
	for _, e := range ix.scanRU {
		if e.Txn != "" && ix.txns[e.Txn].aborted() {
			s.AbortedVisibleRU++
		}
	}
	return s
}

func pass(e Expect, n int) bool {
	switch e {
	case ExpectZero:
		return n == 0
	case ExpectPositive:
		return n > 0
	}
	return true
}

// run dispatches one checker.
func (ix *index) run(c Check, sem Semantic) tally {
	switch c {
	case CheckLostWrite:
		return ix.lostWrites(sem)
	case CheckLostE2E:
		return ix.lostE2E(sem)
	case CheckDupLog:
		return ix.dupLog(sem)
	case CheckDupE2E:
		return ix.dupE2E(sem)
	case CheckOrder:
		return ix.order(sem)
	case CheckAbortedRead:
		return ix.abortedReads(sem)
	case CheckTornTxn:
		return ix.tornTxns(sem)
	case CheckCommitAhead:
		return ix.commitAhead(sem)
	case CheckCommitPastEnd:
		return ix.commitPastEnd(sem)
	case CheckCommitBack:
		return ix.commitRollback(sem)
	case CheckPastLSO:
		return ix.pastLSO(sem)
	case CheckShareLost:
		return ix.shareLostRecords(sem)
	case CheckShareDupAccept:
		return ix.shareAfterConfirmed(sem, AckAccept)
	case CheckShareReject:
		return ix.shareAfterConfirmed(sem, AckReject)
	case CheckShareOverLimit:
		return ix.shareOverLimit(sem)
	case CheckShareCountOrder:
		return ix.shareCountOrder(sem)
	case CheckSharePoison:
		return ix.sharePoison(sem)
	case CheckShareStart:
		return ix.shareStartBehind(sem)
	case CheckRecords:
		return ix.endToEnd(sem)
	}
	return tally{}
}

// lostWrites: an acknowledged non-transactional write must be in the
// read_uncommitted scan; an acknowledged write of a committed transaction
// must be in the read_committed scan.
func (ix *index) lostWrites(sem Semantic) tally {
	var t tally
	for _, a := range ix.acks {
		if ix.sem(a.Topic) != sem {
			continue
		}
		if a.Txn == "" {
			if ix.ru.count(idKey{a.Topic, a.ID}) == 0 {
				t.add("%s acknowledged at %s/%d@%d by %s, not in the log", a.ID, a.Topic, a.Part, a.Off, a.W)
			}
			continue
		}
		if tx := ix.txns[a.Txn]; tx != nil && tx.committed && ix.rcKeys[recKey{a.Topic, a.ID, a.Txn}] == 0 {
			t.add("%s of committed txn %s acknowledged at %s/%d@%d, not visible read_committed", a.ID, a.Txn, a.Topic, a.Part, a.Off)
		}
	}
	return t
}

// lostE2E: every record in a queue's log must have been processed by its
// group; every record in the pipeline's input must appear, committed, in
// its output.
func (ix *index) lostE2E(sem Semantic) tally {
	var t tally
	out := ix.plan.topicOf(sem, RoleOut)
	for _, e := range ix.scanRU {
		if ix.sem(e.Topic) != sem || !isWorkloadID(e.ID) {
			continue
		}
		switch ix.role(e.Topic) {
		case RoleQueue:
			if ix.procs.count(idKey{e.Topic, e.ID}) == 0 {
				t.add("%s at %s/%d@%d never processed", e.ID, e.Topic, e.Part, e.Off)
			}
		case RoleIn:
			if !ix.inRC(out, e.ID) {
				t.add("%s at %s/%d@%d never in committed output %s", e.ID, e.Topic, e.Part, e.Off, out)
			}
		}
	}
	return t
}

// inRC reports whether the read_committed scan of topic has id under any
// transaction.
func (ix *index) inRC(topic, id string) bool {
	return len(ix.rcIDs(topic)[id]) > 0
}

// rcIDs returns id → offsets of the read_committed scan of topic, built
// once per topic.
func (ix *index) rcIDs(topic string) map[string][]*Event {
	if ix.rcByTopic == nil {
		ix.rcByTopic = map[string]map[string][]*Event{}
	}
	m, ok := ix.rcByTopic[topic]
	if !ok {
		m = map[string][]*Event{}
		for _, e := range ix.scanRC {
			if e.Topic == topic {
				m[e.ID] = append(m[e.ID], e)
			}
		}
		ix.rcByTopic[topic] = m
	}
	return m
}

// isWorkloadID reports whether id was written by a workload (not the fence
// or a foreign record).
func isWorkloadID(id string) bool {
	_, _, ok := splitID(id)
	return ok
}

// dupLog: an id written once by its producer must sit at one offset. Queue
// and pipeline-input topics are checked read_uncommitted; transactional
// topics read_committed (aborted copies are not duplicates).
func (ix *index) dupLog(sem Semantic) tally {
	var t tally
	for _, tpl := range ix.plan.Topics {
		if tpl.Semantic != sem {
			continue
		}
		switch tpl.Role {
		case RoleQueue, RoleIn:
			for _, e := range ix.scanRU {
				if e.Topic != tpl.Name || !isWorkloadID(e.ID) {
					continue
				}
				k := idKey{e.Topic, e.ID}
				if ix.ru.count(k) > 1 && ix.ru.first[k] == e {
					t.add("%s at %s", e.ID, fmtEvents(ix.ru.get(k)))
				}
			}
		case RoleTxn:
			ids := ix.rcIDs(tpl.Name)
			for _, id := range sortedKeys(ids) {
				if evs := ids[id]; len(evs) > 1 && isWorkloadID(id) {
					t.add("%s at %s", id, fmtEvents(evs))
				}
			}
		}
	}
	return t
}

// dupE2E: a queue record processed by more than one proc event, or a
// pipeline input id present more than once in the committed output.
func (ix *index) dupE2E(sem Semantic) tally {
	var t tally
	for _, e := range ix.scanRU {
		if ix.sem(e.Topic) != sem || ix.role(e.Topic) != RoleQueue {
			continue
		}
		k := idKey{e.Topic, e.ID}
		if n := ix.procs.count(k); n > 1 && ix.ru.first[k] == e {
			t.add("%s processed %d times: %s", e.ID, n, fmtProcs(ix.procs.get(k)))
		}
	}
	if out := ix.plan.topicOf(sem, RoleOut); out != "" {
		ids := ix.rcIDs(out)
		for _, id := range sortedKeys(ids) {
			if evs := ids[id]; len(evs) > 1 {
				t.add("%s in committed output %d times: %s", id, len(evs), fmtEvents(evs))
			}
		}
	}
	return t
}

// endToEnd counts records that made it through: processed queue records,
// pipeline output records visible read_committed, or accepted share
// records.
func (ix *index) endToEnd(sem Semantic) tally {
	var t tally
	if sem == Share {
		t.n = ix.shareAcceptedCount(sem)
		return t
	}
	for k := range ix.procs.first {
		if ix.sem(k.topic) == sem && ix.role(k.topic) == RoleQueue {
			t.n++
		}
	}
	if out := ix.plan.topicOf(sem, RoleOut); out != "" {
		t.n += len(ix.rcIDs(out))
	}
	return t
}
