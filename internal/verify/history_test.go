package verify

import "fmt"

// builder hand-builds a history that is clean for every checker: each
// semantic's workload writes a few records, processes and commits them,
// and the end-of-run scans, end offsets and group offsets agree. The
// checker tests then add exactly one anomaly.
type builder struct {
	plan   *Plan
	events []Event
	t      int64
}

func newBuilder() *builder {
	b := &builder{plan: NewPlan(PlanOptions{RunID: "t", Semantics: AllSemantics, Partitions: 2})}
	b.queue(AtMostOnce)
	b.queue(AtLeastOnce)
	b.pipeline()
	b.txnWrites()
	return b
}

func (b *builder) add(e Event) *Event {
	b.t += 1000
	if e.T == 0 {
		e.T = b.t
	}
	b.events = append(b.events, e)
	return &b.events[len(b.events)-1]
}

// write emits send, ack and the read_uncommitted scan record of one id.
func (b *builder) write(producer string, seq int64, topic string, part int32, off int64) string {
	id := recordID(producer, seq)
	b.add(Event{Kind: KindSend, W: producer, ID: id, Topic: topic})
	b.add(Event{Kind: KindAck, W: producer, ID: id, Topic: topic, Part: part, Off: off, Lat: 500})
	b.add(Event{Kind: KindScan, ID: id, Topic: topic, Part: part, Off: off, Iso: ReadUncommitted})
	return id
}

// queue: producer <sem>-p0.1 writes seq 1,2 to partition 0 and 3,4 to
// partition 1; consumer <sem>-c0.1 processes them, then commits.
func (b *builder) queue(sem Semantic) {
	topic, group := b.plan.topicOf(sem, RoleQueue), b.plan.Groups[0].Name
	for _, g := range b.plan.Groups {
		if g.Topic == topic {
			group = g.Name
		}
	}
	p, c := sem.short()+"-p0.1", sem.short()+"-c0.1"
	for i, seq := range []int64{1, 2, 3, 4} {
		part, off := int32(i/2), int64(i%2)
		id := b.write(p, seq, topic, part, off)
		b.add(Event{Kind: KindProc, W: c, ID: id, Topic: topic, Part: part, Off: off, Gen: 1, Iso: ReadUncommitted})
	}
	for part := range int32(2) {
		b.add(Event{Kind: KindCommit, W: c, Topic: topic, Part: part, Off: 2, Gen: 1})
		b.add(Event{Kind: KindEnd, Topic: topic, Part: part, Off: 2})
		b.add(Event{Kind: KindGroup, W: group, Topic: topic, Part: part, Off: 2})
	}
}

// pipeline: eos-p0.1 writes four input records; eos-x0.1 transforms them
// in one committed transaction; the output is visible read_committed.
func (b *builder) pipeline() {
	in, out := b.plan.topicOf(ExactlyOnce, RoleIn), b.plan.topicOf(ExactlyOnce, RoleOut)
	const x, txn = "eos-x0.1", "eos-x0.1/1"
	var ids []string
	for i, seq := range []int64{1, 2, 3, 4} {
		ids = append(ids, b.write("eos-p0.1", seq, in, int32(i/2), int64(i%2)))
	}
	for i, id := range ids {
		b.add(Event{Kind: KindProc, W: x, ID: id, Topic: in, Part: int32(i / 2), Off: int64(i % 2), Gen: 1, Iso: ReadCommitted})
	}
	for i, id := range ids {
		b.add(Event{Kind: KindSend, W: x, ID: id, Topic: out, Txn: txn})
		b.add(Event{Kind: KindAck, W: x, ID: id, Topic: out, Part: int32(i % 2), Off: int64(i / 2), Txn: txn})
	}
	b.add(Event{Kind: KindTxnEnd, W: x, Txn: txn, Commit: true})
	b.add(Event{Kind: KindTxnDone, W: x, Txn: txn, Commit: true})
	for part := range int32(2) {
		b.add(Event{Kind: KindCommit, W: x, Topic: in, Part: part, Off: 2, Gen: 1, Txn: txn})
		b.add(Event{Kind: KindEnd, Topic: in, Part: part, Off: 2})
		b.add(Event{Kind: KindGroup, W: "kv-t-eos", Topic: in, Part: part, Off: 2})
		b.add(Event{Kind: KindEnd, Topic: out, Part: part, Off: 3}) // two records and a marker
	}
	for i, id := range ids {
		e := Event{Kind: KindScan, ID: id, Txn: txn, Topic: out, Part: int32(i % 2), Off: int64(i / 2)}
		e.Iso = ReadUncommitted
		b.add(e)
		e.Iso = ReadCommitted
		b.add(e)
	}
}

// txnWrites: eos-t0.1 commits txn 1 (seq 1, 2 on partitions 0, 1) and
// aborts txn 2 (seq 3, 4); the read_committed reader sees txn 1 whole.
func (b *builder) txnWrites() {
	topic := b.plan.topicOf(ExactlyOnce, RoleTxn)
	const w, rc = "eos-t0.1", "eos-rrc.1"
	for n, commit := range []bool{true, false} {
		txn := fmt.Sprintf("%s/%d", w, n+1)
		var recs []Event
		for part := range int32(2) {
			id := recordID(w, int64(2*n)+int64(part)+1)
			off := int64(2 * n) // txn 1 at offset 0, its marker at 1; txn 2 at 2
			b.add(Event{Kind: KindSend, W: w, ID: id, Topic: topic, Txn: txn})
			b.add(Event{Kind: KindAck, W: w, ID: id, Topic: topic, Part: part, Off: off, Txn: txn})
			recs = append(recs, Event{ID: id, Txn: txn, Topic: topic, Part: part, Off: off})
		}
		b.add(Event{Kind: KindTxnEnd, W: w, Txn: txn, Commit: commit})
		b.add(Event{Kind: KindTxnDone, W: w, Txn: txn, Commit: commit})
		for _, r := range recs {
			r.Kind, r.Iso = KindScan, ReadUncommitted
			b.add(r)
			if commit {
				r.Iso = ReadCommitted
				b.add(r)
				r.Kind, r.W, r.LSO = KindRead, rc, r.Off+2
				b.add(r)
			}
		}
	}
	b.add(Event{Kind: KindDrained, W: rc, Iso: ReadCommitted})
	for part := range int32(2) {
		b.add(Event{Kind: KindEnd, Topic: topic, Part: part, Off: 4})
	}
}

// find returns the first event matching f.
func (b *builder) find(f func(e *Event) bool) *Event {
	for i := range b.events {
		if f(&b.events[i]) {
			return &b.events[i]
		}
	}
	panic("no such event")
}

// remove drops the first event matching f.
func (b *builder) remove(f func(e *Event) bool) {
	for i := range b.events {
		if f(&b.events[i]) {
			b.events = append(b.events[:i], b.events[i+1:]...)
			return
		}
	}
	panic("no such event")
}
