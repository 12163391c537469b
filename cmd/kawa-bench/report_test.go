package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestComputeRatios checks per-round ratios Kawa/peer at equal durability:
// median and range over rounds, a failed cell left out, no cross-durability
// pair, and the noisy flag.
func TestComputeRatios(t *testing.T) {
	t.Parallel()
	r := &report{Rounds: 3}
	add := func(round int, sys string, rps, p50 float64, errMsg string) {
		r.Cells = append(r.Cells, &cellResult{Round: round, Workload: "W1", System: sys, RecordsPerS: rps, P50: p50, Error: errMsg})
	}
	// Kawa/kfake-sync throughput per round: 2, 4, 3 -> median 3 [2-4].
	add(0, "kawa-always", 200, 100, "")
	add(0, "kfake-sync", 100, 400, "")
	add(1, "kawa-always", 400, 100, "")
	add(1, "kfake-sync", 100, 200, "")
	add(2, "kawa-always", 300, 100, "")
	add(2, "kfake-sync", 100, 300, "")
	// Round 0's NATS cell failed: only rounds 1 and 2 pair, 0.5 and 1.
	add(0, "nats-always", 50, 100, "broken")
	add(1, "nats-always", 800, 100, "")
	add(2, "nats-always", 300, 100, "")
	add(0, "kfake-datadir", 1000, 10, "") // no kawa-never: no ratio
	r.computeRatios()
	got := r.findRatio("W1", "records_per_s", "kfake-sync")
	if got == nil || got.Median != 3 || got.Min != 2 || got.Max != 4 || !got.Noisy || got.KawaOver != "kawa-always" {
		t.Fatalf("kfake-sync throughput ratio %+v, want median 3 [2-4] noisy", got)
	}
	lat := r.findRatio("W1", "p50_us", "kfake-sync") // 100/400, 100/200, 100/300
	if lat == nil || lat.Median != 0.3333 || lat.Min != 0.25 || lat.Max != 0.5 {
		t.Fatalf("latency ratio %+v, want median 0.3333 [0.25-0.5]", lat)
	}
	nats := r.findRatio("W1", "records_per_s", "nats-always")
	if nats == nil || len(nats.Rounds) != 2 || nats.Median != 0.75 {
		t.Fatalf("nats ratio %+v, want 2 rounds, median 0.75", nats)
	}
	if rt := r.findRatio("W1", "records_per_s", "kfake-datadir"); rt != nil {
		t.Fatalf("ratio without a kawa-never cell: %+v", rt)
	}
}

// TestFlagCalibration marks a round whose fdatasync p50 is > 30 % off.
func TestFlagCalibration(t *testing.T) {
	t.Parallel()
	cal := func(round int, sync, rtt float64) *calibration {
		return &calibration{Round: round, Syncs: []syncProbe{{Size: 4 << 10, P50: sync}}, RTT: latencyProbe{P50: rtt}}
	}
	r := &report{Calibration: []*calibration{cal(0, 150, 10), cal(1, 160, 11), cal(2, 400, 10)}}
	r.flagCalibration()
	if len(r.CalibrationOutliers) != 1 || r.CalibrationOutliers[0] != 2 {
		t.Fatalf("outliers %v, want [2]", r.CalibrationOutliers)
	}
}

// TestCalibrateProbes runs W0 briefly on this machine's disk and loopback:
// every probe measures something, and the JSON report and SVG are written.
func TestCalibrateProbes(t *testing.T) {
	t.Parallel()
	c, err := calibrate(context.Background(), t.TempDir(), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Syncs) != 2*len(calibrationSizes) {
		t.Fatalf("%d fdatasync probes, want %d", len(c.Syncs), 2*len(calibrationSizes))
	}
	for _, s := range c.Syncs {
		if s.Ops < 1 || s.P50 <= 0 || s.P99 < s.P50 {
			t.Errorf("probe %+v measured nothing", s)
		}
	}
	if c.RTT.Ops < 1 || c.RTT.P50 <= 0 {
		t.Errorf("rtt probe %+v measured nothing", c.RTT)
	}
	r := &report{Rounds: 1, Calibration: []*calibration{c},
		Cells: []*cellResult{{Workload: "W1", System: "kawa-always", RecordsPerS: 2000, P50: 400, P99: 900}}}
	r.computeRatios()
	dir := t.TempDir()
	if err := r.write(filepath.Join(dir, "out", "latest.json"), filepath.Join(dir, "out", "latest.svg")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Cells []map[string]any `json:"cells"`
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Cells) != 1 {
		t.Fatalf("report %s: %v", b, err)
	}
	for _, k := range []string{"workload", "system", "records_per_s", "p50_us", "p99_us", "user_cpu_s_per_gib", "sys_cpu_s_per_gib", "peak_rss_bytes"} {
		if _, ok := back.Cells[0][k]; !ok {
			t.Errorf("cell has no %q: %v", k, back.Cells[0])
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "out", "latest.svg"))
	if err != nil || !strings.Contains(string(svg), "kawa-always p50") {
		t.Fatalf("svg %q, %v", svg, err)
	}
}

// TestParseFsyncMetrics reads Kawa's two gauges from Prometheus text and
// refuses text without them.
func TestParseFsyncMetrics(t *testing.T) {
	t.Parallel()
	text := "# HELP kawa_log_fsyncs x\n# TYPE kawa_log_fsyncs gauge\nkawa_log_fsyncs 42\nkawa_log_fsynced_bytes 4.2e+06\ngo_goroutines 7\n"
	f, b, err := parseFsyncMetrics(text)
	if err != nil || f != 42 || b != 4.2e6 {
		t.Fatalf("got %v, %v, %v; want 42, 4.2e6", f, b, err)
	}
	if _, _, err := parseFsyncMetrics("go_goroutines 7\n"); err == nil {
		t.Fatal("metrics without the fsync gauges accepted")
	}
}

// TestFilterCells: without --baseline no base-* cell runs; --only and
// --systems keep exactly the cells they name.
func TestFilterCells(t *testing.T) {
	cells := plan(quickWorkloads())
	for _, c := range filterCells(cells, false, "", "") {
		if c.s == sysBaseAlways || c.s == sysBaseNever {
			t.Fatalf("baseline cell %s/%s without --baseline", c.w.name, c.s.name)
		}
	}
	got := filterCells(cells, true, "W1", "kawa-always,base-always")
	if len(got) != 2 || got[0].w.name != "W1" || got[1].w.name != "W1" ||
		got[0].s != sysKawaAlways || got[1].s != sysBaseAlways {
		t.Fatalf("W1 x {kawa-always, base-always}: got %v", got)
	}
	// W7 runs on the page-cache systems only: base-never, never base-always.
	var w7 []string
	for _, c := range filterCells(cells, true, "W7-fetch", "") {
		w7 = append(w7, c.s.name)
	}
	if strings.Join(w7, ",") != "kawa-never,kfake-datadir,nats-default,base-never" {
		t.Fatalf("W7 systems %v", w7)
	}
}
