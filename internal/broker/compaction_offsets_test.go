package broker_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// countRecords reads every record of topic partition 0 from its log start (read_uncommitted) and counts them:
// what a coordinator's replay at start reads.
func countRecords(t *testing.T, k *kawatest.Broker, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	end := listOffset(t, k, topic, false)
	cl := k.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxBytes(64<<20))
	defer cl.Close()
	n := 0
	for next := int64(0); next < end; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) { n++; next = r.Offset + 1 })
	}
	return n
}

// TestCompactionConsumerOffsets: __consumer_offsets is compacted. 20,000 offset commits (kadm, 10 partitions
// per request) over 50 groups, then a cleaning round: the log a restart replays holds at most twice the 500 live
// offsets (plus the groups' records), and every group's committed offsets after the restart are its last ones.
// KAWA_COMPACTION_OFFSETS_FULL=1 runs the size, 1M commits over 1,000 groups, and logs the restart time
// before and after cleaning.
func TestCompactionConsumerOffsets(t *testing.T) {
	t.Parallel()
	groups, rounds, seg := 50, 40, int64(64<<10)
	if os.Getenv("KAWA_COMPACTION_OFFSETS_FULL") != "" {
		groups, rounds, seg = 1000, 100, 1<<20
	}
	const parts = 10
	k := kawatest.NewBroker(t, func(c *config.Broker) {
		c.OffsetsTopicSegmentBytes = seg
		c.CleanerBackoff = time.Hour // only CleanNow cleans: the first restart measures the uncleaned log
	})
	k.CreateTopic("d", parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	adm := k.Admin()
	last := func(g, r int) kadm.Offsets {
		o := kadm.Offsets{}
		for p := range int32(parts) {
			o.Add(kadm.Offset{Topic: "d", Partition: p, At: int64(r*1000 + g), LeaderEpoch: -1})
		}
		return o
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := w; g < groups; g += 8 {
				for r := range rounds {
					if err := adm.CommitAllOffsets(ctx, fmt.Sprintf("g%d", g), last(g, r)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	commits := groups * rounds * parts
	t.Logf("%d commits over %d groups in %v", commits, groups, time.Since(start))
	before := countRecords(t, k, "__consumer_offsets")
	if before < commits {
		t.Fatalf("__consumer_offsets holds %d records, fewer than the %d commits", before, commits)
	}
	s := time.Now()
	k = k.Restart()
	t.Logf("restart replaying %d records (uncleaned): %v", before, time.Since(s))
	s = time.Now()
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cleaning took %v: %+v", time.Since(s), k.B.CleanerStats())
	s = time.Now()
	k = k.Restart()
	t.Logf("restart after cleaning: %v", time.Since(s))
	live := groups * parts
	after := countRecords(t, k, "__consumer_offsets")
	t.Logf("__consumer_offsets: %d records before cleaning, %d after, %d live offsets", before, after, live)
	if after > 2*live+groups {
		t.Fatalf("after cleaning the replay reads %d records for %d live offsets", after, live)
	}
	adm = k.Admin()
	for g := range groups {
		got, err := adm.FetchOffsets(ctx, fmt.Sprintf("g%d", g))
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(parts) {
			if o, ok := got.Lookup("d", p); !ok || o.Err != nil || o.At != int64((rounds-1)*1000+g) {
				t.Fatalf("group g%d partition %d after cleaning and restart: %+v, want %d", g, p, o, (rounds-1)*1000+g)
			}
		}
	}
}

// TestCompactionTransactionState: __transaction_state is compacted. Five transactional IDs run 30
// transactions each; after a cleaning round and a restart the log holds a few records per ID (the latest is
// its state), and DescribeTransactions gives each the producer ID and epoch it had, and its next transaction
// commits.
func TestCompactionTransactionState(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.OffsetsTopicSegmentBytes = 4 << 10 })
	compactedTopic(k, "ts", nil)
	ids := []string{"t0", "t1", "t2", "t3", "t4"}
	for _, id := range ids {
		cl := k.Client(kgo.TransactionalID(id))
		for i := range 30 {
			txnProduce(t, cl, "ts", id, i, i+1, true, true)
		}
		cl.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	describe := func() map[string]kadm.DescribedTransaction {
		d, err := k.Admin().DescribeTransactions(ctx, ids...)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]kadm.DescribedTransaction{}
		for _, id := range ids {
			dt, ok := d[id]
			if !ok || dt.Err != nil {
				t.Fatalf("DescribeTransactions(%s): %+v", id, dt)
			}
			out[id] = dt
		}
		return out
	}
	wait.Until(t, time.Minute, "every transaction complete (markers written)", func() bool {
		for _, dt := range describe() {
			if dt.State != "CompleteCommit" {
				return false
			}
		}
		return true
	})
	was := describe()
	before := countRecords(t, k, "__transaction_state")
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	k = k.Restart()
	after := countRecords(t, k, "__transaction_state")
	t.Logf("__transaction_state: %d records before cleaning, %d after", before, after)
	if after >= before/4 {
		t.Fatalf("__transaction_state kept %d of %d records", after, before)
	}
	for id, dt := range describe() {
		if dt.ProducerID != was[id].ProducerID || dt.ProducerEpoch != was[id].ProducerEpoch || dt.State != was[id].State {
			t.Fatalf("%s after cleaning and restart: %+v, was %+v", id, dt, was[id])
		}
	}
	cl := k.Client(kgo.TransactionalID("t0"))
	txnProduce(t, cl, "ts", "again", 100, 101, true, true)
	if dt := describe()["t0"]; dt.ProducerEpoch <= was["t0"].ProducerEpoch {
		t.Fatalf("t0 after a new InitProducerId: epoch %d, was %d", dt.ProducerEpoch, was["t0"].ProducerEpoch)
	}
}
