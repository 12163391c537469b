package broker_test

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestIdempotentProduceWire drives the producer-state rules with raw Produce
// requests (issue 3 acceptance): a resent batch gets its original base offset
// and is stored once, a skipped sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, an
// old epoch is INVALID_PRODUCER_EPOCH, and nothing refused is appended.
func TestIdempotentProduceWire(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("idem", 1, nil)
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)

	first := p.batch(0, seqValues("a", 0, 5)...)
	c.mustProduce("idem", 0, first, 0)
	c.mustProduce("idem", 0, first, 0) // the identical batch again: a retry
	c.wantCode("idem", 0, p.batch(10, "gap"), kerr.OutOfOrderSequenceNumber)
	c.mustProduce("idem", 0, p.batch(5, seqValues("a", 5, 5)...), 5)

	p1 := bumpEpoch(t, k.Addr, p) // KIP-360
	if p1.pid != p.pid || p1.epoch != p.epoch+1 {
		t.Fatalf("InitProducerId(%d, %d) gave (%d, %d), want the same ID at epoch %d", p.pid, p.epoch, p1.pid, p1.epoch, p.epoch+1)
	}
	c.mustProduce("idem", 0, p1.batch(0, "b-0"), 10)
	c.wantCode("idem", 0, p.batch(10, "late"), kerr.InvalidProducerEpoch)
	c.wantCode("idem", 0, first, kerr.InvalidProducerEpoch) // no duplicate answer across epochs

	want := append(seqValues("a", 0, 10), "b-0")
	wantPartitionLog(t, k.Addr, "idem", 0, 0, want)
}

// TestIdempotentWindow: the last five batches answer as duplicates; a retry
// of the sixth-oldest is OUT_OF_ORDER_SEQUENCE_NUMBER, never a second copy.
func TestIdempotentWindow(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("window", 1, nil)
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	var batches [][]byte
	for i := range 6 {
		b := p.batch(int32(2*i), seqValues("w", 2*i, 2)...)
		batches = append(batches, b)
		c.mustProduce("window", 0, b, int64(2*i))
	}
	for i := 5; i >= 1; i-- {
		c.mustProduce("window", 0, batches[i], int64(2*i))
	}
	c.wantCode("window", 0, batches[0], kerr.OutOfOrderSequenceNumber)
	wantPartitionLog(t, k.Addr, "window", 0, 0, seqValues("w", 0, 12))
}

// TestIdempotentLogAppendTime: on a LogAppendTime topic a duplicate is
// answered with the append time the original got, not a new one.
func TestIdempotentLogAppendTime(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	lat := "LogAppendTime"
	k.CreateTopic("lat", 1, map[string]*string{"message.timestamp.type": &lat})
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	b := p.batchAt(1000, 0, "x")
	first := c.produce("lat", 0, b)
	if first.code != 0 || first.appendTime < 1000 {
		t.Fatalf("first append: %v, append time %d", first, first.appendTime)
	}
	again := c.produce("lat", 0, b)
	if again.code != 0 || again.base != first.base || again.appendTime != first.appendTime {
		t.Fatalf("retry: %v at append time %d, want base %d at append time %d", again, again.appendTime, first.base, first.appendTime)
	}
}

// TestNonIdempotentBatchesUnaffected: batches with producer ID -1 are never
// deduplicated.
func TestNonIdempotentBatchesUnaffected(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("plain", 1, nil)
	c := dial(t, k.Addr)
	b := idem{pid: -1, epoch: -1}.batch(-1, "same")
	c.mustProduce("plain", 0, b, 0)
	c.mustProduce("plain", 0, b, 1)
	wantPartitionLog(t, k.Addr, "plain", 0, 0, []string{"same", "same"})
}

// TestBL05EpochBumpedByClient is BL-05: the client bumps its own epoch
// after a delivery timeout (no InitProducerId). Epoch 1 must start at
// sequence 0; once it has, a late epoch-0 retry is INVALID_PRODUCER_EPOCH;
// acknowledged offsets never move.
func TestBL05EpochBumpedByClient(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("bl05", 1, nil)
	p0 := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	c.mustProduce("bl05", 0, p0.batch(0, seqValues("e0", 0, 5)...), 0)
	c.mustProduce("bl05", 0, p0.batch(5, seqValues("e0", 5, 5)...), 5)

	p1 := idem{pid: p0.pid, epoch: p0.epoch + 1}
	c.wantCode("bl05", 0, p1.batch(3, "e1-nonzero"), kerr.OutOfOrderSequenceNumber)
	c.mustProduce("bl05", 0, p1.batch(0, seqValues("e1", 0, 5)...), 10)
	c.wantCode("bl05", 0, p0.batch(10, "e0-late"), kerr.InvalidProducerEpoch)

	want := slices.Concat(seqValues("e0", 0, 10), seqValues("e1", 0, 5))
	wantPartitionLog(t, k.Addr, "bl05", 0, 0, want)
	got := producersOf(t, k, "bl05", 0)[p0.pid]
	if got.ProducerEpoch != 1 || got.LastSequence != 4 {
		t.Fatalf("DescribeProducers: epoch %d last sequence %d, want 1 and 4", got.ProducerEpoch, got.LastSequence)
	}
}
