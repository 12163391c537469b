package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// cellResult is one cell of one round; its JSON names are issue 10's.
type cellResult struct {
	Round         int     `json:"round"`
	Order         int     `json:"order"` // position in the round
	Workload      string  `json:"workload"`
	System        string  `json:"system"`
	Durable       bool    `json:"durable"` // fsync before the ack
	RecordsPerS   float64 `json:"records_per_s"`
	MiBPerS       float64 `json:"mib_per_s"`
	P50           float64 `json:"p50_us"` // publish latency from the intended send time; 0 for fetch
	P99           float64 `json:"p99_us"`
	P999          float64 `json:"p999_us"`
	UserCPUPerGiB float64 `json:"user_cpu_s_per_gib"`
	SysCPUPerGiB  float64 `json:"sys_cpu_s_per_gib"`
	PeakRSS       int64   `json:"peak_rss_bytes"`
	// Kawa only, from its metrics over the whole cell: .log fsyncs and the
	// bytes each made durable on average (group commit shows as > 1 batch).
	Fsyncs        int64   `json:"fsyncs,omitempty"`
	BytesPerFsync float64 `json:"bytes_per_fsync,omitempty"`
	// W3: the fixed rate the cell was driven at, records/s over all producers.
	TargetRate float64 `json:"target_rate,omitempty"`
	// W6: records read back from the log after the cell, and how many of
	// them repeated a (producer, sequence) key already read: 0 is right.
	ReadBack   *int64 `json:"read_back_records,omitempty"`
	Duplicates *int64 `json:"duplicates,omitempty"`
	// W5: transactions the transform stage committed, and the input
	// records that never came out of the pipeline (must be 0); p50/p99 are
	// end to end there (input send -> output read), publish_p50_us the
	// input producer's.
	Transactions *int64  `json:"transactions,omitempty"`
	Missing      *int64  `json:"missing_records,omitempty"`
	PublishP50   float64 `json:"publish_p50_us,omitempty"`
	CommitP50    float64 `json:"commit_p50_us,omitempty"` // W5: the transform's End(TryCommit): flush + EndTxn
	CommitP99    float64 `json:"commit_p99_us,omitempty"`
	// W8: broker RSS per partition at rest (after creating the topic, before
	// any client), broker CPU (% of one core) while the consumers poll the
	// idle partitions, and end to end latency (send -> consumer poll).
	CreateTopicS        float64 `json:"create_topic_s,omitempty"` // W8: creating the 1,000-partition topic
	IdleRSSPerPartition int64   `json:"idle_rss_per_partition_bytes,omitempty"`
	IdleCPUPercent      float64 `json:"idle_cpu_percent,omitempty"`
	E2EP50              float64 `json:"e2e_p50_us,omitempty"`
	E2EP99              float64 `json:"e2e_p99_us,omitempty"`
	Errors              int64   `json:"errors,omitempty"`
	Error               string  `json:"error,omitempty"`
}

func (c *cellResult) fromProduce(r *produceResult) {
	if r == nil {
		return
	}
	c.RecordsPerS, c.MiBPerS, c.Errors = r.RecordsPerS, r.MiBPerS, r.Errors
	c.P50, c.P99, c.P999 = r.Latency.P50, r.Latency.P99, r.Latency.P999
	c.fromUsage(r.Broker)
}

func (c *cellResult) fromPipeline(r *pipelineResult) {
	c.fromProduce(&r.Input)
	c.PublishP50 = r.Input.Latency.P50
	c.CommitP50, c.CommitP99 = r.Commit.P50, r.Commit.P99
	c.RecordsPerS, c.MiBPerS = r.RecordsPerS, r.MiBPerS
	c.P50, c.P99, c.P999 = r.E2E.P50, r.E2E.P99, r.E2E.P999
	missing := r.Expected - r.Delivered
	c.ReadBack, c.Duplicates, c.Transactions, c.Missing = &r.Delivered, &r.Duplicates, &r.Transactions, &missing
}

func (c *cellResult) fromPartitions(r *partitionsResult) {
	c.fromProduce(&r.Produce)
	c.IdleRSSPerPartition, c.IdleCPUPercent, c.CreateTopicS = r.IdleRSSPerPartition, r.IdleCPUPercent, r.CreateTopicS
	c.E2EP50, c.E2EP99 = r.E2E.P50, r.E2E.P99
}

func (c *cellResult) fromFetch(r *fetchResult) {
	if r == nil {
		return
	}
	c.RecordsPerS, c.MiBPerS = r.RecordsPerS, r.MiBPerS
	c.fromUsage(r.Broker)
}

