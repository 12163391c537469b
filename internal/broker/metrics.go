package broker

import (
	"strconv"

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

// cleanerCollector exports CleanerProgress at scrape time, one series per compacted partition: no
// goroutine, and a deleted partition's series go with it.
type cleanerCollector struct{ b *Broker }

var (
	cleanerDirtyRatio = prometheus.NewDesc("kawa_cleaner_dirty_ratio",
		"Dirty bytes / cleanable bytes of a compacted partition at the cleaner's last check (Kafka's min.cleanable.dirty.ratio is compared with it).",
		[]string{"topic", "partition"}, nil)
	cleanerFirstDirty = prometheus.NewDesc("kawa_cleaner_first_dirty_offset",
		"Offset below which a compacted partition is clean (the log start offset before any pass).",
		[]string{"topic", "partition"}, nil)
	cleanerLastClean = prometheus.NewDesc("kawa_cleaner_last_clean_timestamp_seconds",
		"Unix time at which the last cleaner pass that rewrote segments of a compacted partition ended; 0 if none has.",
		[]string{"topic", "partition"}, nil)
)

// CleanerCollector returns a collector of the per-partition log-cleaner gauges kawa_cleaner_dirty_ratio,
// kawa_cleaner_first_dirty_offset and kawa_cleaner_last_clean_timestamp_seconds, labelled topic and
// partition, read from CleanerProgress when scraped.
func (b *Broker) CleanerCollector() prometheus.Collector { return cleanerCollector{b} }

func (c cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cleanerDirtyRatio
	ch <- cleanerFirstDirty
	ch <- cleanerLastClean
}

func (c cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, pc := range c.b.CleanerProgress() {
		part := strconv.Itoa(int(pc.Partition))
		var last float64
		if !pc.LastCleaned.IsZero() {
			last = float64(pc.LastCleaned.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(cleanerDirtyRatio, prometheus.GaugeValue, pc.DirtyRatio, pc.Topic, part)
		ch <- prometheus.MustNewConstMetric(cleanerFirstDirty, prometheus.GaugeValue, float64(pc.FirstDirty), pc.Topic, part)
		ch <- prometheus.MustNewConstMetric(cleanerLastClean, prometheus.GaugeValue, last, pc.Topic, part)
	}
}
