package txn_test

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// BL-08 with a delaying proxy: T1 adds p0 and sends A, which the proxy
// holds; the client aborts T1 (ABORT marker at p0); the held Produce then
// lands. Kafka before KIP-890 appended A after the marker, a hanging
// transaction. Kawa refuses it, and the LSO keeps up with the high
// watermark while plain records keep coming.
func TestDelayedProduceAfterAbortRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		endTxn  int16 // EndTxn version cap: 4 = TV1, 5 = TV2
		refusal int16
	}{
		{"TV1", 4, kerr.TransactionAbortable.Code},
		{"TV2", 5, kerr.InvalidProducerEpoch.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := kawatest.NewBroker(t)
			topic := name("bl08")
			k.CreateTopic(topic, 1, nil)
			px, err := proxy.New(k.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { px.Close() })
			hold := make(chan struct{})
			held := make(chan struct{}, 1)
			px.OnRequest(func(f proxy.Frame) proxy.Action {
				if f.Key == int16(kmsg.Produce) {
					select {
					case held <- struct{}{}:
					default:
					}
					return proxy.Action{Hold: hold}
				}
				return proxy.Action{}
			})
			direct := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: tc.endTxn})
			delayed := &raw{t: t, cl: k.Client(kgo.SeedBrokers(px.Addr()), kgo.MaxVersions(rawVersions(nil)))}
			id := name("tx")
			p := direct.mustInit(id, 60000, nil)
			direct.addPartitions(id, p, topic, 0)
			type result struct{ code int16 }
			res := make(chan result, 1)
			go func() {
				code, _ := delayed.produce(&id, p, topic, 0, 0, "A")
				res <- result{code}
			}()
			<-held
			if e := direct.endTxn(id, p, false); e.ErrorCode != 0 {
				t.Fatalf("abort: %s", codeName(e.ErrorCode))
			}
			direct.waitState(id, "CompleteAbort")
			close(hold)
			if got := <-res; got.code != tc.refusal {
				t.Fatalf("delayed produce: %s, want %s", codeName(got.code), codeName(tc.refusal))
			}
			plain := &pid{id: -1, epoch: -1}
			for _, v := range []string{"n1", "n2"} {
				if code, _ := direct.produce(nil, plain, topic, 0, -1, v); code != 0 {
					t.Fatal(codeName(code))
				}
			}
			if c, u := direct.settled(topic, 0, 3); c != 3 || u != 3 {
				t.Fatalf("LSO %d HW %d, want 3 and 3 (marker, n1, n2)", c, u)
			}
			if v := readAll(t, k, topic, true, 2); !slices.Equal(v, []string{"n1", "n2"}) {
				t.Fatalf("read_committed: %q", v)
			}
		})
	}
}

// BL-06: T1's batch (seq 0) is appended but its answer is lost; T1 aborts;
// T2 sends a different record again as seq 0. It must never be answered as a
// duplicate of T1's aborted batch: under TV1 the broker refuses the stale
// sequence (OUT_OF_ORDER_SEQUENCE_NUMBER) and the client re-initialises
// (KIP-360); under TV2 the epoch moved at EndTxn, so the stale epoch is
// refused. Either way the record is sent as seq 0 of the new epoch and is
// visible after T2 commits.
func TestAbortedBatchNeverDeduplicatesNextTransaction(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	for _, tc := range []struct {
		endTxn int16
		stale  int16
		at     int64 // T2's offset: after T1, its ABORT marker and, under TV1, the ABORT of the re-init
	}{{4, kerr.OutOfOrderSequenceNumber.Code, 3}, {5, kerr.InvalidProducerEpoch.Code, 2}} {
		topic := name("bl06")
		k.CreateTopic(topic, 1, nil)
		r := newRaw(t, k, map[kmsg.Key]int16{kmsg.EndTxn: tc.endTxn})
		id := name("tx")
		p := r.mustInit(id, 60000, nil)
		r.addPartitions(id, p, topic, 0)
		if code, off := r.produce(&id, p, topic, 0, 0, "T1"); code != 0 || off != 0 {
			t.Fatalf("T1: %s", codeName(code))
		}
		e := r.endTxn(id, p, false)
		if e.ErrorCode != 0 {
			t.Fatal(codeName(e.ErrorCode))
		}
		r.waitState(id, "CompleteAbort")
		if tc.endTxn >= 5 {
			if code := r.addPartitions(id, p, topic, 0); code != kerr.ProducerFenced.Code {
				t.Fatalf("TV2: AddPartitionsToTxn with the stale epoch: %s", codeName(code))
			}
		} else {
			r.addPartitions(id, p, topic, 0)
		}
		if code, off := r.produce(&id, p, topic, 0, 0, "T2"); code != tc.stale {
			t.Fatalf("EndTxn v%d: T2 as seq 0 of the old epoch: %s at %d, want %s", tc.endTxn, codeName(code), off, codeName(tc.stale))
		}
		next := &pid{id: e.ProducerID, epoch: e.ProducerEpoch}
		if tc.endTxn < 5 {
			next = r.mustInit(id, 60000, p) // KIP-360 bump after the sequence error
			if code, _ := r.produce(&id, next, topic, 0, 0, "T2"); code != kerr.TransactionAbortable.Code {
				t.Fatalf("TV1: produce before AddPartitionsToTxn: %s", codeName(code))
			}
		}
		if next.epoch != p.epoch+1 {
			t.Fatalf("EndTxn v%d: new epoch %d, want %d", tc.endTxn, next.epoch, p.epoch+1)
		}
		r.addPartitions(id, next, topic, 0)
		if code, off := r.produce(&id, next, topic, 0, 0, "T2"); code != 0 || off != tc.at {
			t.Fatalf("T2 as seq 0 of epoch %d: %s at %d, want offset %d", next.epoch, codeName(code), off, tc.at)
		}
		if e := r.endTxn(id, next, true); e.ErrorCode != 0 {
			t.Fatal(codeName(e.ErrorCode))
		}
		waitVisible(t, k, topic, []string{"T2"})
	}
}
