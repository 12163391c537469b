package broker_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// Issue 15's measurement: share-group throughput with 1, 4 and 16 members
// on one partition against a classic group with one member, all reading
// the same backlog of KAWA_SHARE_BENCH records (default 100,000; 100-byte
// values) from an in-process broker with --fsync=always semantics. Share
// members accept every record; the classic member commits after every
// poll. A measurement, not a check: it runs only with KAWA_SHARE_BENCH set
// and logs records/s per case.
//
//	KAWA_SHARE_BENCH=100000 go test -run TestShareThroughput -v ./internal/broker
//	KAWA_SHARE_BENCH=100000 KAWA_SHARE_BENCH_LOCKS=1000000 go test -run TestShareThroughput -v ./internal/broker
func TestShareThroughput(t *testing.T) {
	v := os.Getenv("KAWA_SHARE_BENCH")
	if v == "" {
		t.Skip("a measurement: set KAWA_SHARE_BENCH=<records> to run it")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		n = 100000
	}
	// KAWA_SHARE_BENCH_LOCKS sets group.share.partition.max.record.locks
	// (default 2000): a value above the backlog measures the fetch path
	// without the in-flight window, as before the window existed.
	locks, _ := strconv.Atoi(os.Getenv("KAWA_SHARE_BENCH_LOCKS"))
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.ShareMaxRecordLocks = locks })
	k.CreateTopic("bench", 1, nil)
	p := k.Client(kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	val := make([]byte, 100)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Value: append([]byte(strconv.Itoa(i)+":"), val...)})
	}
	if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Classic group, one member, committing after every poll.
	start := time.Now()
	c := k.Client(kgo.ConsumeTopics("bench"), kgo.ConsumerGroup("classic"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < n && ctx.Err() == nil; {
		fs := c.PollFetches(ctx)
		got += fs.NumRecords()
		if err := c.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	t.Logf("classic group, 1 member: %d records in %v: %.0f records/s", n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())

	// Both KIP-1206 acquire modes: batch_optimized (the default; whole
	// stored batches are acquired) and record_limit (ShareMaxRecordsStrict:
	// at most 500 records per fetch, so a stored batch of thousands goes
	// out, and is decoded by the client, once per 500 of its records).
	for _, c := range []struct {
		mode string
		opts []kgo.Opt
	}{{"batch_optimized", nil}, {"record_limit", []kgo.Opt{kgo.ShareMaxRecordsStrict()}}} {
		for _, members := range []int{1, 4, 16} {
			shareThroughput(t, ctx, k, n, members, c.mode, c.opts)
		}
	}
}

// shareThroughput consumes the n records of bench with members share
// consumers of a new group, accepting every record, and logs records/s.
func shareThroughput(t *testing.T, ctx context.Context, k *kawatest.Broker, n, members int, mode string, opts []kgo.Opt) {
	group := fmt.Sprintf("share-%s-%d", mode, members)
	setShareConfigs(t, k, group, "share.auto.offset.reset", "earliest")
	var got atomic.Int64
	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := shareConsumer(k, "bench", group, opts...)
			defer cl.Close()
			for mctx.Err() == nil {
				fs := cl.PollFetches(mctx)
				fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
				if got.Add(int64(fs.NumRecords())) >= int64(n) {
					stop()
				}
			}
		}()
	}
	<-mctx.Done()
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	if got.Load() < int64(n) {
		t.Fatalf("share group (%s) with %d members: %d of %d records before the deadline", mode, members, got.Load(), n)
	}
	t.Logf("share group (%s), %d members: %d records in %v: %.0f records/s", mode, members, n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
}