func (c *cellResult) fromUsage(u *brokerUsage) {
	if u != nil {
		c.UserCPUPerGiB, c.SysCPUPerGiB, c.PeakRSS = u.UserPerGiB, u.SysPerGiB, u.PeakRSSBytes
	}
}

// rateFor is the records/s of workload on system in round, 0 if it was not
// measured there (or failed).
func (r *report) rateFor(round int, workload, system string) float64 {
	for _, c := range r.Cells {
		if c.Round == round && c.Workload == workload && c.System == system && c.Error == "" {
			return c.RecordsPerS
		}
	}
	return 0
}

// ratio is Kawa's figure over a peer's for one workload and metric, from
// the cells of each round (never a ratio of medians of different times).
type ratio struct {
	Workload string    `json:"workload"`
	Metric   string    `json:"metric"`
	KawaOver string    `json:"kawa_over"` // the Kawa system in the numerator
	Peer     string    `json:"peer"`      // the system in the denominator
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
	Rounds   []float64 `json:"rounds"`
	Noisy    bool      `json:"noisy,omitempty"` // max/min > 1.5
}

// report is the JSON file: calibration per round, every cell, the ratios.
type report struct {
	Started     string         `json:"started"`
	Rounds      int            `json:"rounds"`
	Note        string         `json:"note"`
	Calibration []*calibration `json:"calibration"`
	// CalibrationOutliers lists rounds whose fdatasync 4 KiB p50 or RTT p50
	// is more than 30 % off the median of all rounds (§4.3 step 2).
	CalibrationOutliers []int         `json:"calibration_outliers"`
	Cells               []*cellResult `json:"cells"`
	Ratios              []*ratio      `json:"ratios"`
}

// ratioMetrics are the metrics compared, with the cell field each reads.
var ratioMetrics = []struct {
	name string
	get  func(*cellResult) float64
}{
	{"records_per_s", func(c *cellResult) float64 { return c.RecordsPerS }},
	{"p50_us", func(c *cellResult) float64 { return c.P50 }},
	{"p99_us", func(c *cellResult) float64 { return c.P99 }},
	{"user_cpu_s_per_gib", func(c *cellResult) float64 { return c.UserCPUPerGiB }},
	{"sys_cpu_s_per_gib", func(c *cellResult) float64 { return c.SysCPUPerGiB }},
	{"peak_rss_bytes", func(c *cellResult) float64 { return float64(c.PeakRSS) }},
	{"e2e_p50_us", func(c *cellResult) float64 { return c.E2EP50 }},
	{"e2e_p99_us", func(c *cellResult) float64 { return c.E2EP99 }},
	{"idle_rss_per_partition_bytes", func(c *cellResult) float64 { return float64(c.IdleRSSPerPartition) }},
	{"idle_cpu_percent", func(c *cellResult) float64 { return c.IdleCPUPercent }},
	{"create_topic_s", func(c *cellResult) float64 { return c.CreateTopicS }},
}

// computeRatios fills Ratios: for each workload, each Kawa system against
// every peer of the same durability, per round.
func (r *report) computeRatios() {
	type key struct {
		round            int
		workload, system string
	}
	byKey := map[key]*cellResult{}
	var workloads []string
	for _, c := range r.Cells {
		if c.Error == "" {
			byKey[key{c.Round, c.Workload, c.System}] = c
		}
		if !slices.Contains(workloads, c.Workload) {
			workloads = append(workloads, c.Workload)
		}
	}
	pairs := [][2]system{
		{sysKawaAlways, sysKfakeSync}, {sysKawaAlways, sysNatsAlways},
		{sysKawaNever, sysKfakeDataDir}, {sysKawaNever, sysNatsDefault},
		{sysKawaAlways, sysBaseAlways}, {sysKawaNever, sysBaseNever},
	}
	r.Ratios = nil
	for _, w := range workloads {
		for _, p := range pairs {
			for _, m := range ratioMetrics {
				var per []float64
				for round := range r.Rounds {
					k, ok1 := byKey[key{round, w, p[0].name}]
					q, ok2 := byKey[key{round, w, p[1].name}]
					if ok1 && ok2 && m.get(q) > 0 && m.get(k) > 0 {
						per = append(per, roundTo(m.get(k)/m.get(q), 4))
					}
				}
				if len(per) == 0 {
					continue
				}
				rt := &ratio{Workload: w, Metric: m.name, KawaOver: p[0].name, Peer: p[1].name, Rounds: per}
				rt.Median, rt.Min, rt.Max = median(per), slices.Min(per), slices.Max(per)
				rt.Noisy = rt.Max/rt.Min > 1.5
				r.Ratios = append(r.Ratios, rt)
			}
		}
	}
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return roundTo((s[n/2-1]+s[n/2])/2, 4)
}

