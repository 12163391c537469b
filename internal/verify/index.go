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

// multi maps a record to one or more events. Almost every record has
// exactly one, which costs one map entry and no slice.
type multi struct {
	first map[idKey]*Event
	more  map[idKey][]*Event // second and later events
}

func newMulti() multi { return multi{first: map[idKey]*Event{}, more: map[idKey][]*Event{}} }

func (m *multi) add(k idKey, e *Event) {
	if _, ok := m.first[k]; !ok {
		m.first[k] = e
		return
	}
	m.more[k] = append(m.more[k], e)
}

// count is the number of events of k.
func (m *multi) count(k idKey) int {
	if _, ok := m.first[k]; !ok {
		return 0
	}
	return 1 + len(m.more[k])
}

// get returns the events of k in insertion order.
func (m *multi) get(k idKey) []*Event {
	f, ok := m.first[k]
	if !ok {
		return nil
	}
	return append([]*Event{f}, m.more[k]...)
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
	// ru: (topic, id) → its records in the read_uncommitted scan; rcKeys:
	// (topic, id, txn) present in the read_committed scan.
	ru     multi
	rcKeys map[recKey]int
	// dataOffs: per partition, the read_uncommitted scan's records sorted
	// by offset (gaps are control records or the fence).
	dataOffs map[tp][]*Event

	txns      map[string]*txnInfo
	acks      []*Event
	procs     multi           // processed by a group member (queues: consumers; in: pipeline)
	commits   []*Event        // successful offset commits (group or transactional)
	rcReads   []*Event        // live read_committed reads
	drained   map[string]bool // readers that read up to the fence
	ends      map[tp]int64    // log end offsets at the end of the run
	groupOffs []*Event        // final committed offsets
	sends     int
	faults    []*Event

	rcByTopic map[string]map[string][]*Event // built lazily by rcIDs

	share shareIndex
}

// newIndex builds the index in one pass over events.
func newIndex(plan *Plan, events []Event) *index {
	ix := &index{
		plan: plan, topics: map[string]TopicPlan{},
		ru: newMulti(), rcKeys: map[recKey]int{}, dataOffs: map[tp][]*Event{},
		txns: map[string]*txnInfo{}, procs: newMulti(),
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
		sort.SliceStable(offs, func(i, j int) bool { return offs[i].Off < offs[j].Off })
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
		ix.procs.add(idKey{e.Topic, e.ID}, e)
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
		ix.noteHider(e)
	case KindExit:
		ix.noteHider(e)
	case KindDeliver, KindShareAck, KindShareStart:
		ix.addShare(e)
	}
}

func (ix *index) addScan(e *Event) {
	if e.Iso == ReadCommitted {
		ix.scanRC = append(ix.scanRC, e)
		ix.rcKeys[recKey{e.Topic, e.ID, e.Txn}]++
		return
	}
	ix.scanRU = append(ix.scanRU, e)
	ix.ru.add(idKey{e.Topic, e.ID}, e)
	p := tp{e.Topic, e.Part}
	ix.dataOffs[p] = append(ix.dataOffs[p], e)
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

// lastDataBefore returns the read_uncommitted scan's record with the
// largest offset below off in the partition.
func (ix *index) lastDataBefore(p tp, off int64) (*Event, bool) {
	offs := ix.dataOffs[p]
	i := sort.Search(len(offs), func(i int) bool { return offs[i].Off >= off })
	if i == 0 {
		return nil, false
	}
	return offs[i-1], true
}

// firstProc returns the earliest time a group member processed the record
// the scan found at e's offset.
func (ix *index) firstProc(e *Event) (int64, bool) {
	var t int64
	found := false
	for _, p := range ix.procs.get(idKey{e.Topic, e.ID}) {
		if p.Part == e.Part && p.Off == e.Off && (!found || p.T < t) {
			t, found = p.T, true
		}
	}
	return t, found
}

// recordsChecked counts distinct records: every record of the end-of-run
// read_uncommitted scan plus acknowledged writes that scan did not find.
func (ix *index) recordsChecked() int {
	n := len(ix.ru.first)
	for _, a := range ix.acks {
		if ix.ru.count(idKey{a.Topic, a.ID}) == 0 {
			n++
		}
	}
	return n
}
