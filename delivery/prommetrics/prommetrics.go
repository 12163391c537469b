// Package prommetrics exposes the events of the delivery loops as Prometheus
// metrics: New returns a delivery.Hooks to put in delivery.Config.Hooks.
//
// Metrics (namespace "kawa_delivery"; labels: topic, and outcome on the
// handler histogram):
//
//	kawa_delivery_processed_total{topic}        records finished by their handler (exactly-once: when their batch committed)
//	kawa_delivery_retries_total{topic}          at-least-once retries (failed attempts followed by another)
//	kawa_delivery_dead_lettered_total{topic}    records whose dead-letter write was acknowledged
//	kawa_delivery_parked_total{topic}           records diverted because their key is parked
//	kawa_delivery_panics_total{topic}           handler panics (each is a failed attempt)
//	kawa_delivery_commits_total                 offset commits issued by the loop
//	kawa_delivery_commit_failures_total         offset commits that failed (request or any partition)
//	kawa_delivery_commit_seconds                commit latency, seconds
//	kawa_delivery_errors_total                  conditions handled without stopping (delivery.Hooks.OnError)
//	kawa_delivery_in_flight                     records dispatched and not finished
//	kawa_delivery_handler_seconds{topic,outcome} handler attempt time, seconds; outcome is ok, error or panic
//
// Several loops in one process should register through
// prometheus.WrapRegistererWith with a distinguishing label (e.g. the
// group), or they collide on registration.
package prommetrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
)

// Hooks implements delivery.Hooks with Prometheus metrics.
type Hooks struct {
	delivery.NopHooks
	processed, retries, deadLettered, parked, panics *prometheus.CounterVec
	commits, commitFailures, errs                    prometheus.Counter
	commitSeconds                                    prometheus.Histogram
	inFlight                                         prometheus.Gauge
	handlerSeconds                                   *prometheus.HistogramVec
}

var _ delivery.Hooks = (*Hooks)(nil)

// New creates the metrics and registers them with reg; it returns the
// registration error (for example a duplicate registration).
func New(reg prometheus.Registerer) (*Hooks, error) {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kawa_delivery", Name: name, Help: help}, []string{"topic"})
	}
	plain := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kawa_delivery", Name: name, Help: help})
	}
	h := &Hooks{
		processed:      counter("processed_total", "Records finished by their handler."),
		retries:        counter("retries_total", "At-least-once retries of a failed attempt."),
		deadLettered:   counter("dead_lettered_total", "Records whose dead-letter write was acknowledged."),
		parked:         counter("parked_total", "Records diverted to the park topic because their key is parked."),
		panics:         counter("panics_total", "Handler panics, each a failed attempt."),
		commits:        plain("commits_total", "Offset commits issued by the loop."),
		commitFailures: plain("commit_failures_total", "Offset commits that failed."),
		errs:           plain("errors_total", "Conditions the loop handled without stopping."),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kawa_delivery", Name: "commit_seconds",
			Help: "Offset commit latency in seconds.", Buckets: prometheus.DefBuckets}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kawa_delivery", Name: "in_flight",
			Help: "Records dispatched and not yet finished."}),
		handlerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kawa_delivery", Name: "handler_seconds",
			Help: "Handler attempt time in seconds.", Buckets: prometheus.DefBuckets}, []string{"topic", "outcome"}),
	}
	for _, c := range []prometheus.Collector{h.processed, h.retries, h.deadLettered, h.parked, h.panics,
		h.commits, h.commitFailures, h.errs, h.commitSeconds, h.inFlight, h.handlerSeconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (h *Hooks) OnHandled(r *kgo.Record, _ int, took time.Duration, err error) {
	outcome := "ok"
	var pe *delivery.PanicError
	switch {
	case errors.As(err, &pe):
		outcome = "panic"
	case err != nil:
		outcome = "error"
	}
	h.handlerSeconds.WithLabelValues(r.Topic, outcome).Observe(took.Seconds())
}

func (h *Hooks) OnProcessed(r *kgo.Record) { h.processed.WithLabelValues(r.Topic).Inc() }

func (h *Hooks) OnRetry(r *kgo.Record, _ int, _ error, _ time.Duration) {
	h.retries.WithLabelValues(r.Topic).Inc()
}

func (h *Hooks) OnDeadLettered(r *kgo.Record, _ string, _ int, _ error) {
	h.deadLettered.WithLabelValues(r.Topic).Inc()
}

func (h *Hooks) OnParked(r *kgo.Record, _ string) { h.parked.WithLabelValues(r.Topic).Inc() }

func (h *Hooks) OnCommit(_ map[string]map[int32]kgo.EpochOffset, took time.Duration, err error) {
	h.commits.Inc()
	h.commitSeconds.Observe(took.Seconds())
	if err != nil {
		h.commitFailures.Inc()
	}
}

func (h *Hooks) OnPanic(r *kgo.Record, _ *delivery.PanicError) {
	h.panics.WithLabelValues(r.Topic).Inc()
}

func (h *Hooks) OnInFlight(delta int) { h.inFlight.Add(float64(delta)) }

func (h *Hooks) OnError(error) { h.errs.Inc() }
