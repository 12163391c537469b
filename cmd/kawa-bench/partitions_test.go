package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/clitest"
)

// TestPartitionsBench: a short W8 run (50 partitions, 4 producers, 2 tailing consumers) against an in-process
// broker (so the "broker" process sampled is this one) produces, reads back records sent in the window through
// both consumers with their end-to-end latency, and measures the idle phase.
func TestPartitionsBench(t *testing.T) {
	t.Parallel()
	pb := &produceBench{brokers: clitest.Broker(t), topic: clitest.UniqueName(t, "w8"), partitions: 50, partitionsSet: true,
		producers: 4, recordSize: 100, duration: time.Second, warmup: 200 * time.Millisecond,
		linger: 10 * time.Millisecond, maxBuffered: 1000}
	mb := &partitionsBench{produce: pb, consumers: 2, settle: 300 * time.Millisecond, brokerPID: os.Getpid()}
	res := &partitionsResult{}
	if err := mb.run(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	t.Logf("%.0f records/s, %d read by the consumers, end to end p50 %.0f µs p99 %.0f µs, idle CPU %.2f %%, %d B RSS per partition",
		res.Produce.RecordsPerS, res.Consumed, res.E2E.P50, res.E2E.P99, res.IdleCPUPercent, res.IdleRSSPerPartition)
	if res.Produce.Records == 0 || res.Produce.Partitions != 50 {
		t.Fatalf("produced %d records to %d partitions", res.Produce.Records, res.Produce.Partitions)
	}
	// Each consumer reads every partition, so the window's records are read twice, less those
	// still in flight at the end (the run waits a second for them).
	if res.Consumed < res.Produce.Records || res.Consumed > 2*res.Produce.Records+int64(pb.maxBuffered*pb.producers)*2 {
		t.Errorf("consumers read %d window records for %d produced in the window", res.Consumed, res.Produce.Records)
	}
	if l := res.E2E; l.Count != uint64(res.Consumed) || !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("end-to-end latency %+v for %d records", l, res.Consumed)
	}
	if res.IdleCPUPercent < 0 {
		t.Errorf("idle CPU %v %%", res.IdleCPUPercent)
	}
}

// TestPartitionsWorkloadPlan: W8 is in --full only, on the Kafka systems (NATS has no partitions).
func TestPartitionsWorkloadPlan(t *testing.T) {
	t.Parallel()
	cells := filterCells(plan(fullWorkloads()), true, "W8-1000p-16prod", "")
	var systems []string
	for _, c := range cells {
		if c.w.partitions != 1000 || c.w.producers != 16 || c.w.consumers != 2 {
			t.Errorf("W8 cell %+v", c.w)
		}
		systems = append(systems, c.s.name)
	}
	if len(cells) != 6 {
		t.Errorf("W8 systems %v, want kawa, kfake and base in both durability modes", systems)
	}
	for _, c := range plan(quickWorkloads()) {
		if c.w.consumers > 0 {
			t.Errorf("W8 in --quick: %+v", c)
		}
	}
}
