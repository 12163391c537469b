package verify

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// resultOf checks a builder's history the way Run does.
func resultOf(b *builder) *Result {
	r := &Result{Semantics: AllSemantics, Plan: b.plan, Started: time.Unix(0, 0), FaultsInjected: 1, Seed: 1}
	r.check(b.events)
	return r
}

func TestResultTableAndVerdict(t *testing.T) {
	t.Parallel()
	b := newBuilder()
	b.add(Event{T: 1500, End: 2_600_000_000, Kind: KindFault, Fault: "kill", W: "broker"})
	b.add(Event{Kind: KindProc, W: "amo-c1.1", ID: "amo-p0.1:3", Topic: "kv-t-amo", Part: 1, Off: 0, Gen: 2})
	r := resultOf(b)
	if r.Pass() {
		t.Fatal("a duplicate under at-most-once passed")
	}
	if v := r.Violations(); len(v) != 1 || v[0].Check != CheckDupE2E || v[0].Semantic != AtMostOnce {
		t.Fatalf("violations %+v", v)
	}
	var out bytes.Buffer
	r.WriteTable(&out)
	s := out.String()
	for _, want := range []string{
		"at-most-once   dup-e2e          0         1         FAIL",
		"at-least-once  dup-e2e          any       0         PASS",
		"exactly-once   aborted-read     0         0         PASS",
		"at-most-once   aborted-read     n/a       -         -",
		"at-most-once dup-e2e: 1, first:\n  amo-p0.1:3 processed 2 times",
		"faults injected: 1 (kill 1)",
		"records checked: 20 ",
		"at-most-once: FAIL\nat-least-once: PASS\nexactly-once: PASS\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}

func TestResultHTMLIsSelfContained(t *testing.T) {
	t.Parallel()
	b := newBuilder()
	b.add(Event{T: 1_000_000_000, End: 2_500_000_000, Kind: KindFault, Fault: "pause", W: "broker"})
	r := resultOf(b)
	var out bytes.Buffer
	if err := r.WriteHTML(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"<svg", "throughput (records/s)", "produce latency", "<title>pause broker</title>", "kawa verify: PASS"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"http://", "https://", "<script"} {
		if strings.Contains(strings.ReplaceAll(s, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("report contains %q: it must not need the network", bad)
		}
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := resultOf(newBuilder())
	var out bytes.Buffer
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Records != 20 || len(back.Findings) != 3*len(AllChecks) || back.Plan.RunID != "t" {
		t.Errorf("round trip: records %d, findings %d, plan %+v", back.Records, len(back.Findings), back.Plan)
	}
}

func TestHistoryFileRoundTrip(t *testing.T) {
	t.Parallel()
	b := newBuilder()
	var file bytes.Buffer
	h := NewHistory(&file)
	h.Add(b.events...)
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	file.WriteString(`{"t":1,"k":"ack","id":"torn`) // a worker killed mid-line
	back, err := ReadHistory(&file)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(b.events) {
		t.Fatalf("read %d events, wrote %d", len(back), len(b.events))
	}
	fs := CheckHistory(b.plan, back, AllSemantics).Findings
	if got := observed(fs); len(got) != 0 {
		t.Errorf("history read back has anomalies %v", got)
	}
	if h.Acked() != int64(countKind(b.events, KindAck)) || h.Processed() != int64(countKind(b.events, KindProc)) {
		t.Errorf("counters acked %d processed %d", h.Acked(), h.Processed())
	}
}

func countKind(evs []Event, k Kind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func TestSeriesBuckets(t *testing.T) {
	t.Parallel()
	evs := []Event{
		{T: 100, Kind: KindAck, Lat: 1000}, {T: 200, Kind: KindAck, Lat: 3000}, {T: 300, Kind: KindProc},
		{T: 2_100_000_000, Kind: KindAck, Lat: 5000},
	}
	got := series(evs, time.Unix(0, 0))
	if len(got) != 3 || got[0].Acked != 2 || got[0].Processed != 1 || got[1].Acked != 0 || got[2].Acked != 1 {
		t.Fatalf("buckets %+v", got)
	}
	if got[0].P50ms != 3 || got[2].P99ms != 5 {
		t.Errorf("latencies %+v", got)
	}
}
