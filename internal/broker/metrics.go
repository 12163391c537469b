package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kawa-broker/kawa/internal/log"
)

// Metrics are the broker's Prometheus collectors.
type Metrics struct {
	Requests      *prometheus.CounterVec // by api key name
	ProducedBytes prometheus.Counter
	FetchedBytes  prometheus.Counter
	ProduceErrors *prometheus.CounterVec // by Kafka error name
	AuthzDenied   *prometheus.CounterVec // authorization checks denied, by operation and resource type
	ACLChanges    *prometheus.CounterVec // ACL bindings created or deleted, by change
}

// NewMetrics creates the collectors and registers them on reg (nil = not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kawa_requests_total", Help: "Kafka requests handled, by API."}, []string{"api"}),
		ProducedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kawa_produced_bytes_total", Help: "Record batch bytes appended by Produce."}),
		FetchedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kawa_fetched_bytes_total", Help: "Record batch bytes returned by Fetch."}),
		ProduceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kawa_produce_errors_total", Help: "Produce partition errors, by Kafka error name."}, []string{"error"}),
		AuthzDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kawa_authorizer_denied_total", Help: "Authorization checks denied (each answered with an *_AUTHORIZATION_FAILED error), by operation and resource type."},
			[]string{"operation", "resource_type"}),
		ACLChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kawa_acl_changes_total", Help: "ACL bindings created or deleted (CreateAcls, DeleteAcls), by change."}, []string{"change"}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.ProducedBytes, m.FetchedBytes, m.ProduceErrors, m.AuthzDenied, m.ACLChanges)
	}
	return m
}

// LogStats sums the fsync counters of every live partition's log, internal
// topics included (bench protocol: fsyncs and bytes per fsync). A deleted
// topic's counts leave the sum, so it is a gauge, not a counter.
func (b *Broker) LogStats() log.Stats {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var sum log.Stats
	for _, ps := range b.parts {
		for _, p := range ps {
			if p != nil {
				st := p.LogStats()
				sum.Fsyncs += st.Fsyncs
				sum.FsyncedSize += st.FsyncedSize
			}
		}
	}
	return sum
}
