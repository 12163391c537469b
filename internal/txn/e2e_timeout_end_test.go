package txn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// The delivery-SDK report: a paused EOS worker whose transaction the
// coordinator aborted on transaction.timeout.ms. Kafka fences the old epoch
// (PrepareEpochFence, KIP-890) and answers its next EndTxn, abort or commit,
// with PRODUCER_FENCED at once (EndTxn v3+; the epoch check comes before any
// state check, so never CONCURRENT_TRANSACTIONS), and under TV2 (v5) the
// fenced epoch is not taken for a retry of the coordinator's own abort.
func TestEndTxnAfterTimeoutAbortIsFenced(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("paused")
	k.CreateTopic(topic, 1, nil)
	for _, v := range []int16{3, 4, 5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: v})
			id := name("tx")
			p := r.mustInit(id, 500, nil)
			if code := r.addPartitions(id, p, topic, 0); code != 0 {
				t.Fatal(codeName(code))
			}
			if code, _ := r.produce(&id, p, topic, 0, 0, "paused"); code != 0 {
				t.Fatal(codeName(code))
			}
			d := r.waitState(id, "CompleteAbort") // the worker is paused
			if d.ProducerEpoch != p.epoch+1 {
				t.Fatalf("epoch after the timeout abort %d, want %d", d.ProducerEpoch, p.epoch+1)
			}
			for _, commit := range []bool{false, true} {
				start := time.Now()
				e := r.endTxn(id, p, commit)
				if e.ErrorCode != kerr.ProducerFenced.Code {
					t.Errorf("EndTxn v%d commit=%v from the fenced epoch: %s, want PRODUCER_FENCED", v, commit, codeName(e.ErrorCode))
				}
				if e.ProducerID != -1 || e.ProducerEpoch != -1 {
					t.Errorf("EndTxn v%d commit=%v: returned %d/%d, want -1/-1", v, commit, e.ProducerID, e.ProducerEpoch)
				}
				if el := time.Since(start); el > 2*time.Second {
					t.Errorf("EndTxn v%d commit=%v took %v", v, commit, el)
				}
			}
			if code := r.addPartitions(id, p, topic, 0); code != kerr.ProducerFenced.Code {
				t.Errorf("AddPartitionsToTxn from the fenced epoch: %s, want PRODUCER_FENCED", codeName(code))
			}
			if code, _ := r.produce(&id, p, topic, 0, 1, "late"); code != kerr.InvalidProducerEpoch.Code {
				t.Errorf("produce from the fenced epoch: %s, want INVALID_PRODUCER_EPOCH", codeName(code))
			}
			if d := r.describe(id); d.State != "CompleteAbort" || d.ProducerEpoch != p.epoch+1 {
				t.Errorf("after the fenced requests: %s epoch %d, want CompleteAbort epoch %d", d.State, d.ProducerEpoch, p.epoch+1)
			}
		})
	}
}

// The same with franz-go as the SDK runs it: begin, produce, pause past
// transaction.timeout.ms, then abort. The abort ends at once with
// PRODUCER_FENCED (as against Kafka; franz-go then needs a new client), not
// by the caller's deadline, and a new client with the transactional.id
// commits.
func TestFranzGoAbortAfterTimeoutReturns(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("paused")
	k.CreateTopic(topic, 1, nil)
	r := newRaw(t, k, nil)
	id := name("tx")
	cl := txnClient(t, k, id, kgo.TransactionTimeout(500*time.Millisecond))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("paused")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.waitState(id, "CompleteAbort")
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	err := cl.EndTransaction(actx, kgo.TryAbort)
	if el := time.Since(start); !errors.Is(err, kerr.ProducerFenced) || el > 5*time.Second {
		t.Fatalf("abort after the coordinator's abort: %v after %v, want PRODUCER_FENCED at once", err, el)
	}
	produceTxn(t, txnClient(t, k, id), topic, 1, true, "after")
	waitVisible(t, k, topic, []string{"after"})
}
