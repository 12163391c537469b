package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
)

// `kawa-bench compare` is issue 10's one command: it starts each system as
// its own process on 127.0.0.1 (a fresh one per cell), drives it from this
// process, and reports per-round ratios Kawa/peer at equal durability, with
// W0 calibration at the start of every round and the cell order rotated by
// one position per round (bench-protocol.md §4.3).

// workload is one OMB-style cell shape (bench-protocol.md §4.2).
type workload struct {
	name       string // W1, W2-1p-4prod, W7-fetch, ...
	fetch      bool   // W7: fill a backlog, then read it from the log start
	partitions int
	producers  int
	recordSize int
	sync       bool  // one record in flight per producer
	backlog    int64 // fetch: bytes of records to read
	warmup     time.Duration
	duration   time.Duration
	// W3: records/s over all producers, fixed in advance (0: max). With
	// rateOf set it is rateFraction of that workload's records/s measured
	// on the same system earlier in the round (see compareConfig.run).
	rate         float64
	rateOf       string
	rateFraction float64
	// W4 and W6: the semantic under test, on the Kafka systems only (NATS
	// has no Kafka acks=1, transactions or producer IDs).
	acks1      bool          // acks=1, not idempotent (else acks=all, idempotent)
	txnRecords int           // records per transaction (0: no transactions by count)
	txnEvery   time.Duration // commit every interval (0: no transactions by time)
	dupCheck   bool          // key records by producer and sequence, then read the log back and count duplicates
	kafkaOnly  bool
	// W8 (partitions.go): consumers tailing every partition during the
	// produce window, after the partitions' idle RSS and CPU are measured.
	consumers int
	// W5: an exactly-once pipeline (pipeline.go) fed at rate records/s;
	// its transform stage commits every txnRecords records or txnEvery.
	pipeline bool
	// Records each producer buffers before Produce blocks (0: kgo's
	// 50,000). W4 caps every cell alike at 1 MiB, as `kawa-bench txn`
	// does, so a transaction's closing Flush is short and it lasts about
	// its interval instead of draining 50 MB.
	maxBuffered int
}

// system is one broker configuration. Systems with the same durable value
// are compared with each other only.
type system struct {
	name    string // kawa-always, kfake-sync, nats-always, kawa-never, kfake-datadir, nats-default
	kind    string // kawa, kfake, nats
	durable bool   // fsync before the ack
}

var (
	sysKawaAlways   = system{"kawa-always", "kawa", true}
	sysKfakeSync    = system{"kfake-sync", "kfake", true}
	sysNatsAlways   = system{"nats-always", "nats", true}
	sysKawaNever    = system{"kawa-never", "kawa", false}
	sysKfakeDataDir = system{"kfake-datadir", "kfake", false}
	sysNatsDefault  = system{"nats-default", "nats", false}
	// The --baseline binary (another build of kawa, e.g. main before a
	// change): compared with the kawa systems of the same durability, so a
	// change is measured before/after in one run.
	sysBaseAlways    = system{"base-always", "kawa", true}
	sysBaseNever     = system{"base-never", "kawa", false}
	durableSystems   = []system{sysKawaAlways, sysKfakeSync, sysNatsAlways}
	pageCacheSystems = []system{sysKawaNever, sysKfakeDataDir, sysNatsDefault}
)

// cellSpec is one (workload, system) pair of a round.
type cellSpec struct {
	w workload
	s system
}

// compareConfig is a parsed `kawa-bench compare` invocation.
type compareConfig struct {
	kawaBin   string
	natsBin   string
	baseBin   string // --baseline: a second kawa binary, run as base-always/base-never
	selfBin   string // this binary, for peer-kfake
	workDir   string
	out       string
	svg       string
	rounds    int
	calibEach time.Duration
	cells     []cellSpec
	stdout    io.Writer
}

const compareUsage = "kawa-bench compare --kawa BIN --nats-server BIN [--quick|--smoke|--full] [flags]"

