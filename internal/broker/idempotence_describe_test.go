package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestDescribeProducers: DescribeProducers (KIP-664) reports each producer's
// epoch, last sequence and last timestamp per partition, exactly, before and
// after a restart (the producer snapshot); non-idempotent writes list
// nothing; an unknown partition is UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeProducers(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("dp", 2, nil)
	k.CreateTopic("dp-plain", 1, nil)
	p1, p2 := initProducer(t, k.Addr), initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	c.mustProduce("dp", 0, p1.batchAt(1111, 0, "a", "b", "c"), 0)
	c.mustProduce("dp", 0, p1.batchAt(2222, 3, "d", "e"), 3)
	c.mustProduce("dp", 0, p2.batchAt(3333, 0, "f"), 5)
	c.mustProduce("dp", 1, p2.batchAt(4444, 0, seqValues("g", 0, 10)...), 0)
	p1 = bumpEpoch(t, k.Addr, p1)
	c.mustProduce("dp", 1, p1.batchAt(5555, 0, "h"), 10)
	c.mustProduce("dp-plain", 0, idem{-1, -1}.batch(-1, "plain"), 0)

	want := map[int32]map[int64]kadm.DescribedProducer{
		0: {
			p1.pid: {ProducerEpoch: 0, LastSequence: 4, LastTimestamp: 2222},
			p2.pid: {ProducerEpoch: 0, LastSequence: 0, LastTimestamp: 3333},
		},
		1: {
			p1.pid: {ProducerEpoch: 1, LastSequence: 0, LastTimestamp: 5555},
			p2.pid: {ProducerEpoch: 0, LastSequence: 9, LastTimestamp: 4444},
		},
	}
	check := func(k *kawatest.Broker) {
		t.Helper()
		for part, ps := range want {
			got := producersOf(t, k, "dp", part)
			if len(got) != len(ps) {
				t.Fatalf("partition %d: %d producers, want %d: %+v", part, len(got), len(ps), got)
			}
			for id, w := range ps {
				g := got[id]
				if g.ProducerEpoch != w.ProducerEpoch || g.LastSequence != w.LastSequence || g.LastTimestamp != w.LastTimestamp ||
					g.CoordinatorEpoch != -1 || g.CurrentTxnStartOffset != -1 {
					t.Fatalf("partition %d producer %d: %+v, want epoch %d last sequence %d last timestamp %d, no coordinator, no open transaction",
						part, id, g, w.ProducerEpoch, w.LastSequence, w.LastTimestamp)
				}
			}
		}
		if got := producersOf(t, k, "dp-plain", 0); len(got) != 0 {
			t.Fatalf("non-idempotent partition lists producers %+v", got)
		}
	}
	check(k)
	k = k.Restart()
	check(k)

	raw := dial(t, k.Addr)
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "dp", Partitions: []int32{7}}, {Topic: "nope", Partitions: []int32{0}}}
	raw.write(raw.frame(req))
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	if err := raw.read(resp); err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if len(rt.Partitions) != 1 || rt.Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("topic %s: %+v, want one partition with UNKNOWN_TOPIC_OR_PARTITION", rt.Topic, rt.Partitions)
		}
	}
}
