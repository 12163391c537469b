package verify

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// synthHistory builds a history of about n records shaped like a real run's:
// a third each through the at-most-once and at-least-once queues (send, ack,
// proc, scan, a commit per ten records) and a third through the exactly-once
// pipeline (input send, ack, scan, proc; output send, ack, both scans; a
// transaction and its commits per ten records).
func synthHistory(n int) (*Plan, []Event) {
	plan := NewPlan(PlanOptions{RunID: "m", Semantics: AllSemantics, Partitions: 3})
	evs := make([]Event, 0, n*6)
	t := int64(0)
	add := func(e Event) { t++; e.T = t; evs = append(evs, e) }
	offs := map[tp]int64{}
	write := func(w string, seq int64, topic string) (string, int32, int64) {
		id := recordID(w, seq)
		p := int32(seq % 3)
		o := offs[tp{topic, p}]
		offs[tp{topic, p}]++
		add(Event{Kind: KindSend, W: w, ID: id, Topic: topic})
		add(Event{Kind: KindAck, W: w, ID: id, Topic: topic, Part: p, Off: o, Lat: 800})
		add(Event{Kind: KindScan, ID: id, Topic: topic, Part: p, Off: o, Iso: ReadUncommitted})
		return id, p, o
	}
	for i := range int64(n / 3) {
		for _, sem := range []Semantic{AtMostOnce, AtLeastOnce} {
			topic := plan.topicOf(sem, RoleQueue)
			id, p, o := write(sem.short()+"-p0.1", i+1, topic)
			add(Event{Kind: KindProc, W: sem.short() + "-c0.1", ID: id, Topic: topic, Part: p, Off: o, Gen: 1})
			if i%10 == 9 {
				add(Event{Kind: KindCommit, W: sem.short() + "-c0.1", Topic: topic, Part: p, Off: o + 1, Gen: 1})
			}
		}
		in, out := plan.topicOf(ExactlyOnce, RoleIn), plan.topicOf(ExactlyOnce, RoleOut)
		id, p, o := write("eos-p0.1", i+1, in)
		txn := "eos-x0.1/" + strconv.FormatInt(i/10, 10)
		add(Event{Kind: KindProc, W: "eos-x0.1", ID: id, Topic: in, Part: p, Off: o, Gen: 1, Iso: ReadCommitted})
		add(Event{Kind: KindSend, W: "eos-x0.1", ID: id, Topic: out, Txn: txn})
		add(Event{Kind: KindAck, W: "eos-x0.1", ID: id, Topic: out, Part: p, Off: o, Txn: txn})
		add(Event{Kind: KindScan, ID: id, Topic: out, Part: p, Off: o, Txn: txn, Iso: ReadUncommitted})
		add(Event{Kind: KindScan, ID: id, Topic: out, Part: p, Off: o, Txn: txn, Iso: ReadCommitted})
		if i%10 == 9 || i == int64(n/3)-1 {
			add(Event{Kind: KindTxnEnd, W: "eos-x0.1", Txn: txn, Commit: true})
			add(Event{Kind: KindTxnDone, W: "eos-x0.1", Txn: txn, Commit: true})
			add(Event{Kind: KindCommit, W: "eos-x0.1", Topic: in, Part: p, Off: o + 1, Txn: txn})
		}
	}
	return plan, evs
}

// TestMeasureCheck reports check throughput and peak heap for a synthetic
// history of KAWA_VERIFY_MEASURE records (skipped when unset), e.g.
//
//	KAWA_VERIFY_MEASURE=1000000 go test -run TestMeasureCheck -v ./internal/verify
func TestMeasureCheck(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KAWA_VERIFY_MEASURE"))
	if n == 0 {
		t.Skip("set KAWA_VERIFY_MEASURE to a record count")
	}
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if v := ms.HeapInuse + ms.StackInuse; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	plan, evs := synthHistory(n)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	began := time.Now()
	c := CheckHistory(plan, evs, AllSemantics)
	took := time.Since(began)
	close(stop)
	fails := 0
	for _, f := range c.Findings {
		if !f.Pass {
			fails++
		}
	}
	fmt.Printf("records %d events %d (Event %d B) history heap %.0f MiB peak heap %.0f MiB check %.2fs = %.0f records/s, %.0f events/s, failing %d\n",
		c.Records, len(evs), unsafe.Sizeof(Event{}), float64(ms.HeapInuse)/(1<<20), float64(peak.Load())/(1<<20),
		took.Seconds(), float64(c.Records)/took.Seconds(), float64(len(evs))/took.Seconds(), fails)
	if fails != 0 {
		t.Errorf("synthetic history should be clean: %+v", c.Findings)
	}
}
