package main

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// metrics turns the runner's and the sink's observations into Prometheus metrics on a registry
// of its own, so that embedding the exporter never touches the process-wide default registry.
// It implements cdc.Observer and sink.Observer; every label has a small fixed set of values
// (a status class, an item outcome, an index name per captured table), never row data.
type metrics struct {
	reg    *prometheus.Registry
	labels prometheus.Labels // the pipeline's name, on every metric of its own

	events       prometheus.Counter
	batches      prometheus.Counter
	checkpoints  prometheus.Counter
	deadLetters  prometheus.Counter
	retries      prometheus.Counter
	retryWait    prometheus.Counter
	lag          prometheus.Gauge
	batchSeconds prometheus.Histogram

	bulkRequests *prometheus.CounterVec
	bulkSeconds  prometheus.Histogram
	bulkBytes    prometheus.Counter
	bulkItems    *prometheus.CounterVec
	claims       *prometheus.CounterVec
	unchanged    *prometheus.CounterVec
}

// The interface checks keep the exporter in step with the library's observers.
var (
	_ cdc.Observer           = (*metrics)(nil)
	_ sink.Observer          = (*metrics)(nil)
	_ sink.UnchangedObserver = (*metrics)(nil)
)

const namespace = "cdcmirror"

// newMetrics makes the exporter of one pipeline, whose name labels every series.
func newMetrics(pipeline string) *metrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"pipeline": pipeline}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help, ConstLabels: labels})
	}
	m := &metrics{
		reg:         reg,
		labels:      labels,
		events:      counter("events_total", "Events in batches that succeeded (applied, superseded or dead-lettered); events per second is rate() of it."),
		batches:     counter("batches_total", "Batches that succeeded."),
		checkpoints: counter("checkpoints_total", "Checkpoints saved after a batch."),
		deadLetters: counter("dead_letters_total", "Events written to the dead-letter file."),
		retries:     counter("backpressure_retries_total", "Times the sink pushed a batch back and the runner offered it again."),
		retryWait:   counter("backpressure_wait_seconds_total", "Time spent waiting before offering a pushed-back batch again."),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "replication_lag_seconds", ConstLabels: labels,
			Help: "From the newest commit in the last streamed batch to the end of that batch: how far the index trails the source."}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "batch_duration_seconds", ConstLabels: labels,
			Help:    "From a batch's first offer to the sink to its checkpoint (backoff waits included).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		bulkRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "bulk_requests_total", ConstLabels: labels,
			Help: "_bulk requests by HTTP status class (none: no answer came)."}, []string{"status"}),
		bulkSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "bulk_duration_seconds", ConstLabels: labels,
			Help:    "From sending a _bulk request to reading its whole answer.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 14)}),
		bulkBytes: counter("bulk_request_bytes_total", "Bytes of _bulk request bodies."),
		bulkItems: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "bulk_items_total", ConstLabels: labels,
			Help: "Per-item outcomes of _bulk answers: applied, superseded (409, a newer version is there), dead_lettered, retried (per-item 429)."},
			[]string{"outcome"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "claims_total", ConstLabels: labels,
			Help: "Fence claims of an index: on first use and after each connection loss."}, []string{"index"}),
		unchanged: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "unchanged_values_total", ConstLabels: labels,
			Help: "Values the source left out of updates as unchanged (PostgreSQL TOAST), by where the sink found them: batch, index, or unavailable (rows dead-lettered)."},
			[]string{"from"}),
	}
	reg.MustRegister(m.events, m.batches, m.checkpoints, m.deadLetters, m.retries, m.retryWait, m.lag, m.batchSeconds,
		m.bulkRequests, m.bulkSeconds, m.bulkBytes, m.bulkItems, m.claims, m.unchanged,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Pre-create the label values that are known, so a dashboard sees zeros instead of gaps.
	for _, o := range []string{"applied", "superseded", "dead_lettered", "retried"} {
		m.bulkItems.WithLabelValues(o)
	}
	for _, f := range []string{"batch", "index", "unavailable"} {
		m.unchanged.WithLabelValues(f)
	}
	return m
}