func runCompare(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("compare", compareUsage)
	c := &compareConfig{stdout: stdout}
	fs.StringVar(&c.kawaBin, "kawa", "", "path of the kawa binary (go build ./cmd/kawa)")
	fs.StringVar(&c.natsBin, "nats-server", "", "path of a nats-server binary (go install github.com/nats-io/nats-server/v2@v2.15.2)")
	fs.StringVar(&c.workDir, "work-dir", os.TempDir(), "directory on the disk under test; each cell's data dir is made (and removed) inside it")
	fs.StringVar(&c.out, "out", "bench-results/latest.json", "JSON report (cells, ratios, calibration)")
	fs.StringVar(&c.svg, "svg", "", "SVG chart of throughput and latency per system (default: --out with .svg)")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every cell once, order rotated by one per round")
	quick := fs.Bool("quick", false, "W1, W2 and W7 against NATS and kfake, 2s cells (under 5 minutes with 3 rounds)")
	smoke := fs.Bool("smoke", false, "one round of tiny cells (about 30 s): checks the harness works, numbers mean nothing")
	full := fs.Bool("full", false, "W1, W2 {1,16} partitions x {1,4} producers, W7 with a 1 GiB backlog, both durability modes, 20s cells")
	fs.StringVar(&c.baseBin, "baseline", "", "a second kawa binary (e.g. main before a change), run beside --kawa as base-always/base-never for before/after ratios")
	only := fs.String("only", "", "comma-separated workloads to run (e.g. W1,W2-1p-4prod); default all of the mode's")
	systems := fs.String("systems", "", "comma-separated systems to run (kawa-always,base-always,kfake-sync,...); default all")
	warmup := fs.Duration("warmup", 0, "override the mode's warmup of every produce cell (0: the mode's)")
	duration := fs.Duration("duration", 0, "override the mode's measured window of every produce cell (0: the mode's)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case c.kawaBin == "" || c.natsBin == "":
		return fs.UsageErr("--kawa and --nats-server are required")
	case c.rounds < 1:
		return fs.UsageErr("--rounds must be >= 1")
	case *warmup < 0 || *duration < 0:
		return fs.UsageErr("--warmup and --duration must be >= 0")
	case btoi(*quick)+btoi(*smoke)+btoi(*full) > 1:
		return fs.UsageErr("at most one of --quick, --smoke, --full")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c.selfBin = self
	switch {
	case *smoke:
		c.cells, c.calibEach = plan(smokeWorkloads()), 100*time.Millisecond
		if !cli.IsSet(fs, "rounds") {
			c.rounds = 1
		}
	case *full:
		c.cells, c.calibEach = plan(fullWorkloads()), time.Second
	default:
		c.cells, c.calibEach = plan(quickWorkloads()), 300*time.Millisecond
	}
	c.cells = filterCells(c.cells, c.baseBin != "", *only, *systems)
	for i := range c.cells {
		if *warmup > 0 {
			c.cells[i].w.warmup = *warmup
		}
		if *duration > 0 {
			c.cells[i].w.duration = *duration
		}
	}
	if len(c.cells) == 0 {
		return fs.UsageErr("--only and --systems leave no cell to run")
	}
	if c.svg == "" {
		c.svg = trimExt(c.out) + ".svg"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := c.run(ctx)
	if rep == nil {
		return err
	}
	rep.computeRatios()
	rep.printTable(stdout)
	if werr := rep.write(c.out, c.svg); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", c.out, c.svg)
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func trimExt(p string) string { return p[:len(p)-len(filepath.Ext(p))] }

// quickWorkloads is `--quick`: W1, W2 (1 partition, 4 producers) in both
// durability modes, W7 catch-up fetch of 256 MiB.
func quickWorkloads() []workload { return coreWorkloads(time.Second, 2*time.Second, 256<<20) }

// smokeWorkloads is `--smoke`, for CI: the same code paths, tiny cells.
func smokeWorkloads() []workload {
	return coreWorkloads(200*time.Millisecond, 500*time.Millisecond, 8<<20)
}

// coreWorkloads are W1, W2 with 1 partition and 4 producers, and W7 over a
// backlog of backlog bytes, with the given warmup and measured window.
func coreWorkloads(warm, dur time.Duration, backlog int64) []workload {
	return []workload{
		{name: "W1", partitions: 1, producers: 1, recordSize: 1024, sync: true, warmup: warm, duration: dur},
		{name: "W2-1p-4prod", partitions: 1, producers: 4, recordSize: 1024, warmup: warm, duration: dur},
		{name: "W7-fetch", fetch: true, partitions: 1, recordSize: 1024, backlog: backlog},
	}
}

// fullWorkloads is `--full`: the protocol's 5 s warmup and 20 s cells.
func fullWorkloads() []workload {
	const warm, dur = 5 * time.Second, 20 * time.Second
	ws := []workload{{name: "W1", partitions: 1, producers: 1, recordSize: 1024, sync: true, warmup: warm, duration: dur}}
	for _, p := range []int{1, 16} {
		for _, k := range []int{1, 4} {
			ws = append(ws, workload{name: fmt.Sprintf("W2-%dp-%dprod", p, k), partitions: p, producers: k,
				recordSize: 1024, warmup: warm, duration: dur})
		}
	}
	ws = append(ws, workload{name: "W2-8p-8prod", partitions: 8, producers: 8, recordSize: 1024, warmup: warm, duration: dur})
	ws = append(ws, workload{name: "W7-fetch", fetch: true, partitions: 1, recordSize: 1024, backlog: 1 << 30})
	ws = append(ws, semanticWorkloads(warm, dur)...)
	ws = append(ws, pipelineWorkload(warm, dur))
	// W8: 1,000 partitions, 16 producers, 2 consumers each fetching all of them.
	return append(ws, workload{name: "W8-1000p-16prod", partitions: 1000, producers: 16, consumers: 2, recordSize: 1024,
		warmup: warm, duration: dur})
}

// pipelineWorkload is W5, in --full (alone: --full --only W5): the
// exactly-once pipeline of pipeline.go with 1 KiB records fed at a fixed
// 5,000 records/s into 4 partitions (the same rate on every system, so the
// end-to-end latencies compare at equal load), the transform stage
// committing every 1,000 records or 100 ms, whichever comes first. Kafka
// systems only: NATS JetStream has no transactions.
func pipelineWorkload(warm, dur time.Duration) workload {
	return workload{name: "W5", pipeline: true, partitions: 4, producers: 1, recordSize: 1024, rate: 5000,
		txnRecords: 1000, txnEvery: 100 * time.Millisecond, warmup: warm, duration: dur, kafkaOnly: true}
}

// semanticWorkloads are W3, W4 and W6 (issue 10 item 2), in --full only:
//   - W3: W2-1p-4prod's shape at a fixed rate of 50 % of the records/s
//     W2-1p-4prod reached on the same system in the same round, latency from
//     the intended send time (the fixed schedule: no coordinated omission).
//   - W4: one producer on one partition, max rate, one cell per semantic:
//     acks=1 (not idempotent), idempotent acks=all, transactions of
//     1/100/1000 records, transactions committed every 10/100/1000 ms,
//     each with 1 MiB of records buffered at most (all alike). A
//     transactional record counts (and its latency ends) when its
//     transaction's EndTransaction commit returns.
//   - W6: idempotent acks=all with 1/100/1000 producers, each its own kgo
//     client and so its own producer ID, 20,000 records buffered over all of
//     them; afterwards the log is read back and a record whose (producer,
//     sequence) key was already seen counts as a duplicate (must be 0).
func semanticWorkloads(warm, dur time.Duration) []workload {
	ws := []workload{{name: "W3-1p-4prod-50pct", partitions: 1, producers: 4, recordSize: 1024,
		rateOf: "W2-1p-4prod", rateFraction: 0.5, warmup: warm, duration: dur}}
	w4 := func(name string) workload {
		return workload{name: name, partitions: 1, producers: 1, recordSize: 1024, warmup: warm, duration: dur,
			kafkaOnly: true, maxBuffered: (1 << 20) / 1024}
	}
	acks1 := w4("W4-acks1")
	acks1.acks1 = true
	ws = append(ws, acks1, w4("W4-idempotent"))
	for _, n := range []int{1, 100, 1000} {
		w := w4(fmt.Sprintf("W4-txn-%drec", n))
		w.txnRecords = n
		ws = append(ws, w)
	}
	for _, d := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
		w := w4(fmt.Sprintf("W4-txn-%dms", d.Milliseconds()))
		w.txnEvery = d
		ws = append(ws, w)
	}
	for _, n := range []int{1, 100, 1000} {
		ws = append(ws, workload{name: fmt.Sprintf("W6-%dpid", n), partitions: 1, producers: n, recordSize: 1024,
			warmup: warm, duration: dur, dupCheck: true, kafkaOnly: true})
	}
	return ws
}

// filterCells drops the baseline's cells without a --baseline binary, and
// keeps only the workloads and systems named in the comma-separated only and
// systems lists (empty: all).
func filterCells(cells []cellSpec, baseline bool, only, systems string) []cellSpec {
	in := func(list, name string) bool { return list == "" || slices.Contains(strings.Split(list, ","), name) }
	var out []cellSpec
	for _, c := range cells {
		isBase := c.s == sysBaseAlways || c.s == sysBaseNever
		if isBase && !baseline || !in(only, c.w.name) || !in(systems, c.s.name) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// plan pairs every workload with the systems of both durability modes. A
// catch-up fetch measures the read path only, so W7 runs on the page-cache
// systems (filling a 1 GiB backlog at NATS `always`'s ~3k msgs/s would take
// minutes and measure nothing about reads).
func plan(ws []workload) []cellSpec {
	var cells []cellSpec
	for _, w := range ws {
		modes := [][]system{append(durableSystems, sysBaseAlways), append(pageCacheSystems, sysBaseNever)}
		if w.fetch {
			modes = modes[1:]
		}
		for _, m := range modes {
			for _, s := range m {
				// NATS has no partitions: only its 1-partition cells compare.
				if s.kind == "nats" && (w.partitions > 1 || w.kafkaOnly) {
					continue
				}
				cells = append(cells, cellSpec{w, s})
			}
		}
	}
	return cells
}

// run executes every round and returns what was measured, with the first
// error that stopped it (a failed cell is recorded and the run goes on).
func (c *compareConfig) run(ctx context.Context) (*report, error) {
	if err := os.MkdirAll(c.workDir, 0o755); err != nil {
		return nil, err
	}
	rep := &report{Started: time.Now().UTC().Format(time.RFC3339), Rounds: c.rounds,
		Note: "ratios are kawa_over/peer of the same round's cells (throughput: >1 is Kawa faster; latency, CPU and RSS: <1 is Kawa better); median [min-max] over rounds"}
	var failed error
	for r := range c.rounds {
		dir, cleanup, err := calibrationDir(c.workDir)
		if err != nil {
			return rep, err
		}
		cal, err := calibrate(ctx, dir, c.calibEach)
		cleanup()
		if err != nil {
			return rep, fmt.Errorf("round %d calibration: %w", r, err)
		}
		cal.Round = r
		rep.Calibration = append(rep.Calibration, cal)
		fmt.Fprintf(c.stdout, "round %d: fdatasync 4 KiB p50 %.0f µs (preallocated %.0f µs), loopback RTT p50 %.1f µs\n",
			r, cal.syncP50(4<<10, false), cal.syncP50(4<<10, true), cal.RTT.P50)
		order := roundOrder(c.cells, r)
		for i, spec := range order {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			res := &cellResult{Workload: spec.w.name, System: spec.s.name, Durable: spec.s.durable}
			if spec.w.rateOf != "" {
				spec.w.rate = rep.rateFor(r, spec.w.rateOf, spec.s.name) * spec.w.rateFraction
			}
			if spec.w.rateOf != "" && spec.w.rate <= 0 {
				res.Error = fmt.Sprintf("no %s measurement on %s in this round to take %g of", spec.w.rateOf, spec.s.name, spec.w.rateFraction)
			} else {
				res = c.runCell(ctx, spec)
			}
			res.Round, res.Order, res.TargetRate = r, i, roundTo(spec.w.rate, 0)
			rep.Cells = append(rep.Cells, res)
			if res.Error != "" {
				failed = errors.Join(failed, fmt.Errorf("round %d %s on %s: %s", r, spec.w.name, spec.s.name, res.Error))
			}
			fsyncs := ""
			if res.Fsyncs > 0 {
				fsyncs = fmt.Sprintf("  %d fsyncs of %.0f B", res.Fsyncs, res.BytesPerFsync)
			}
			fmt.Fprintf(c.stdout, "  %-12s %-13s %10.0f rec/s  p50 %8.0f µs  p99 %8.0f µs  user %.2f sys %.2f CPU-s/GiB  RSS %.0f MiB%s %s\n",
				spec.w.name, spec.s.name, res.RecordsPerS, res.P50, res.P99, res.UserCPUPerGiB, res.SysCPUPerGiB,
				float64(res.PeakRSS)/(1<<20), fsyncs, res.Error)
		}
	}
	rep.flagCalibration()
	return rep, failed
}

// roundOrder is round r's cell order: cells rotated by r positions, except
// that a cell whose rate derives from another workload's measurement (W3)
// runs after every other cell of the round, so that measurement exists.
func roundOrder(cells []cellSpec, r int) []cellSpec {
	var first, after []cellSpec
	for i := range cells {
		spec := cells[(i+r)%len(cells)]
		if spec.w.rateOf != "" {
			after = append(after, spec)
		} else {
			first = append(first, spec)
		}
	}
	return append(first, after...)
}

// runCell starts a fresh broker for spec, runs the workload and stops it.
func (c *compareConfig) runCell(ctx context.Context, spec cellSpec) *cellResult {
	res := &cellResult{Workload: spec.w.name, System: spec.s.name, Durable: spec.s.durable}
	b, err := c.startBroker(ctx, spec.s)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	f0, by0, ferr := b.fsyncStats(ctx)
	err = runWorkload(ctx, b, spec, res)
	f1, by1, ferr1 := b.fsyncStats(ctx)
	if ferr = errors.Join(ferr, ferr1); err == nil && ferr != nil {
		err = ferr
	}
	if f1 > f0 {
		// Over the whole cell (warmup and fill included): bytes per fsync
		// is a ratio, so the extra seconds barely move it.
		res.Fsyncs, res.BytesPerFsync = int64(f1-f0), roundTo((by1-by0)/(f1-f0), 0)
	}
	if serr := b.stop(); err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// runWorkload drives one running broker with spec's workload.
func runWorkload(ctx context.Context, b *brokerProc, spec cellSpec, res *cellResult) error {
	w := spec.w
	switch {
	case w.pipeline:
		pb := &pipelineBench{brokers: b.addr, in: "w5-in", out: "w5-out", group: "w5-transform", partitions: w.partitions, recordSize: w.recordSize, rate: w.rate,
			warmup: w.warmup, duration: w.duration, commitRecords: w.txnRecords, commitEvery: w.txnEvery,
			drain: 30 * time.Second, brokerPID: b.pid()}
		pr := &pipelineResult{}
		err := pb.run(ctx, pr)
		res.fromPipeline(pr)
		return err
	case w.consumers > 0:
		pb := &produceBench{brokers: b.addr, topic: "bench", partitions: w.partitions, partitionsSet: true,
			producers: w.producers, recordSize: w.recordSize, duration: w.duration, warmup: w.warmup,
			// W2's one producer's 50,000 buffered records over all 16, so
			// the cell does not hold 800 MB in the harness.
			linger: 10 * time.Millisecond, maxBuffered: max(1, 50000/w.producers), brokerPID: b.pid()}
		opts, err := cli.ProducerOpts(cli.NewFlagSet("produce", ""), "all", true)
		if err != nil {
			return err
		}
		pb.clientOpts = opts
		mb := &partitionsBench{produce: pb, consumers: w.consumers, settle: 3 * time.Second, brokerPID: b.pid()}
		pr := &partitionsResult{}
		err = mb.run(ctx, pr)
		res.fromPartitions(pr)
		return err
	case spec.s.kind == "nats" && w.fetch:
		if err := natsFill(ctx, b.url(), w.backlog/int64(w.recordSize), w.recordSize); err != nil {
			return err
		}
		fr, err := natsFetch(ctx, b.url(), b.pid())
		res.fromFetch(fr)
		return err
	case spec.s.kind == "nats":
		pr, err := natsProduce(ctx, b.url(), w, b.pid())
		res.fromProduce(pr)
		return err
	case w.fetch:
		if err := kafkaFill(ctx, b.addr, w.backlog/int64(w.recordSize), w.recordSize); err != nil {
			return err
		}
		fb := &fetchBench{brokers: b.addr, topic: "bench", idle: 10 * time.Second,
			fetchMaxBytes: 50 << 20, partitionMaxBytes: 1 << 20, brokerPID: b.pid()}
		fr := &fetchResult{Bench: "fetch", Topic: "bench"}
		err := fb.run(ctx, cli.NewFlagSet("fetch", ""), fr)
		res.fromFetch(fr)
		return err
	default:
		acks, idempotent := "all", true
		if w.acks1 {
			acks, idempotent = "1", false
		}
		opts, err := cli.ProducerOpts(cli.NewFlagSet("produce", ""), acks, idempotent)
		if err != nil {
			return err
		}
		pb := &produceBench{brokers: b.addr, topic: "bench", partitions: w.partitions, partitionsSet: true,
			producers: w.producers, recordSize: w.recordSize, duration: w.duration, warmup: w.warmup,
			sync: w.sync, rate: w.rate, linger: 10 * time.Millisecond, maxBuffered: 50000, brokerPID: b.pid(), clientOpts: opts,
			txnRecords: w.txnRecords, txnEvery: w.txnEvery, keyed: w.dupCheck}
		if w.maxBuffered > 0 {
			pb.maxBuffered = w.maxBuffered
		}
		if w.dupCheck {
			// The same records in flight over all producers whatever
			// their count, so W6 measures producer IDs, not buffering.
			pb.maxBuffered = max(1, 20000/w.producers)
		}
		pr := &produceResult{Bench: "produce"}
		err = pb.run(ctx, pr)
		res.fromProduce(pr)
		if err == nil && w.dupCheck {
			var d dupCount
			d, err = countDuplicates(ctx, b.addr, "bench")
			res.ReadBack, res.Duplicates = &d.records, &d.duplicates
			if err == nil && d.duplicates > 0 {
				err = fmt.Errorf("%d duplicate records of %d read back", d.duplicates, d.records)
			}
		}
		return err
	}
}