// flagCalibration fills CalibrationOutliers.
func (r *report) flagCalibration() {
	r.CalibrationOutliers = []int{}
	var syncs, rtts []float64
	for _, c := range r.Calibration {
		syncs = append(syncs, c.syncP50(4<<10, false))
		rtts = append(rtts, c.RTT.P50)
	}
	if len(syncs) == 0 {
		return
	}
	ms, mr := median(syncs), median(rtts)
	off := func(x, m float64) bool { return m > 0 && math.Abs(x-m)/m > 0.30 }
	for i, c := range r.Calibration {
		if off(syncs[i], ms) || off(rtts[i], mr) {
			r.CalibrationOutliers = append(r.CalibrationOutliers, c.Round)
		}
	}
}

// medianOf is the median of metric over the error-free rounds of a cell.
func (r *report) medianOf(workload, system string, get func(*cellResult) float64) (float64, bool) {
	var xs []float64
	for _, c := range r.Cells {
		if c.Workload == workload && c.System == system && c.Error == "" {
			xs = append(xs, get(c))
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

// printTable writes the ratio table and the targets of issue 10.
func (r *report) printTable(w io.Writer) {
	fmt.Fprintf(w, "\nratios Kawa/peer, median [min-max] over %d rounds (throughput >1 = Kawa faster; latency/CPU/RSS <1 = Kawa better; * = max/min > 1.5)\n", r.Rounds)
	fmt.Fprintf(w, "%-12s %-19s %-13s %-14s %s\n", "workload", "metric", "kawa", "peer", "ratio")
	for _, rt := range r.Ratios {
		flag := ""
		if rt.Noisy {
			flag = " *"
		}
		fmt.Fprintf(w, "%-12s %-19s %-13s %-14s %.3g [%.3g-%.3g]%s\n", rt.Workload, rt.Metric, rt.KawaOver, rt.Peer, rt.Median, rt.Min, rt.Max, flag)
	}
	if len(r.workloadsWithPrefix("W5")) > 0 {
		fmt.Fprintln(w, "W5 (exactly-once pipeline; p50/p99 are end to end): Kawa and kfake only, NATS JetStream skipped (it has no transactions)")
	}
	if len(r.CalibrationOutliers) > 0 {
		fmt.Fprintf(w, "calibration outlier rounds (>30%% off the median): %v\n", r.CalibrationOutliers)
	}
	fmt.Fprintln(w, "\ntargets (issue 10):")
	for _, t := range r.targets() {
		fmt.Fprintln(w, "  "+t)
	}
}

// findRatio returns the ratio for workload/metric/peer, or nil.
func (r *report) findRatio(workload, metric, peer string) *ratio {
	for _, rt := range r.Ratios {
		if rt.Workload == workload && rt.Metric == metric && rt.Peer == peer {
			return rt
		}
	}
	return nil
}

// targets evaluates the targets that this run's cells cover.
func (r *report) targets() []string {
	var out []string
	verdict := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "NOT MET"
	}
	ratioTarget := func(desc, workload, metric, peer string, ok func(float64) bool) {
		if rt := r.findRatio(workload, metric, peer); rt != nil {
			out = append(out, fmt.Sprintf("%-7s %s: %.3g [%.3g-%.3g]", verdict(ok(rt.Median)), desc, rt.Median, rt.Min, rt.Max))
		}
	}
	ratioTarget("W1 p50 kawa-always <= 0.8x nats-always", "W1", "p50_us", "nats-always", func(x float64) bool { return x <= 0.8 })
	// W1 against the disk's floor, per round: Kawa p50 - preallocated 1 KiB fdatasync p50.
	var over []float64
	for _, c := range r.Cells {
		if c.Workload == "W1" && c.System == "kawa-always" && c.Error == "" && c.Round < len(r.Calibration) {
			over = append(over, c.P50-r.Calibration[c.Round].syncP50(1<<10, true))
		}
	}
	if len(over) > 0 {
		m := median(over)
		out = append(out, fmt.Sprintf("%-7s W1 p50 kawa-always <= preallocated 1 KiB fdatasync p50 + 150 µs: %+.0f µs over the floor [%+.0f..%+.0f]",
			verdict(m <= 150), m, slices.Min(over), slices.Max(over)))
	}
	for _, w := range r.workloadsWithPrefix("W2") {
		ratioTarget(w+" rec/s kawa-always >= 1.5x kfake-sync", w, "records_per_s", "kfake-sync", func(x float64) bool { return x >= 1.5 })
		ratioTarget(w+" rec/s kawa-always >= 50x nats-always", w, "records_per_s", "nats-always", func(x float64) bool { return x >= 50 })
		ratioTarget(w+" rec/s kawa-never >= 1.2x kfake-datadir", w, "records_per_s", "kfake-datadir", func(x float64) bool { return x >= 1.2 })
		ratioTarget(w+" user CPU/GiB kawa-always <= 0.8x kfake-sync", w, "user_cpu_s_per_gib", "kfake-sync", func(x float64) bool { return x <= 0.8 })
	}
	for _, w := range r.workloadsWithPrefix("W7") {
		u, ok1 := r.medianOf(w, "kawa-never", func(c *cellResult) float64 { return c.UserCPUPerGiB + c.SysCPUPerGiB })
		if ok1 {
			out = append(out, fmt.Sprintf("%-7s %s kawa broker CPU <= 0.5 s/GiB: %.3g s/GiB (median)", verdict(u <= 0.5), w, u))
		}
	}
	// W4 and W6 compare a Kawa system with itself, per round.
	for _, sys := range []string{"kawa-always", "kawa-never"} {
		if x := r.selfRatios("W4-txn-100ms", "W4-idempotent", sys); len(x) > 0 {
			m := median(x)
			out = append(out, fmt.Sprintf("%-7s W4 %s transactions every 100 ms >= 0.95x idempotent rec/s: %.3g [%.3g-%.3g]",
				verdict(m >= 0.95), sys, m, slices.Min(x), slices.Max(x)))
		}
		if x := r.selfRatios("W6-1000pid", "W6-1pid", sys); len(x) > 0 {
			m := median(x)
			out = append(out, fmt.Sprintf("%-7s W6 %s rec/s flat within 10%% from 1 to 1,000 producer IDs: 1000/1 %.3g [%.3g-%.3g]",
				verdict(m >= 0.9 && m <= 1.1), sys, m, slices.Min(x), slices.Max(x)))
		}
	}
	var dups, checked int64
	for _, c := range r.Cells {
		if c.Duplicates != nil && strings.HasPrefix(c.Workload, "W6") && strings.HasPrefix(c.System, "kawa") {
			dups, checked = dups+*c.Duplicates, checked+1
		}
	}
	if checked > 0 {
		out = append(out, fmt.Sprintf("%-7s W6 zero duplicates on kawa: %d in %d cells", verdict(dups == 0), dups, checked))
	}
	var lost, w5dups, w5 int64
	for _, c := range r.Cells {
		if c.Missing != nil && strings.HasPrefix(c.System, "kawa") {
			lost, w5dups, w5 = lost+*c.Missing, w5dups+*c.Duplicates, w5+1
		}
	}
	if w5 > 0 {
		out = append(out, fmt.Sprintf("%-7s W5 every input record read from the output exactly once on kawa: %d missing, %d duplicates in %d cells",
			verdict(lost == 0 && w5dups == 0), lost, w5dups, w5))
	}
	var peak int64
	for _, c := range r.Cells {
		if strings.HasPrefix(c.System, "kawa") && !strings.HasPrefix(c.Workload, "W8") {
			peak = max(peak, c.PeakRSS)
		}
	}
	if peak > 0 {
		out = append(out, fmt.Sprintf("%-7s kawa peak RSS <= 256 MiB over the W1-W7 cells: %.0f MiB", verdict(peak <= 256<<20), float64(peak)/(1<<20)))
	}
	for _, w := range r.workloadsWithPrefix("W8") {
		for _, sys := range []string{"kawa-always", "kawa-never"} {
			if m, ok := r.medianOf(w, sys, func(c *cellResult) float64 { return float64(c.IdleRSSPerPartition) }); ok {
				out = append(out, fmt.Sprintf("%-7s %s %s RSS <= 100 KiB per idle partition: %.0f KiB (median)", verdict(m <= 100<<10), w, sys, m/1024))
			}
		}
	}
	return out
}

// selfRatios is system's records/s in workload a over its records/s in
// workload b, one per round where both cells succeeded.
func (r *report) selfRatios(a, b, system string) []float64 {
	var out []float64
	for round := range r.Rounds {
		x, y := r.rateFor(round, a, system), r.rateFor(round, b, system)
		if x > 0 && y > 0 {
			out = append(out, roundTo(x/y, 4))
		}
	}
	return out
}

func (r *report) workloadsWithPrefix(p string) []string {
	var ws []string
	for _, c := range r.Cells {
		if strings.HasPrefix(c.Workload, p) && !slices.Contains(ws, c.Workload) {
			ws = append(ws, c.Workload)
		}
	}
	return ws
}

// write stores the JSON report and the SVG chart, creating their directory.
func (r *report) write(jsonPath, svgPath string) error {
	for _, p := range []string{jsonPath, svgPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(svgPath, []byte(r.svg()), 0o644)
}
