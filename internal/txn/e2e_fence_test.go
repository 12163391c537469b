package txn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// Two producers with one transactional.id: the older one's next write and
// EndTxn fail with the fencing error and nothing it wrote becomes visible.
func TestSecondProducerFencesFirst(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("fence")
	k.CreateTopic(topic, 2, nil)
	id := name("tx")
	ctx := ctxT(t)
	old := txnClient(t, k, id)
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("old-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := txnClient(t, k, id)
	produceTxn(t, fresh, topic, 2, true, "new-1") // its InitProducerId fences old (aborting old-1)
	err := old.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("old-2")}).FirstErr()
	if !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("fenced producer's write: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("fenced producer's commit succeeded")
	}
	produceTxn(t, fresh, topic, 2, true, "new-2", "new-3")
	waitVisible(t, k, topic, []string{"new-1", "new-2", "new-3"})

	// The same over raw requests, for the exact codes per version.
	r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 1})
	r3 := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 3})
	id2 := name("tx")
	p1 := r.mustInit(id2, 60000, nil)
	r.addPartitions(id2, p1, topic, 0)
	r.produce(&id2, p1, topic, 0, 0, "zombie-1")
	p2 := r.mustInit(id2, 60000, nil) // aborts p1's transaction
	if p2.id != p1.id || p2.epoch != p1.epoch+2 {
		t.Fatalf("new instance got %d/%d after %d/%d", p2.id, p2.epoch, p1.id, p1.epoch)
	}
	if code, _ := r.produce(&id2, p1, topic, 0, 1, "zombie-2"); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie produce: %s", codeName(code))
	}
	if code, _ := r.produce(&id2, p1, topic, 1, 0, "zombie-3"); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie produce to a partition never in its transaction: %s", codeName(code))
	}
	if code := r.addPartitions(id2, p1, topic, 1); code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie AddPartitionsToTxn v3: %s", codeName(code))
	}
	if e := r.endTxn(id2, p1, true); e.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie EndTxn v1: %s", codeName(e.ErrorCode))
	}
	if e := r3.endTxn(id2, p1, true); e.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("zombie EndTxn v3: %s", codeName(e.ErrorCode))
	}
	waitVisible(t, k, topic, []string{"new-1", "new-2", "new-3"})
	for p := int32(0); p < 2; p++ {
		if c, u := r.settled(topic, p, -1); c != u {
			t.Fatalf("partition %d: LSO %d below HW %d: something stayed unstable", p, c, u)
		}
	}
}

// BL-12: producers with different transactional.ids never fence each other.
func TestDifferentIDsNeverFence(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("bl12")
	k.CreateTopic(topic, 1, nil)
	ctx := ctxT(t)
	x := txnClient(t, k, name("jt-1"))
	y := txnClient(t, k, name("jt-0"))
	for _, cl := range []*kgo.Client{x, y} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("0")}).FirstErr(); err != nil {
		t.Fatalf("x produce: %v", err)
	}
	if err := x.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("x commit: %v", err)
	}
	if err := y.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatalf("y produce: %v", err)
	}
	if err := y.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("y commit: %v", err)
	}
	waitVisible(t, k, topic, []string{"0", "1"})
}

// BL-11: transaction.timeout.ms = 1000 and a silent producer: the
// coordinator aborts (A invisible) and bumps the epoch; B gets
// INVALID_PRODUCER_EPOCH, EndTxn PRODUCER_FENCED (INVALID_PRODUCER_EPOCH on
// v1); InitProducerId(P, e) then succeeds with a newer epoch; the LSO moves
// on. franz-go, likewise, never reports the commit.
func TestTimeoutAbortsAndFences(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("bl11")
	k.CreateTopic(topic, 1, nil)
	r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 3})
	r1 := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 1})
	id := name("tx")
	p := r.mustInit(id, 1000, nil)
	r.addPartitions(id, p, topic, 0)
	if code, off := r.produce(&id, p, topic, 0, 0, "A"); code != 0 || off != 0 {
		t.Fatalf("A: %s", codeName(code))
	}
	d := r.waitState(id, "CompleteAbort") // the client stays silent
	if d.ProducerEpoch != p.epoch+1 {
		t.Fatalf("epoch after timeout %d, want %d", d.ProducerEpoch, p.epoch+1)
	}
	if code, _ := r.produce(&id, p, topic, 0, 1, "B"); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("B: %s, want INVALID_PRODUCER_EPOCH", codeName(code))
	}
	if e := r.endTxn(id, p, true); e.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn v3: %s", codeName(e.ErrorCode))
	}
	if e := r1.endTxn(id, p, true); e.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("EndTxn v1: %s", codeName(e.ErrorCode))
	}
	p2, code := r.initPID(id, 1000, p)
	if code != 0 || p2.id != p.id || p2.epoch <= p.epoch {
		t.Fatalf("InitProducerId(P, e): %s %d/%d", codeName(code), p2.id, p2.epoch)
	}
	if c, u := r.settled(topic, 0, 2); c != 2 || u != 2 {
		t.Fatalf("LSO %d HW %d, want 2 and 2", c, u)
	}
	if v := readAll(t, k, topic, true, -1); len(v) != 0 {
		t.Fatalf("read_committed saw %q", v)
	}

	// franz-go: a pause past the timeout is never reported as a commit.
	tid := name("tx")
	cl := txnClient(t, k, tid, kgo.TransactionTimeout(1000*1e6))
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("franz-A")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.waitState(tid, "CompleteAbort")
	perr := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("franz-B")}).FirstErr()
	eerr := cl.EndTransaction(ctx, kgo.TryCommit)
	if perr == nil && eerr == nil {
		t.Fatal("franz-go committed a transaction the coordinator aborted")
	}
	if v := readAll(t, k, topic, true, -1); len(v) != 0 {
		t.Fatalf("read_committed saw %q", v)
	}
}

