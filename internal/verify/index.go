package verify

import "sort"

// recKey names one written record: its topic, id and (for transactional
// writes) transaction tag. The pipeline writes the same id in several
// transactions when it aborts and retries, so the tag is part of the key.
type recKey struct {
	topic, id, txn string
}

// idKey is a record id within a topic.
type idKey struct {
	topic, id string
}

// tp is a topic partition.
type tp struct {
	topic string
	part  int32
}

// tpo is one offset of a topic partition.
type tpo struct {
	topic string
	part  int32
	off   int64
}

// txnInfo is what the history says about one transaction.
type txnInfo struct {
	endT            int64 // T of the txn-end event; 0 if EndTxn was never requested
	commitRequested bool
	done            bool // a txn-done event arrived
	committed       bool // done, and committed
	unknown         bool // done with an error: outcome unknown
	sends           []recKey
}

// aborted reports whether the transaction certainly did not commit: commit
// was never requested, or the abort (or failed commit decision) returned
// without error.
func (t *txnInfo) aborted() bool {
	if t == nil || !t.commitRequested {
		return true
	}
	return t.done && !t.committed && !t.unknown
}

// index is the history arranged for the checkers. Events are referenced,
// not copied.
type index struct {
	plan   *Plan
	topics map[string]TopicPlan

	scanRU []*Event // end-of-run read_uncommitted scan, every topic
	scanRC []*Event // end-of-run read_committed scan, transactional topics
	// scanned: (topic, id) → offsets in the read_uncommitted scan, and
	// (topic, id, txn) present in the read_committed scan.
	ruIDs  map[idKey][]tpo
	rcKeys map[recKey]int
	// dataOffs: per partition, the sorted offsets holding data records in
	// the read_uncommitted scan (gaps are control records or the fence).
	dataOffs map[tp][]int64

	txns      map[string]*txnInfo
	acks      []*Event
	procs     map[idKey][]*Event // processed by a group member (queues: consumers; in: pipeline)
	firstProc map[tpo]int64      // earliest T a group member processed an offset
	commits   []*Event           // successful offset commits (group or transactional)
	rcReads   []*Event           // live read_committed reads
	drained   map[string]bool    // readers that read up to the fence
	ends      map[tp]int64       // log end offsets at the end of the run
	groupOffs []*Event           // final committed offsets
	sends     int
	faults    []*Event

	rcByTopic map[string]map[string][]*Event // built lazily by rcIDs
}

// newIndex builds the index in one pass over events.
func newIndex(plan *Plan, events []Event) *index {
	ix := &index{
		plan: plan, topics: map[string]TopicPlan{},
		ruIDs: map[idKey][]tpo{}, rcKeys: map[recKey]int{}, dataOffs: map[tp][]int64{},
		txns: map[string]*txnInfo{}, procs: map[idKey][]*Event{}, firstProc: map[tpo]int64{},
		drained: map[string]bool{}, ends: map[tp]int64{},
	}
	for _, t := range plan.Topics {
		ix.topics[t.Name] = t
	}
	for i := range events {
		ix.add(&events[i])
	}
	for k := range ix.dataOffs {
		offs := ix.dataOffs[k]
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	}
	return ix
}

func (ix *index) add(e *Event) {
	switch e.Kind {
	case KindSend:
		ix.sends++
		if e.Txn != "" {
			t := ix.txn(e.Txn)
			t.sends = append(t.sends, recKey{e.Topic, e.ID, e.Txn})
		}
	case KindAck:
		ix.acks = append(ix.acks, e)
	case KindTxnEnd:
		t := ix.txn(e.Txn)
		t.endT, t.commitRequested = e.T, e.Commit
	case KindTxnDone:
		t := ix.txn(e.Txn)
		t.done, t.committed, t.unknown = true, e.Commit && e.Err == "", e.Err != ""
	case KindProc:
		k := idKey{e.Topic, e.ID}
		ix.procs[k] = append(ix.procs[k], e)
		o := tpo{e.Topic, e.Part, e.Off}
		if t, ok := ix.firstProc[o]; !ok || e.T < t {
			ix.firstProc[o] = e.T
		}
	case KindCommit:
		if e.Err == "" {
			ix.commits = append(ix.commits, e)
		}
	case KindRead:
		if e.Iso == ReadCommitted {
			ix.rcReads = append(ix.rcReads, e)
		}
	case KindDrained:
		ix.drained[e.W] = true
	case KindScan:
		ix.addScan(e)
	case KindEnd:
		ix.ends[tp{e.Topic, e.Part}] = e.Off
	case KindGroup:
		ix.groupOffs = append(ix.groupOffs, e)
	case KindFault:
		ix.faults = append(ix.faults, e)
	}
}

func (ix *index) addScan(e *Event) {
	if e.Iso == ReadCommitted {
		ix.scanRC = append(ix.scanRC, e)
		ix.rcKeys[recKey{e.Topic, e.ID, e.Txn}]++
		return
	}
	ix.scanRU = append(ix.scanRU, e)
	k := idKey{e.Topic, e.ID}
	ix.ruIDs[k] = append(ix.ruIDs[k], tpo{e.Topic, e.Part, e.Off})
	p := tp{e.Topic, e.Part}
	ix.dataOffs[p] = append(ix.dataOffs[p], e.Off)
}

func (ix *index) txn(tag string) *txnInfo {
	t := ix.txns[tag]
	if t == nil {
		t = &txnInfo{}
		ix.txns[tag] = t
	}
	return t
}

// sem returns the semantic of a topic ("" for topics not in the plan).
func (ix *index) sem(topic string) Semantic { return ix.topics[topic].Semantic }

// role returns the role of a topic.
func (ix *index) role(topic string) TopicRole { return ix.topics[topic].Role }

// lastDataBefore returns the largest data offset below off in the
// partition, per the read_uncommitted scan.
func (ix *index) lastDataBefore(p tp, off int64) (int64, bool) {
	offs := ix.dataOffs[p]
	i := sort.Search(len(offs), func(i int) bool { return offs[i] >= off })
	if i == 0 {
		return 0, false
	}
	return offs[i-1], true
}

// recordsChecked counts distinct records: every record of the end-of-run
// read_uncommitted scan plus acknowledged writes that scan did not find.
func (ix *index) recordsChecked() int {
	n := len(ix.ruIDs)
	for _, a := range ix.acks {
		if _, ok := ix.ruIDs[idKey{a.Topic, a.ID}]; !ok {
			n++
		}
	}
	return n
}