// pipelineState is what the exporter reads from a runner at scrape time.
type pipelineState interface {
	Progress() cdc.Progress
	Health() cdc.Health
}

// watch registers the gauges read from the runner at scrape time: health, pending events and
// snapshot progress. It is separate from newMetrics because the runner takes the observer at
// construction.
func (m *metrics) watch(p pipelineState) {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help, ConstLabels: m.labels}, f)
	}
	m.reg.MustRegister(
		gauge("healthy", "1 while the pipeline runs and makes progress, 0 when it is stopped or stalled (see /healthz for why).",
			func() float64 {
				if p.Health().Healthy {
					return 1
				}
				return 0
			}),
		gauge("pending_events", "Events read and not yet acknowledged by the sink.",
			func() float64 { return float64(p.Progress().Pending) }),
		gauge("snapshot_active", "1 while the initial snapshot is being read.",
			func() float64 {
				if p.Progress().Snapshot.Active {
					return 1
				}
				return 0
			}),
		gauge("snapshot_rows_done", "Snapshot rows handed to the pipeline so far (0 when no snapshot runs).",
			func() float64 { return float64(p.Progress().Snapshot.RowsDone) }),
		gauge("snapshot_rows_estimated", "The source catalog's row estimate for the captured tables (0 when no snapshot runs).",
			func() float64 { return float64(p.Progress().Snapshot.RowsEstimated) }),
	)
}

// BatchDone implements cdc.Observer.
func (m *metrics) BatchDone(s cdc.BatchStats) {
	m.events.Add(float64(s.Events))
	m.batches.Inc()
	m.deadLetters.Add(float64(s.DeadLetters))
	if s.Checkpointed {
		m.checkpoints.Inc()
	}
	m.batchSeconds.Observe(s.Duration.Seconds())
	// A batch of snapshot reads has no commit time and says nothing about lag.
	if s.Lag > 0 {
		m.lag.Set(s.Lag.Seconds())
	}
}

// Backpressure implements cdc.Observer.
func (m *metrics) Backpressure(_ int, wait time.Duration) {
	m.retries.Inc()
	m.retryWait.Add(wait.Seconds())
}

// BulkDone implements sink.Observer.
func (m *metrics) BulkDone(s sink.BulkStats) {
	m.bulkRequests.WithLabelValues(statusClass(s.Status)).Inc()
	m.bulkSeconds.Observe(s.Duration.Seconds())
	m.bulkBytes.Add(float64(s.Bytes))
	m.bulkItems.WithLabelValues("applied").Add(float64(s.Applied))
	m.bulkItems.WithLabelValues("superseded").Add(float64(s.Superseded))
	m.bulkItems.WithLabelValues("dead_lettered").Add(float64(s.DeadLettered))
	m.bulkItems.WithLabelValues("retried").Add(float64(s.Retried))
}

// Claimed implements sink.Observer. Index names are one per captured table, so the label
// stays bounded.
func (m *metrics) Claimed(index string) { m.claims.WithLabelValues(index).Inc() }

// UnchangedFilled implements sink.UnchangedObserver.
func (m *metrics) UnchangedFilled(s sink.UnchangedStats) {
	m.unchanged.WithLabelValues("batch").Add(float64(s.FromBatch))
	m.unchanged.WithLabelValues("index").Add(float64(s.FromIndex))
	m.unchanged.WithLabelValues("unavailable").Add(float64(s.DeadLettered))
}

// statusClass folds HTTP statuses into a handful of label values.
func statusClass(status int) string {
	if status <= 0 {
		return "none"
	}
	return strconv.Itoa(status/100) + "xx"
}

// mux serves /metrics from the private registry and /healthz from the pipeline's health:
// 200 "ok", or 503 with the reason (which names no row data and no credential).
func (m *metrics) mux(p pipelineState) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		h := p.Health()
		if !h.Healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, h.Reason)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
