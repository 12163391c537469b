package verify

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// WriteHTML writes a self-contained report: the summary table, throughput
// and latency charts as inline SVG with the fault windows shaded, the fault
// log and the anomaly examples. It loads nothing from the network.
func (r *Result) WriteHTML(w io.Writer) error {
	windows := r.faultWindows()
	thr := chart{Title: "throughput (records/s)", Unit: "rec/s", Windows: windows, Series: []line{
		{Name: "acked", Color: "#1f77b4", Values: pick(r.Series, func(b Bucket) float64 { return float64(b.Acked) })},
		{Name: "processed", Color: "#2ca02c", Values: pick(r.Series, func(b Bucket) float64 { return float64(b.Processed) })},
	}}
	lat := chart{Title: "produce latency (ms, send to ack)", Unit: "ms", Windows: windows, Series: []line{
		{Name: "p50", Color: "#9467bd", Values: pick(r.Series, func(b Bucket) float64 { return b.P50ms })},
		{Name: "p99", Color: "#d62728", Values: pick(r.Series, func(b Bucket) float64 { return b.P99ms })},
	}}
	return reportTmpl.Execute(w, map[string]any{
		"R": r, "Pass": r.Pass(), "Throughput": thr.svg(), "Latency": lat.svg(), "Windows": windows,
	})
}

// window is one fault on the time axis, in seconds since the start.
type window struct {
	From, To    float64
	Kind, Label string
}

func (r *Result) faultWindows() []window {
	t0 := r.Started.UnixNano()
	var out []window
	for _, e := range r.FaultLog {
		label := e.Fault
		if e.W != "" {
			label += " " + e.W
		}
		if e.Err != "" {
			label += " (" + e.Err + ")"
		}
		out = append(out, window{From: float64(e.T-t0) / 1e9, To: float64(e.End-t0) / 1e9, Kind: e.Fault, Label: label})
	}
	return out
}

func pick(bs []Bucket, f func(Bucket) float64) []float64 {
	out := make([]float64, len(bs))
	for i, b := range bs {
		out[i] = f(b)
	}
	return out
}

type line struct {
	Name, Color string
	Values      []float64
}

type chart struct {
	Title, Unit string
	Series      []line
	Windows     []window
}

const (
	chartW, chartH = 960, 240
	padL, padR     = 60, 20
	padT, padB     = 28, 30
)

// svg renders the chart: fault windows behind, then one polyline per series.
func (c chart) svg() template.HTML {
	n, ymax := 1, 1.0
	for _, s := range c.Series {
		n = max(n, len(s.Values))
		for _, v := range s.Values {
			ymax = math.Max(ymax, v)
		}
	}
	ymax = niceCeil(ymax)
	xs := func(sec float64) float64 { return padL + sec/float64(n)*(chartW-padL-padR) }
	ys := func(v float64) float64 { return chartH - padB - v/ymax*(chartH-padT-padB) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(c.Title))
	for _, w := range c.Windows {
		x0, x1 := xs(w.From), xs(w.To)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f5a623" fill-opacity="0.25"><title>%s</title></rect>`,
			x0, padT, math.Max(x1-x0, 2), chartH-padT-padB, template.HTMLEscapeString(w.Label))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="9" fill="#a0522d">%s</text>`, x0+2, padT+10, template.HTMLEscapeString(w.Kind))
	}
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		y := ys(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padL, y, chartW-padR, y, padL-4, y+4, trimFloat(v))
	}
	step := max(1, n/10)
	for s := 0; s <= n; s += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%ds</text>`, xs(float64(s)), chartH-padB+16, s)
	}
	for i, s := range c.Series {
		var pts []string
		for j, v := range s.Values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(float64(j)+0.5), ys(v)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.Color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%d" y="16" fill="%s">■ %s</text>`, chartW-padR-180+i*90, s.Color, s.Name)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>kawa verify report</title>
<style>
body{font-family:sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}
.PASS{background:#dff0d8}.FAIL{background:#f2dede;font-weight:bold}
code{font-size:12px}
</style></head><body>
<h1>kawa verify: {{if .Pass}}PASS{{else}}FAIL{{end}}</h1>
<p>semantics {{range .R.Semantics}}{{.}} {{end}}· faults {{range .R.Faults}}{{.}} {{else}}none{{end}}·
duration {{.R.Duration}} · seed {{.R.Seed}} · mode {{.R.Mode}} ({{range .R.Brokers}}{{.}} {{end}}) · started {{.R.Started.Format "2006-01-02 15:04:05"}}</p>
<p>faults injected: {{.R.FaultsInjected}} · records checked: {{.R.Records}} · history events: {{.R.Events}} · check time {{printf "%.2f" .R.CheckSeconds}}s</p>
<h2>Guarantees</h2>
<table><tr><th>semantic</th><th>anomaly</th><th>expected</th><th>observed</th><th>result</th><th>first examples</th></tr>
{{range .R.TableRows}}<tr><td>{{.Semantic}}</td><td>{{.Check}}</td><td>{{.Expected}}</td>
{{if eq .Expected "n/a"}}<td>-</td><td>-</td>{{else}}<td>{{.Observed}}</td><td class="{{if .Pass}}PASS{{else}}FAIL{{end}}">{{if .Pass}}PASS{{else}}FAIL{{end}}</td>{{end}}
<td>{{range .Examples}}<code>{{.}}</code><br>{{end}}</td></tr>
{{end}}</table>
<h2>Throughput and latency</h2>
<p>Shaded: fault windows (hover for the fault; a client crash or an armed drop is an instant). Per second of the run, end-of-run steps included.</p>
{{with .R.Share}}<p>share: {{.}}</p>{{end}}
{{with .R.Txns}}<p>transactions: {{.Committed}} committed, {{.Aborted}} aborted, {{.Unknown}} outcome unknown, {{.Open}} left open by a crashed writer; read_uncommitted saw {{.AbortedVisibleRU}} records of aborted ones</p>{{end}}
{{.Throughput}}<br>{{.Latency}}
<h2>Faults</h2>
<table><tr><th>from (s)</th><th>to (s)</th><th>fault</th></tr>
{{range .Windows}}<tr><td>{{printf "%.2f" .From}}</td><td>{{printf "%.2f" .To}}</td><td>{{.Label}}</td></tr>
{{else}}<tr><td colspan="3">none</td></tr>{{end}}</table>
<h2>Workers</h2>
<table><tr><th>slot</th><th>role</th><th>restarts</th><th>last error</th></tr>
{{range .R.Slots}}<tr><td>{{.Slot}}</td><td>{{.Role}}</td><td>{{.Restarts}}</td><td>{{.LastErr}}</td></tr>{{end}}</table>
{{if .R.Notes}}<h2>Notes</h2><ul>{{range .R.Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
</body></html>
`))
