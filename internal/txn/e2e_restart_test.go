package txn_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// __transaction_state is replayed on start: producer IDs and epochs survive
// a restart (a zombie from before it stays fenced, a new instance gets the
// next epoch), and an Ongoing transaction is still aborted by its timeout.
func TestTransactionStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("restart")
	k.CreateTopic(topic, 1, nil)
	r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 4})
	done, open := name("done"), name("open")
	p := r.mustInit(done, 60000, nil)
	r.addPartitions(done, p, topic, 0)
	r.produce(&done, p, topic, 0, 0, "kept")
	if e := r.endTxn(done, p, true); e.ErrorCode != 0 {
		t.Fatal(codeName(e.ErrorCode))
	}
	r.waitState(done, "CompleteCommit")
	q := r.mustInit(open, 1000, nil)
	r.addPartitions(open, q, topic, 0)
	r.produce(&open, q, topic, 0, 0, "dropped")

	k = k.Restart()
	r = newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: 4})
	if d := r.describe(done); d.State != "CompleteCommit" || d.ProducerID != p.id || d.ProducerEpoch != p.epoch {
		t.Fatalf("after restart: %s %d/%d, want CompleteCommit %d/%d", d.State, d.ProducerID, d.ProducerEpoch, p.id, p.epoch)
	}
	if p2 := r.mustInit(done, 60000, nil); p2.id != p.id || p2.epoch != p.epoch+1 {
		t.Fatalf("InitProducerId after restart: %d/%d", p2.id, p2.epoch)
	}
	if e := r.endTxn(done, p, false); e.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("pre-restart epoch after the new init: %s", codeName(e.ErrorCode))
	}
	if d := r.waitState(open, "CompleteAbort"); d.ProducerEpoch != q.epoch+1 {
		t.Fatalf("timed-out transaction after restart: epoch %d", d.ProducerEpoch)
	}
	waitVisible(t, k, topic, []string{"kept"})
}
