package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/cmd/internal/clitest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// idempotentOpts are the acks=all idempotent producer options of a cell.
func idempotentOpts(t *testing.T) []kgo.Opt {
	t.Helper()
	opts, err := cli.ProducerOpts(cli.NewFlagSet("produce", ""), "all", true)
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestTxnProduceCommitsWholeTransactions: a W4 cell with transactions of 10
// records acknowledges records only when their transaction has committed, so
// a read_committed consumer sees at least every record counted.
func TestTxnProduceCommitsWholeTransactions(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.UniqueName(t, "txn")
	ctx := context.Background()
	pb := &produceBench{brokers: addr, topic: topic, partitions: 1, producers: 2, recordSize: 100,
		duration: 500 * time.Millisecond, warmup: 100 * time.Millisecond, linger: time.Millisecond,
		maxBuffered: 1000, clientOpts: idempotentOpts(t), txnRecords: 10}
	res := &produceResult{}
	if err := pb.run(ctx, res); err != nil {
		t.Fatal(err)
	}
	if res.Records == 0 || res.Errors != 0 || res.Latency.Count == 0 {
		t.Fatalf("txn cell: %d records, %d errors, %d latency samples", res.Records, res.Errors, res.Latency.Count)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Every transaction ended in a commit before run returned, so the
	// committed records reach at least the window's count.
	var got int64
	for got < res.Records {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		f := cl.PollFetches(pctx)
		cancel()
		if err := cli.FetchError(f); err != nil {
			t.Fatalf("read_committed after %d of >= %d records: %v", got, res.Records, err)
		}
		got += int64(f.NumRecords())
	}
}

// TestCountDuplicates: keyed idempotent producers leave no duplicate in the
// log; one record re-sent with a key already written is counted as one.
func TestCountDuplicates(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.UniqueName(t, "dup")
	ctx := context.Background()
	pb := &produceBench{brokers: addr, topic: topic, partitions: 1, producers: 3, recordSize: 10,
		duration: 300 * time.Millisecond, linger: time.Millisecond, maxBuffered: 100, clientOpts: idempotentOpts(t), keyed: true}
	res := &produceResult{}
	if err := pb.run(ctx, res); err != nil {
		t.Fatal(err)
	}
	d, err := countDuplicates(ctx, addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	// 3 primed (unkeyed) records plus every acked one; none twice.
	if d.duplicates != 0 || d.records < res.Records+3 {
		t.Fatalf("read back %d records (%d acked in the window), %d duplicates", d.records, res.Records, d.duplicates)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: dupKey(1, 0), Value: []byte("again")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d2, err := countDuplicates(ctx, addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	if d2.duplicates != 1 || d2.records != d.records+1 {
		t.Fatalf("after one re-sent key: %d records, %d duplicates; want %d and 1", d2.records, d2.duplicates, d.records+1)
	}
}

// TestFullPlanSemantics: --full holds W3, W4 and W6; W4 and W6 run on the
// Kafka systems only; W3 runs after every other cell of each round (its
// rate is half of W2-1p-4prod's on the same system in that round), and a
// W3 cell takes its rate from that round's W2 cell.
func TestFullPlanSemantics(t *testing.T) {
	cells := filterCells(plan(fullWorkloads()), false, "", "")
	seen := map[string]bool{}
	for _, c := range cells {
		seen[c.w.name] = true
		if c.s.kind == "nats" && (strings.HasPrefix(c.w.name, "W4") || strings.HasPrefix(c.w.name, "W6")) {
			t.Errorf("%s planned on %s", c.w.name, c.s.name)
		}
	}
	for _, w := range []string{"W3-1p-4prod-50pct", "W4-acks1", "W4-idempotent", "W4-txn-1rec", "W4-txn-100rec",
		"W4-txn-1000rec", "W4-txn-10ms", "W4-txn-100ms", "W4-txn-1000ms", "W6-1pid", "W6-100pid", "W6-1000pid"} {
		if !seen[w] {
			t.Errorf("--full lacks %s", w)
		}
	}
	for _, q := range quickWorkloads() {
		if strings.HasPrefix(q.name, "W3") || strings.HasPrefix(q.name, "W4") || strings.HasPrefix(q.name, "W6") {
			t.Errorf("--quick holds %s", q.name)
		}
	}
	for r := range 3 {
		order := roundOrder(cells, r)
		if len(order) != len(cells) {
			t.Fatalf("round %d: %d cells of %d", r, len(order), len(cells))
		}
		derived := false
		for _, c := range order {
			if c.w.rateOf != "" {
				derived = true
			} else if derived {
				t.Fatalf("round %d: %s/%s after a W3 cell", r, c.w.name, c.s.name)
			}
		}
	}
	rep := &report{Cells: []*cellResult{
		{Round: 0, Workload: "W2-1p-4prod", System: "kawa-always", RecordsPerS: 1000},
		{Round: 1, Workload: "W2-1p-4prod", System: "kawa-always", RecordsPerS: 3000},
		{Round: 1, Workload: "W2-1p-4prod", System: "kfake-sync", Error: "failed"},
	}}
	if got := rep.rateFor(1, "W2-1p-4prod", "kawa-always"); got != 3000 {
		t.Errorf("rateFor round 1 = %v, want 3000", got)
	}
	if got := rep.rateFor(1, "W2-1p-4prod", "kfake-sync"); got != 0 {
		t.Errorf("rateFor a failed cell = %v, want 0", got)
	}
}

// TestSemanticTargets: the W4 and W6 targets compare a Kawa system's cells
// with each other per round (median of 0.9 and 1.0 is 0.95: met), and any
// duplicate fails W6.
func TestSemanticTargets(t *testing.T) {
	one := int64(1)
	zero := int64(0)
	rep := &report{Rounds: 2, Cells: []*cellResult{
		{Round: 0, Workload: "W4-idempotent", System: "kawa-always", RecordsPerS: 1000},
		{Round: 0, Workload: "W4-txn-100ms", System: "kawa-always", RecordsPerS: 900},
		{Round: 1, Workload: "W4-idempotent", System: "kawa-always", RecordsPerS: 2000},
		{Round: 1, Workload: "W4-txn-100ms", System: "kawa-always", RecordsPerS: 2000},
		{Round: 0, Workload: "W6-1pid", System: "kawa-never", RecordsPerS: 1000, Duplicates: &zero},
		{Round: 0, Workload: "W6-1000pid", System: "kawa-never", RecordsPerS: 500, Duplicates: &one},
	}}
	got := strings.Join(rep.targets(), "\n")
	for _, want := range []string{
		"MET     W4 kawa-always transactions every 100 ms >= 0.95x idempotent rec/s: 0.95 [0.9-1]",
		"NOT MET W6 kawa-never rec/s flat within 10% from 1 to 1,000 producer IDs: 1000/1 0.5 [0.5-0.5]",
		"NOT MET W6 zero duplicates on kawa: 1 in 2 cells",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}
