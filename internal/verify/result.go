package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is the outcome of a run: what ran, what was injected, what the
// checkers found. It is written as result.json.
type Result struct {
	Semantics      []Semantic       `json:"semantics"`
	Faults         []FaultKind      `json:"faults"`
	Seed           uint64           `json:"seed"`
	Duration       string           `json:"duration"`
	Mode           string           `json:"mode"` // "spawn" or "brokers"
	Brokers        []string         `json:"brokers"`
	Started        time.Time        `json:"started"`
	Plan           *Plan            `json:"plan"`
	Schedule       []ScheduledFault `json:"schedule"`
	FaultsInjected int              `json:"faults_injected"`
	FaultLog       []Event          `json:"fault_log"`
	Findings       []Finding        `json:"findings"`
	Records        int              `json:"records_checked"`
	Txns           TxnStats         `json:"transactions"`
	Share          *ShareStats      `json:"share,omitempty"`
	Events         int              `json:"history_events"`
	CheckSeconds   float64          `json:"check_seconds"`
	Slots          []SlotStatus     `json:"workers"`
	Notes          []string         `json:"notes,omitempty"`
	Series         []Bucket         `json:"series"`

	proxy NetFaults
}

// Bucket is one second of the run for the charts.
type Bucket struct {
	Second    int     `json:"s"`
	Acked     int     `json:"acked"`
	Processed int     `json:"processed"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
}

// check fills the findings and summaries from the history.
func (r *Result) check(events []Event) {
	began := time.Now()
	c := CheckHistory(r.Plan, events, r.Semantics)
	r.Findings, r.Records, r.Txns = c.Findings, c.Records, c.Txns
	for _, sem := range r.Semantics {
		if sem == Share {
			r.Share = &c.Share
		}
	}
	r.CheckSeconds = time.Since(began).Seconds()
	r.Events = len(events)
	drained := map[string]bool{}
	for _, e := range events {
		switch e.Kind {
		case KindFault:
			r.FaultLog = append(r.FaultLog, e)
		case KindDrained:
			drained[strings.SplitN(e.W, ".", 2)[0]] = true
		}
	}
	for _, s := range r.Plan.Slots {
		if s.Role == WorkerReader && !drained[s.Slot] {
			r.Notes = append(r.Notes, fmt.Sprintf("reader %s never read up to the fences; its reads are checked for aborted data and the LSO but not for torn transactions", s.Slot))
		}
	}
	r.Series = series(events, r.Started)
}

// Pass reports whether every semantic kept its guarantees.
func (r *Result) Pass() bool { return len(r.Violations()) == 0 }

// Violations lists the failing findings.
func (r *Result) Violations() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if !f.Pass {
			out = append(out, f)
		}
	}
	return out
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// TableRows are the findings the table and the HTML report show: all but
// the other family's n/a rows (share-group checks of the classic
// semantics, consumer-group and transaction checks of share).
func (r *Result) TableRows() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Expected == ExpectNA && (f.Semantic == Share) != slices.Contains(shareChecks, f.Check) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// WriteTable writes the terminal summary: the semantic × anomaly table,
// the first examples of every anomaly observed, and the run's totals.
func (r *Result) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEMANTIC\tANOMALY\tEXPECTED\tOBSERVED\tRESULT")
	for _, f := range r.TableRows() {
		res := "PASS"
		if !f.Pass {
			res = "FAIL"
		}
		obs := fmt.Sprint(f.Observed)
		if f.Expected == ExpectNA {
			obs, res = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Semantic, f.Check, f.Expected, obs, res)
	}
	tw.Flush()
	for _, f := range r.Findings {
		if f.Observed == 0 || f.Check == CheckRecords {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: %d, first:\n", f.Semantic, f.Check, f.Observed)
		for _, ex := range f.Examples {
			fmt.Fprintf(w, "  %s\n", ex)
		}
	}
	fmt.Fprintf(w, "\nfaults injected: %d (%s)\n", r.FaultsInjected, r.faultSummary())
	rate := 0.0
	if r.CheckSeconds > 0 {
		rate = float64(r.Events) / r.CheckSeconds
	}
	fmt.Fprintf(w, "records checked: %d (history events: %d, checked in %.2fs, %.0f events/s)\n",
		r.Records, r.Events, r.CheckSeconds, rate)
	if t := r.Txns; t != (TxnStats{}) {
		fmt.Fprintf(w, "transactions: %d committed, %d aborted, %d outcome unknown, %d left open by a crashed writer; read_uncommitted saw %d records of aborted ones\n",
			t.Committed, t.Aborted, t.Unknown, t.Open, t.AbortedVisibleRU)
	}
	if r.Share != nil {
		fmt.Fprintf(w, "share: %s\n", r.Share)
	}
	for _, s := range r.Slots {
		if s.LastErr != "" {
			fmt.Fprintf(w, "worker %s restarted %d times; last error: %s\n", s.Slot, s.Restarts, s.LastErr)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, sem := range r.Semantics {
		verdict := "PASS"
		for _, f := range r.Findings {
			if f.Semantic == sem && !f.Pass {
				verdict = "FAIL"
			}
		}
		fmt.Fprintf(w, "%s: %s\n", sem, verdict)
	}
}

// faultSummary counts injected faults by kind, e.g. "kill 4, client-crash 5".
func (r *Result) faultSummary() string {
	n := map[string]int{}
	for _, e := range r.FaultLog {
		n[e.Fault]++
	}
	if len(n) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(n) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(parts, ", ")
}

// series buckets acks, processing and ack latency by second since start.
func series(events []Event, start time.Time) []Bucket {
	t0 := start.UnixNano()
	var out []Bucket
	lat := map[int][]int64{}
	at := func(t int64) int {
		s := int((t - t0) / int64(time.Second))
		if s < 0 {
			s = 0
		}
		for len(out) <= s {
			out = append(out, Bucket{Second: len(out)})
		}
		return s
	}
	for _, e := range events {
		switch e.Kind {
		case KindAck:
			s := at(e.T)
			out[s].Acked++
			lat[s] = append(lat[s], e.Lat)
		case KindProc, KindDeliver:
			out[at(e.T)].Processed++
		}
	}
	for s, l := range lat {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		out[s].P50ms = float64(l[len(l)/2]) / 1e3
		out[s].P99ms = float64(l[len(l)*99/100]) / 1e3
	}
	return out
}