// BL-10: InitProducerId(P, e) in the middle of a transaction aborts it first
// (A and B invisible), then returns a newer epoch; the commit under it
// covers only C.
func TestKIP360InitAbortsOpenTransaction(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("bl10")
	k.CreateTopic(topic, 2, nil)
	r := newRaw(t, k, nil)
	id := name("tx")
	p := r.mustInit(id, 60000, nil)
	r.addPartitions(id, p, topic, 0, 1)
	if code, _ := r.produce(&id, p, topic, 0, 0, "A"); code != 0 {
		t.Fatal(codeName(code))
	}
	if code, _ := r.produce(&id, p, topic, 1, 7, "B"); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("B: %s, want OUT_OF_ORDER_SEQUENCE_NUMBER", codeName(code))
	}
	if _, code := r.initPID(id, 60000, p); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("InitProducerId(P, e) with T open: %s", codeName(code))
	}
	p2 := r.mustInit(id, 60000, p)
	if p2.id != p.id || p2.epoch != p.epoch+1 {
		t.Fatalf("after KIP-360: %d/%d", p2.id, p2.epoch)
	}
	if e := r.endTxn(id, p, true); e.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("commit of T under the old epoch: %s", codeName(e.ErrorCode))
	}
	r.addPartitions(id, p2, topic, 0)
	if code, _ := r.produce(&id, p2, topic, 0, 0, "C"); code != 0 {
		t.Fatalf("C: %s", codeName(code))
	}
	if e := r.endTxn(id, p2, true); e.ErrorCode != 0 {
		t.Fatal(codeName(e.ErrorCode))
	}
	waitVisible(t, k, topic, []string{"C"})
}

// BL-08: a transactional write to a partition the transaction did not add is
// refused (INVALID_TXN_STATE before Produce v11, TRANSACTION_ABORTABLE from
// v11) and nothing stays unstable.
func TestWriteToPartitionNotAdded(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("bl08")
	k.CreateTopic(topic, 2, nil)
	r11 := newRaw(t, k, nil)
	r10 := newRaw(t, k, map[kmsg.Key]int16{kmsg.Produce: 10})
	id := name("tx")
	p := r11.mustInit(id, 60000, nil)
	r11.addPartitions(id, p, topic, 0)
	if code, _ := r11.produce(&id, p, topic, 1, 0, "x"); code != kerr.TransactionAbortable.Code {
		t.Fatalf("Produce v11: %s, want TRANSACTION_ABORTABLE", codeName(code))
	}
	if code, _ := r10.produce(&id, p, topic, 1, 0, "x"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("Produce v10: %s, want INVALID_TXN_STATE", codeName(code))
	}
	if code, _ := r11.produceBatch(nil, true, p, topic, 1, 0, "x"); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch without transactional.id: %s", codeName(code))
	}
	other := name("tx")
	if code, _ := r11.produce(&other, p, topic, 0, 0, "x"); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("unknown transactional.id: %s", codeName(code))
	}
	if e := r11.endTxn(id, p, false); e.ErrorCode != 0 {
		t.Fatal(codeName(e.ErrorCode))
	}
	r11.waitState(id, "CompleteAbort")
	for part := int32(0); part < 2; part++ {
		c, u := r11.settled(topic, part, -1)
		if c != u || (part == 1 && u != 0) {
			t.Fatalf("partition %d: LSO %d HW %d", part, c, u)
		}
	}
	// After the abort the partition it had added refuses the transaction
	// too: under TV2 (EndTxn v5) the epoch has moved on...
	if code, _ := r11.produce(&id, p, topic, 0, 0, "late"); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("write after a TV2 abort: %s", codeName(code))
	}
	// ...under TV1 the partition is no longer in a transaction.
	r4 := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 4})
	id1 := name("tx")
	p1 := r4.mustInit(id1, 60000, nil)
	r4.addPartitions(id1, p1, topic, 0)
	if e := r4.endTxn(id1, p1, false); e.ErrorCode != 0 || e.ProducerEpoch != -1 {
		t.Fatalf("TV1 abort: %s epoch %d", codeName(e.ErrorCode), e.ProducerEpoch)
	}
	r4.waitState(id1, "CompleteAbort")
	if code, _ := r4.produce(&id1, p1, topic, 0, 0, "late"); code != kerr.TransactionAbortable.Code {
		t.Fatalf("write after a TV1 abort: %s", codeName(code))
	}
	if v := readAll(t, k, topic, false, -1); !slices.Equal(v, []string(nil)) {
		t.Fatalf("records appended: %q", v)
	}
}
