package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// svg renders the median of each cell over rounds as horizontal bars on a
// log scale: records/s per workload and system, then publish latency p50
// and p99 (produce workloads only). Plain SVG, no library: a dozen rects.
func (r *report) svg() string {
	type bar struct {
		label string
		value float64
		unit  string
	}
	var sections [][]bar
	var titles []string
	var workloads []string
	systems := map[string][]string{}
	for _, c := range r.Cells {
		if _, ok := systems[c.Workload]; !ok {
			workloads = append(workloads, c.Workload)
		}
		if !slices.Contains(systems[c.Workload], c.System) {
			systems[c.Workload] = append(systems[c.Workload], c.System)
		}
	}
	for _, w := range workloads {
		var thr, lat []bar
		for _, s := range systems[w] {
			if v, ok := r.medianOf(w, s, func(c *cellResult) float64 { return c.RecordsPerS }); ok {
				thr = append(thr, bar{s, v, "rec/s"})
			}
			p50, _ := r.medianOf(w, s, func(c *cellResult) float64 { return c.P50 })
			p99, _ := r.medianOf(w, s, func(c *cellResult) float64 { return c.P99 })
			if p50 > 0 {
				lat = append(lat, bar{s + " p50", p50, "µs"}, bar{s + " p99", p99, "µs"})
			}
		}
		sections, titles = append(sections, thr), append(titles, w+": records/s (median over rounds, log scale)")
		if len(lat) > 0 {
			sections, titles = append(sections, lat), append(titles, w+": publish latency from intended send time (µs, log scale)")
		}
	}
	const width, left, barH, gap = 900, 220, 16, 4
	var b strings.Builder
	y := 30
	for _, sec := range sections {
		y += 24 + len(sec)*(barH+gap)
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, y+10)
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="14">kawa-bench compare, %d rounds, started %s</text>`+"\n", r.Rounds, html.EscapeString(r.Started))
	y = 30
	for i, sec := range sections {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+14, html.EscapeString(titles[i]))
		y += 24
		top := 1.0
		for _, br := range sec {
			top = math.Max(top, br.value)
		}
		scale := float64(width-left-120) / math.Log10(top*10)
		for _, br := range sec {
			w := int(math.Max(1, math.Log10(math.Max(br.value, 1)*10)*scale))
			color := "#888"
			if strings.HasPrefix(br.label, "kawa") {
				color = "#d2691e"
			}
			fmt.Fprintf(&b, `<text x="10" y="%d">%s</text><rect x="%d" y="%d" width="%d" height="%d" fill="%s"/><text x="%d" y="%d">%.4g %s</text>`+"\n",
				y+12, html.EscapeString(br.label), left, y, w, barH, color, left+w+6, y+12, br.value, br.unit)
			y += barH + gap
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
