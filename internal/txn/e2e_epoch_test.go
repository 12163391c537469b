package txn_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/txn"
)

// BL-13: one transactional.id driven to epoch 32766 (test hook); T writes A;
// a new instance's InitProducerId aborts T at 32767 and gets a new producer
// ID at epoch 0; the old producer stays fenced; later transactions commit.
// No epoch is ever negative.
func TestEpochExhaustionMovesToNewProducerID(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("bl13")
	k.CreateTopic(topic, 1, nil)
	r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 4})
	id := name("tx")
	first := r.mustInit(id, 60000, nil)
	if err := k.B.Txn().ForceEpoch(id, txn.MaxEpoch-2); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	old := txnClient(t, k, id)
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("A")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if d := r.describe(id); d.ProducerID != first.id || d.ProducerEpoch != txn.MaxEpoch-1 || d.State != "Ongoing" {
		t.Fatalf("before the fence: %d/%d %s", d.ProducerID, d.ProducerEpoch, d.State)
	}
	fresh := txnClient(t, k, id)
	produceTxn(t, fresh, topic, 1, true, "B1")
	d := r.describe(id)
	if d.ProducerID == first.id || d.ProducerEpoch < 0 || d.ProducerEpoch > 1 {
		t.Fatalf("after the fence: %d/%d, want a new producer ID at epoch 0 or 1", d.ProducerID, d.ProducerEpoch)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("A2")}).FirstErr(); err == nil {
		t.Fatal("old producer's write after exhaustion succeeded")
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("old producer's commit after exhaustion succeeded")
	}
	for i := 0; i < 3; i++ {
		produceTxn(t, fresh, topic, 1, true, "B2")
	}
	waitVisible(t, k, topic, []string{"B1", "B2", "B2", "B2"})
	ps, err := k.Admin().DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ps.EachProducer(func(ap kadm.DescribedProducer) {
		if ap.ProducerEpoch < 0 {
			t.Fatalf("producer %d has epoch %d", ap.ProducerID, ap.ProducerEpoch)
		}
		if ap.ProducerID == first.id && ap.ProducerEpoch != txn.MaxEpoch {
			t.Fatalf("old producer at epoch %d on the partition, want %d (the fencing marker)", ap.ProducerEpoch, txn.MaxEpoch)
		}
	})
}
