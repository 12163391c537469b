// Command kawa-bench is Kawa's benchmark harness, kept out of the broker
// binary so that `kawa` links no benchmark peer (kfake): it drives any Kafka-compatible broker with franz-go and reports
// throughput, publish latency and (with --broker-pid) the broker's CPU and
// peak RSS. The method is /work/shared/bench-protocol.md's: compare systems
// only as ratios measured in the same run, interleaved, broker restarted per
// cell; absolute numbers on the 2-vCPU CI boxes drift up to 2x.
//
// # Kawa
//
//	go build -o /tmp/kawa ./cmd/kawa && go build -o /tmp/kawa-bench ./cmd/kawa-bench
//	/tmp/kawa serve --data-dir /tmp/kawa-bench --fsync=always &   # or --fsync=never
//	BROKER=$!
//	/tmp/kawa-bench produce --topic bench --partitions 1 --producers 1 \
//	    --record-size 1024 --duration 20s --warmup 5s --acks all --idempotent \
//	    --broker-pid $BROKER --json >> results.jsonl
//	/tmp/kawa-bench produce --topic bench8 --partitions 8 --producers 8 \
//	    --broker-pid $BROKER --json >> results.jsonl
//	/tmp/kawa-bench fetch --topic bench --broker-pid $BROKER --json >> results.jsonl
//	kill $BROKER; wait $BROKER; rm -rf /tmp/kawa-bench
//
// (Check `kawa serve -h` for the exact serve flags.) For the "fetch a 1 GiB
// log" measurement, first produce ~1 GiB (e.g. --duration long enough at the
// rate the produce run printed, or several produce runs into one topic), then
// run `bench fetch`, which reads from the log start to the end offsets it saw
// when it started.
//
// # kfake peer (franz-go's in-process Go broker)
//
//	/tmp/kawa-bench peer-kfake --port 19092 --data-dir /tmp/kfake-bench &                # no fsync before ack
//	/tmp/kawa-bench peer-kfake --port 19092 --data-dir /tmp/kfake-bench --sync-writes &  # fsync per batch
//	PEER=$!
//	/tmp/kawa-bench produce --brokers 127.0.0.1:19092 --topic bench --broker-pid $PEER --json
//	kill $PEER; wait $PEER; rm -rf /tmp/kfake-bench
//
// Compare only at equal durability: Kawa --fsync=always with kfake
// --sync-writes, Kawa --fsync=never with kfake --data-dir alone. Without
// --data-dir kfake keeps every record in memory (GBs after seconds): restart
// it per cell. Because kawa and kfake run on the same 2 cores as the client,
// every figure includes the client's CPU competing with the broker.
//
// # What is measured
//
//   - produce: K producers, each its own kgo client (own connections), write
//     records of --record-size random bytes for --warmup + --duration. Each
//     record's publish latency runs from its *intended* send time to its ack:
//     with --rate R the schedule is fixed in advance (R/K records/s per
//     producer), so a stalled broker shows up as latency instead of silently
//     lowering the send rate (no coordinated omission); without --rate the
//     intended time is the moment the record is handed to the client, so
//     client-side buffering counts. Latencies are of records sent after the
//     warmup; records/s and MB/s count acks received inside the window.
//     --sync makes each producer send one record at a time (ProduceSync), the
//     floor-latency cell (W1). Records carry the intended time as their
//     CreateTime, so a consumer can compute end-to-end latency.
//   - fetch: one consumer reads every partition from the log start offset up
//     to the end offsets listed at start, as fast as it can: records/s and
//     MB/s of key+value bytes, timed to the last record.
//   - broker: CPU seconds (utime+stime from /proc/PID/stat) over the measured
//     window, CPU-s per GiB moved, and peak RSS (VmHWM from /proc/PID/status,
//     the high-water mark since the broker started).
//
// MB is 10^6 bytes; MiB and GiB are powers of two. With --json each run
// prints exactly one JSON object on one line, so results append to a JSONL
// file and a script computes per-round ratios.
//   - txn: transactional against plain produce in one run (kawa-bench txn -h).
//   - compare: issue 10's side-by-side run (scripts/bench-compare.sh wraps
//     it): Kawa, kfake (this binary's peer-kfake) and nats-server, each a
//     process of its own started per cell on 127.0.0.1, at equal durability;
//     W0 calibration each round, rotated cell order, per-round ratios
//     Kawa/peer as median [min-max], a JSON report and an SVG chart
//     (compare.go, report.go). --full adds W3 (fixed rate at 50 % of the
//     same system's W2 in the round), W4 (acks=1, idempotent, transactions
//     by count and by interval), W6 (1/100/1000 producer IDs, log read
//     back for duplicates) and W5 (an exactly-once consume-transform-produce
//     pipeline, end-to-end latency); W4, W5 and W6 run on Kawa and kfake
//     only (semanticWorkloads and pipelineWorkload in compare.go,
//     semantics.go, pipeline.go); and W8 (1,000 partitions, 16 producers,
//     2 consumers tailing every partition: idle RSS per partition, idle
//     CPU, end-to-end latency; partitions.go), Kawa and kfake only.
//
// Exit status and messages follow cmd/kawa's (cmd/internal/cli): 0 on
// success, 2 on a usage error, 1 on any other failure.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
)

