package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// deleteRecordsTo raises the log start offset of topic's partition 0 to at.
func deleteRecordsTo(t *testing.T, k *kawatest.Broker, topic string, at int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
	resp, err := k.Admin().DeleteRecords(ctx, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords %s to %d: %v", topic, at, err)
	}
}

// TestBL03AStateOutlivesDeletedRecords is BL-03 variant A: DeleteRecords
// removes every batch P wrote; P's state is kept, so its next sequence is
// accepted, its last batch still answers as a duplicate, and both hold after
// a restart.
func TestBL03AStateOutlivesDeletedRecords(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("bl03a", 1, nil)
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	last := p.batch(0, seqValues("v", 0, 5)...)
	c.mustProduce("bl03a", 0, last, 0)
	deleteRecordsTo(t, k, "bl03a", 5)

	c.mustProduce("bl03a", 0, last, 0) // retry of a deleted batch: original offset
	next := p.batch(5, "v-5")
	c.mustProduce("bl03a", 0, next, 5)
	wantPartitionLog(t, k.Addr, "bl03a", 0, 5, []string{"v-5"})

	k = k.Restart()
	c = dial(t, k.Addr)
	c.mustProduce("bl03a", 0, next, 5)
	c.mustProduce("bl03a", 0, p.batch(6, "v-6"), 6)
	wantPartitionLog(t, k.Addr, "bl03a", 0, 5, []string{"v-5", "v-6"})
}

// TestBL03BExpiredProducerStartsFresh is BL-03 variant B: after P idles past
// producer.id.expiration.ms its state is gone, and a batch at any sequence
// is accepted and starts fresh state (Kafka >= 2.5), instead of
// OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID.
func TestBL03BExpiredProducerStartsFresh(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.ProducerIDExpiration = time.Hour })
	k.CreateTopic("bl03b", 1, nil)
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	c.mustProduce("bl03b", 0, p.batch(0, "r-0", "r-1"), 0)

	k.B.EnforceRetention(time.Now().Add(time.Hour + time.Minute)) // idle past the expiration
	if ps := producersOf(t, k, "bl03b", 0); len(ps) != 0 {
		t.Fatalf("after expiry DescribeProducers lists %v, want none", ps)
	}
	c.mustProduce("bl03b", 0, p.batch(2, "r-2", "r-3"), 2)
	wantPartitionLog(t, k.Addr, "bl03b", 0, 0, seqValues("r", 0, 4))
	got, ok := producersOf(t, k, "bl03b", 0)[p.pid]
	if !ok || got.ProducerEpoch != int16(p.epoch) || got.LastSequence != 3 {
		t.Fatalf("fresh state: present %v epoch %d last sequence %d, want epoch %d last sequence 3", ok, got.ProducerEpoch, got.LastSequence, p.epoch)
	}
}

// TestBL04RetryAfterSegmentDeleted is BL-04: P's batch seq 100-109 lands at
// offsets 500-509, the response is lost, the segment holding it is deleted
// (by DeleteRecords, or by retention.ms), then the retry arrives: it is
// answered with base offset 500 from the producer state, not appended again
// and not an error.
func TestBL04RetryAfterSegmentDeleted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		delete func(t *testing.T, k *kawatest.Broker, topic string)
	}{
		{"DeleteRecords", func(t *testing.T, k *kawatest.Broker, topic string) { deleteRecordsTo(t, k, topic, 510) }},
		{"retention.ms", func(t *testing.T, k *kawatest.Broker, topic string) {
			k.B.EnforceRetention(time.Now().Add(time.Hour)) // every closed segment is older than retention.ms
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := kawatest.NewBroker(t)
			segBytes, retMs := "1024", "60000"
			k.CreateTopic("bl04", 1, map[string]*string{"internal.segment.bytes": &segBytes, "retention.ms": &retMs})
			c := dial(t, k.Addr)
			plain := idem{pid: -1, epoch: -1}
			c.mustProduce("bl04", 0, plain.batch(-1, seqValues("filler", 0, 500)...), 0)

			p := initProducer(t, k.Addr)
			lost := p.batch(100, seqValues("p", 100, 10)...)
			c.mustProduce("bl04", 0, lost, 500) // the client never sees this answer
			c.mustProduce("bl04", 0, plain.batch(-1, seqValues("after", 0, 100)...), 510)

			tc.delete(t, k, "bl04")
			if _, err := os.Stat(filepath.Join(k.Dir, "bl04-0", "00000000000000000500.log")); !os.IsNotExist(err) {
				t.Fatalf("segment 500 still on disk (stat: %v); the scenario needs it deleted", err)
			}
			c.mustProduce("bl04", 0, lost, 500)
			c.mustProduce("bl04", 0, p.batch(110, "p-110"), 610)
			wantPartitionLog(t, k.Addr, "bl04", 0, 510, slices.Concat(seqValues("after", 0, 100), []string{"p-110"}))
		})
	}
}
