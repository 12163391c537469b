package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// cleanerGauges scrapes the per-partition cleaner gauges: metric name → "topic-partition" → value.
func cleanerGauges(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		out[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[mf.GetName()][labels["topic"]+"-"+labels["partition"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestCleanerGauges(t *testing.T) {
	t.Parallel()
	// Only CleanNow cleans: a background round between a pass and a scrape would change what it saw.
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.CleanerBackoff = time.Hour })
	compactedTopic(k, "c", nil)
	k.CreateTopic("plain", 1, nil) // cleanup.policy=delete: no series
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(k.B.CleanerCollector())
	cl := k.Client(kgo.DefaultProduceTopic("c"))
	produceKeys := func(n int) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "v%d", i)})
		}
		produceAll(t, cl, recs)
	}
	produceKeys(200)
	rollPast(t, cl, "c", "roll", 40)
	produceAll(t, k.Client(), []*kgo.Record{{Topic: "plain", Value: []byte("x")}})

	before := time.Now()
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	g := cleanerGauges(t, reg)
	for _, name := range []string{"kawa_cleaner_dirty_ratio", "kawa_cleaner_first_dirty_offset", "kawa_cleaner_last_clean_timestamp_seconds"} {
		_, c := g[name]["c-0"]
		_, plain := g[name]["plain-0"]
		_, offsets := g[name]["__consumer_offsets-0"] // compacted too, as in Kafka
		if !c || plain || !offsets {
			t.Fatalf("%s = %v, want series for c-0 and __consumer_offsets-0, none for plain-0 (cleanup.policy=delete)", name, g[name])
		}
	}
	// First pass: nothing was clean, so every cleanable byte was dirty, and the clean part now covers the
	// 200 keyed records (in closed segments) but not the active segment's end.
	if r := g["kawa_cleaner_dirty_ratio"]["c-0"]; r != 1 {
		t.Errorf("dirty ratio at the first pass = %v, want 1", r)
	}
	first := g["kawa_cleaner_first_dirty_offset"]["c-0"]
	if first < 200 || first >= 240 {
		t.Errorf("first dirty offset = %v, want in [200, 240): past the keyed records, before the log end", first)
	}
	last := g["kawa_cleaner_last_clean_timestamp_seconds"]["c-0"]
	if last < float64(before.UnixNano())/1e9 || last > float64(after.UnixNano())/1e9 {
		t.Errorf("last clean = %v, want within the CleanNow call [%v, %v]", last, before.Unix(), after.Unix())
	}

	// Nothing new: the next check finds no dirty bytes and no pass runs.
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	g = cleanerGauges(t, reg)
	if r := g["kawa_cleaner_dirty_ratio"]["c-0"]; r != 0 {
		t.Errorf("dirty ratio with nothing new = %v, want 0", r)
	}
	if f, l := g["kawa_cleaner_first_dirty_offset"]["c-0"], g["kawa_cleaner_last_clean_timestamp_seconds"]["c-0"]; f != first || l != last {
		t.Errorf("with nothing new: first dirty %v, last clean %v; want unchanged %v, %v", f, l, first, last)
	}

	// More data past the clean part: the next pass moves both forward.
	produceKeys(200)
	rollPast(t, cl, "c", "roll2", 40)
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	g = cleanerGauges(t, reg)
	if f := g["kawa_cleaner_first_dirty_offset"]["c-0"]; f < 440 || f >= 480 {
		t.Errorf("first dirty after 240 more records = %v, want in [440, 480): past the second 200 keyed records", f)
	}
	if l := g["kawa_cleaner_last_clean_timestamp_seconds"]["c-0"]; l <= last {
		t.Errorf("last clean after another pass = %v, want after %v", l, last)
	}
}