const benchUsage = `usage: kawa-bench <produce|fetch|peer-kfake|txn|compare> [flags]

  kawa-bench produce --topic T [--partitions N] [--producers K] [--record-size B]
                     [--duration D] [--warmup D] [--rate R] [--sync] [--acks all|1|0]
                     [--idempotent] [--broker-pid PID] [--json]
  kawa-bench fetch   --topic T [--broker-pid PID] [--json]
  kawa-bench peer-kfake [--port 19092] [--data-dir D] [--sync-writes]
  kawa-bench txn     [--topic T] [--partitions 8] [--commit-every 10ms,100ms,1s] [--json]
  kawa-bench compare --kawa BIN --nats-server BIN [--quick|--smoke|--full] [--rounds 3]
                     [--work-dir D] [--out bench-results/latest.json]

Run 'kawa-bench <mode> -h' for every flag.
`

func main() {
	os.Exit(cli.ExitStatus("kawa-bench", runBench(os.Args[1:], os.Stdin, os.Stdout), os.Stdout, os.Stderr))
}

// runBench dispatches a bench mode.
func runBench(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return cli.UsageErrorf("", benchUsage, "missing bench mode")
	}
	switch args[0] {
	case "produce":
		return runBenchProduce(args[1:], stdout)
	case "fetch":
		return runBenchFetch(args[1:], stdout)
	case "peer-kfake":
		return runBenchPeerKfake(args[1:], stdout)
	case "txn":
		return runTxnBench(args[1:], stdout)
	case "compare":
		return runCompare(args[1:], stdout)
	case "-h", "--help", "help":
		return cli.Help(benchUsage)
	}
	return cli.UsageErrorf("", benchUsage, "unknown bench mode %q", args[0])
}

// latencySummary is a histogram's summary in microseconds.
type latencySummary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func summarize(h *histogram) latencySummary {
	us := func(ns int64) float64 { return roundTo(float64(ns)/1e3, 3) }
	return latencySummary{
		Count: h.Count(),
		Mean:  roundTo(h.Mean()/1e3, 3),
		P50:   us(h.Quantile(0.50)),
		P99:   us(h.Quantile(0.99)),
		P999:  us(h.Quantile(0.999)),
		Max:   us(h.Max()),
	}
}

// roundTo rounds x to d decimal places, keeping JSON short.
func roundTo(x float64, d int) float64 {
	p := math.Pow10(d)
	return math.Round(x*p) / p
}

// rates returns records/s, MB/s and MiB/s over elapsed.
func rates(records, bytes int64, elapsed time.Duration) (perS, mbS, mibS float64) {
	s := elapsed.Seconds()
	if s <= 0 {
		return 0, 0, 0
	}
	return roundTo(float64(records)/s, 1), roundTo(float64(bytes)/s/1e6, 3), roundTo(float64(bytes)/s/(1<<20), 3)
}

// writeJSON prints v as one line.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// fmtLatency renders microseconds for humans.
func fmtLatency(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func writeBrokerUsage(w io.Writer, u *brokerUsage) {
	if u == nil {
		return
	}
	fmt.Fprintf(w, "  broker pid %d: %.2f CPU-s (user %.2f, sys %.2f)", u.PID, u.CPUSeconds, u.UserSeconds, u.SysSeconds)
	if u.CPUPerGiB > 0 {
		fmt.Fprintf(w, ", %.2f CPU-s/GiB (user %.2f, sys %.2f)", u.CPUPerGiB, u.UserPerGiB, u.SysPerGiB)
	}
	fmt.Fprintf(w, ", peak RSS %.1f MiB\n", float64(u.PeakRSSBytes)/(1<<20))
}
