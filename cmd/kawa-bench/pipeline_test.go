package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/clitest"
)

// TestPipelineExactlyOnce: a short W5 run (input at a fixed rate, the
// transactional transform committing every 50 records or 50 ms, a
// read_committed reader) brings every input record out exactly once,
// commits transactions, and measures end-to-end latency for the records of
// the window, whose records/s stays within the input's fixed rate.
func TestPipelineExactlyOnce(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	pb := &pipelineBench{brokers: addr, in: clitest.UniqueName(t, "in"), out: clitest.UniqueName(t, "out"),
		group: clitest.UniqueName(t, "g"), partitions: 2, recordSize: 100, rate: 400,
		warmup: 200 * time.Millisecond, duration: time.Second, commitRecords: 50, commitEvery: 50 * time.Millisecond,
		drain: 20 * time.Second}
	res := &pipelineResult{}
	if err := pb.run(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d transactions (commit p50 %.0f µs), %.0f records/s, end to end p50 %.0f µs p99 %.0f µs", res.Transactions, res.Commit.P50, res.RecordsPerS, res.E2E.P50, res.E2E.P99)
	// 400 records/s for 1.2 s from a fixed schedule: 480 stamped records.
	if res.Expected != 480 || res.Delivered != res.Expected || res.Duplicates != 0 {
		t.Errorf("expected %d (want 480), delivered %d, duplicates %d", res.Expected, res.Delivered, res.Duplicates)
	}
	// Commits every 50 records or 50 ms: at least 480/50 transactions.
	if res.Transactions < 10 || res.Commit.Count != uint64(res.Transactions) || res.Commit.P50 <= 0 {
		t.Errorf("%d transactions committed (want >= 10), commit latency %+v", res.Transactions, res.Commit)
	}
	l := res.E2E
	if l.Count == 0 || !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("end-to-end latency %+v", l)
	}
	// Records sent in the 1 s window are 400; a record sent in the warmup
	// may be read in the window and one sent in it after, so the count read
	// in the window lies near 400, never far above the input's rate.
	if res.Records == 0 || res.RecordsPerS > 600 || res.Input.Records == 0 {
		t.Errorf("output %d records in the window (%v/s), input %d", res.Records, res.RecordsPerS, res.Input.Records)
	}
}

// TestPipelineWorkloadPlan: W5 is in --full only, on the Kafka systems (no
// NATS: JetStream has no transactions), and --only W5 selects it alone.
func TestPipelineWorkloadPlan(t *testing.T) {
	t.Parallel()
	cells := filterCells(plan(fullWorkloads()), true, "W5", "")
	var systems []string
	for _, c := range cells {
		if !c.w.pipeline || c.w.rate <= 0 || c.w.txnEvery <= 0 || c.w.txnRecords <= 0 {
			t.Errorf("W5 cell %+v", c.w)
		}
		systems = append(systems, c.s.name)
	}
	if got := strings.Join(systems, ","); got != "kawa-always,kfake-sync,base-always,kawa-never,kfake-datadir,base-never" {
		t.Errorf("W5 systems %s", got)
	}
	for _, c := range plan(quickWorkloads()) {
		if c.w.pipeline {
			t.Errorf("W5 in --quick: %+v", c)
		}
	}
}

// TestPipelineTargets: a W5 record missing from the output fails the
// exactly-once line, the table says why NATS has no W5 cell, and W5's
// duplicate counts stay out of W6's zero-duplicates line.
func TestPipelineTargets(t *testing.T) {
	t.Parallel()
	zero, one := int64(0), int64(1)
	rep := &report{Rounds: 1, Cells: []*cellResult{
		{Workload: "W5", System: "kawa-always", RecordsPerS: 5000, Missing: &zero, Duplicates: &zero},
		{Workload: "W5", System: "kawa-never", RecordsPerS: 5000, Missing: &one, Duplicates: &zero},
		{Workload: "W6-1pid", System: "kawa-never", RecordsPerS: 1000, Duplicates: &zero},
	}}
	var out strings.Builder
	rep.computeRatios()
	rep.printTable(&out)
	for _, want := range []string{
		"NOT MET W5 every input record read from the output exactly once on kawa: 1 missing, 0 duplicates in 2 cells",
		"MET     W6 zero duplicates on kawa: 0 in 1 cells",
		"NATS JetStream skipped (it has no transactions)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
