package prommetrics_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/delivery/prommetrics"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// signalling adds a channel to the Prometheus hooks: the test waits on the
// dead-letter ack as an event.
type signalling struct {
	*prommetrics.Hooks
	dlt chan struct{}
}

func (s signalling) OnDeadLettered(r *kgo.Record, t string, a int, err error) {
	s.Hooks.OnDeadLettered(r, t, a, err)
	close(s.dlt)
}

// TestMetricsCountWhatTheLoopDid runs an at-least-once loop over 30 records
// where v5 panics once and v9 always fails, and checks every metric's value.
func TestMetricsCountWhatTheLoopDid(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("pm", 1, nil)
	b.CreateTopic("pm.DLT", 1, nil)
	cl := b.Client()
	for i := range 30 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "pm", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	h, err := prommetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prommetrics.New(reg); err == nil {
		t.Error("second registration on one registry did not fail")
	}
	sig := signalling{Hooks: h, dlt: make(chan struct{})}
	var mu sync.Mutex
	ok := 0
	allOK := make(chan struct{})
	panicked := false
	c, err := delivery.NewAtLeastOnce(delivery.Config{Brokers: []string{b.Addr}, Group: "g-pm", Topics: []string{"pm"}, Hooks: sig},
		func(_ context.Context, r *kgo.Record) error {
			mu.Lock()
			defer mu.Unlock()
			switch string(r.Value) {
			case "v5":
				if !panicked {
					panicked = true
					panic("once")
				}
			case "v9":
				return errors.New("always")
			}
			if ok++; ok == 29 {
				close(allOK)
			}
			return nil
		}, delivery.AtLeastOnceOptions{Retry: delivery.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for _, ch := range []chan struct{}{allOK, sig.dlt} {
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			cancel()
			t.Fatal("loop did not finish within 60s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	got := gather(t, reg)
	want := map[string]float64{
		`kawa_delivery_processed_total{topic="pm"}`:                       29,
		`kawa_delivery_panics_total{topic="pm"}`:                          1,
		`kawa_delivery_retries_total{topic="pm"}`:                         3, // v5 once, v9 twice
		`kawa_delivery_dead_lettered_total{topic="pm"}`:                   1,
		`kawa_delivery_in_flight`:                                         0,
		`kawa_delivery_commit_failures_total`:                             0,
		`kawa_delivery_errors_total`:                                      0,
		`kawa_delivery_handler_seconds_count{outcome="ok",topic="pm"}`:    29,
		`kawa_delivery_handler_seconds_count{outcome="panic",topic="pm"}`: 1,
		`kawa_delivery_handler_seconds_count{outcome="error",topic="pm"}`: 3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if got["kawa_delivery_commits_total"] < 1 || got["kawa_delivery_commit_seconds_count"] != got["kawa_delivery_commits_total"] {
		t.Errorf("commits %v, commit_seconds count %v", got["kawa_delivery_commits_total"], got["kawa_delivery_commit_seconds_count"])
	}
}

// gather flattens the registry to "name{labels}" -> value (counters,
// gauges, histogram counts as name_count).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			var v float64
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				name += "_count"
				v = float64(m.GetHistogram().GetSampleCount())
			}
			labels := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					labels += ","
				}
				labels += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			if labels != "" {
				name += "{" + labels + "}"
			}
			out[name] = v
		}
	}
	return out
}
