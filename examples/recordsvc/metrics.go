package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/worker"
)

// metrics are the process's Prometheus metrics, in a registry of their own. Every label has a
// bounded set of values: store names come from the configuration (anything else is counted
// as "other"), methods, operations, results and error kinds are closed sets.
type metrics struct {
	reg    *prometheus.Registry
	stores map[string]bool

	rpcRequests *prometheus.CounterVec   // method, code
	rpcDuration *prometheus.HistogramVec // method
	rpcItems    *prometheus.HistogramVec // method

	items         *prometheus.CounterVec   // store, op, result
	itemDuration  *prometheus.HistogramVec // store, op
	itemsInFlight *prometheus.GaugeVec     // store

	adapterCalls    *prometheus.CounterVec   // store, call, result
	adapterDuration *prometheus.HistogramVec // store, call
	adapterBatch    *prometheus.HistogramVec // store, call

	mergeRetries       *prometheus.CounterVec // store
	unavailableRetries *prometheus.CounterVec // store, call
	deadlineCut        *prometheus.CounterVec // store
	lateOutcomes       *prometheus.CounterVec // store, result

	coalescedBatch   *prometheus.HistogramVec // store
	coalescerWaiting *prometheus.GaugeVec     // store
	coalescerRefused *prometheus.CounterVec   // store

	queueDepth      *prometheus.GaugeVec     // store
	queueMeasured   *prometheus.GaugeVec     // store
	queueStale      *prometheus.GaugeVec     // store
	backlogs        *backlogAges             // recordsvc_queue_oldest_age_seconds{store}, computed when scraped
	published       *prometheus.CounterVec   // store, result
	publishDuration *prometheus.HistogramVec // store

	workerRecords  *prometheus.CounterVec   // store, result
	workerFetches  *prometheus.CounterVec   // store
	workerRedeliv  *prometheus.CounterVec   // store
	workerLag      *prometheus.GaugeVec     // store
	workerDuration *prometheus.HistogramVec // store

	healthy *prometheus.GaugeVec // store, dependency
}

func newMetrics(storeNames []string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), stores: map[string]bool{}}
	for _, n := range storeNames {
		m.stores[n] = true
	}
	latency := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	sizes := prometheus.ExponentialBuckets(1, 2, 15) // 1 .. 16384
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "recordsvc", Name: name, Help: help}, labels)
		m.reg.MustRegister(v)
		return v
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "recordsvc", Name: name, Help: help}, labels)
		m.reg.MustRegister(v)
		return v
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "recordsvc", Name: name, Help: help, Buckets: buckets}, labels)
		m.reg.MustRegister(v)
		return v
	}
	m.rpcRequests = counter("rpc_requests_total", "gRPC calls of the record service by method and status code.", "method", "code")
	m.rpcDuration = histogram("rpc_duration_seconds", "gRPC call latency of the record service.", latency, "method")
	m.rpcItems = histogram("rpc_items", "Items per gRPC request (the client's batch size).", sizes, "method")
	m.items = counter("items_total", "Request items by store, operation and result (an outcome or an error kind).", "store", "op", "result")
	m.itemDuration = histogram("item_duration_seconds", "Per store and operation: the duration of each request that had such items (observed once per request).", latency, "store", "op")
	m.itemsInFlight = gauge("items_in_flight", "Items of gRPC requests in progress per store: the work queued in and running through the service.", "store")
	m.adapterCalls = counter("adapter_calls_total", "Backend batch calls (after coalescing and dependency waves) by result.", "store", "call", "result")
	m.adapterDuration = histogram("adapter_duration_seconds", "Backend batch call latency.", latency, "store", "call")
	m.adapterBatch = histogram("adapter_batch_size", "Records per backend batch call.", sizes, "store", "call")
	m.mergeRetries = counter("merge_cas_retries_total", "Merge program runs repeated because another writer changed the record first (compare-and-set retries).", "store")
	m.unavailableRetries = counter("unavailable_retries_total", "Reads or writes sent to the backend again because it reported them unavailable (not applied).", "store", "call")
	m.deadlineCut = counter("deadline_cut_items_total", "Items answered at their call's deadline before the store had answered them (error_unavailable or error_outcome_unknown in items_total).", "store")
	m.lateOutcomes = counter("late_outcomes_total", "Writes answered error_outcome_unknown at their call's deadline that the store settled later, by what they did in the end (an outcome, or error_<kind>).", "store", "result")
	m.coalescedBatch = histogram("coalesced_batch_size", "One-item calls gathered into one batch by the store's coalescer.", sizes, "store")
	m.coalescerWaiting = gauge("coalescer_waiting", "One-item calls waiting in the store's coalescer queue when its last batch was formed.", "store")
	m.coalescerRefused = counter("coalescer_refused_total", "One-item calls refused (retryable) because the store's coalescer queue was full.", "store")
	m.queueDepth = gauge("queue_depth", "Messages in the store's Kafka topic that its worker group has not committed yet (accepted writes not yet applied for good): the sum over partitions of end offset minus committed offset, 0 when the queue is empty. From the last successful measurement (recordsvc_queue_measured_timestamp_seconds); kept while measuring fails (recordsvc_queue_stale 1).", "store")
	m.queueMeasured = gauge("queue_measured_timestamp_seconds", "Unix time of the last successful measurement of the store's queue against the broker (recordsvc_queue_depth and recordsvc_queue_oldest_age_seconds).", "store")
	m.queueStale = gauge("queue_stale", "1 when the last measurement of the store's queue failed (the broker unreachable, or the lag read failing): the depth is the last one measured and the oldest age keeps growing from the last oldest message known; 0 when it is fresh.", "store")
	m.backlogs = &backlogAges{byStore: map[string]kafkaqueue.Backlog{}, desc: prometheus.NewDesc("recordsvc_queue_oldest_age_seconds",
		"Age of the oldest accepted write the store's worker group has not committed: now minus the timestamp of the Kafka message at the group's committed offset, the oldest over partitions with a backlog; 0 when the queue is empty. Computed when scraped from the last measurement, so it keeps growing while the broker cannot be reached.",
		[]string{"store"}, nil)}
	m.reg.MustRegister(m.backlogs)
	m.published = counter("queue_published_total", "Accepted-mode records published to the store's durable queue, by result (ok or error).", "store", "result")
	m.publishDuration = histogram("queue_publish_duration_seconds", "Latency of one publish to the store's durable queue (until acknowledged).", latency, "store")
	m.workerRecords = counter("worker_records_total", "Queued records the worker finished, by result: applied, dead_lettered; retried counts repeated applications.", "store", "result")
	m.workerFetches = counter("worker_fetches_total", "Fetches the worker finished (applied or dead-lettered and committed).", "store")
	m.workerRedeliv = counter("worker_redeliveries_total", "Queued records delivered again to the worker at or below an offset it had already applied or dead-lettered in their partition (after a lost group membership, a rebalance or a failed commit): merges among them were applied twice unless their programs are idempotent.", "store")
	m.workerLag = gauge("worker_lag_seconds", "Deprecated, use recordsvc_queue_oldest_age_seconds: the largest time from acceptance to application among the records of the last fetch the worker finished. It keeps that value until another fetch finishes, so an idle worker of an empty queue shows the lag of its last fetch; it is not the queue's lag.", "store")
	m.workerDuration = histogram("worker_fetch_duration_seconds", "Time from a fetch's return to its commit.", latency, "store")
	m.healthy = gauge("dependency_healthy", "1 when the last periodic check of the dependency passed, else 0.", "store", "dependency")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// backlogAges exports the age of each store's oldest unapplied record, computed at scrape time
// from the oldest timestamp of the last successful measurement: between measurements, and
// while the broker cannot be reached, the age grows with the clock instead of freezing.
type backlogAges struct {
	desc *prometheus.Desc

	mu      sync.Mutex
	byStore map[string]kafkaqueue.Backlog
	now     func() time.Time // time.Now; tests set it
}

func (a *backlogAges) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

func (a *backlogAges) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if a.now != nil {
		now = a.now()
	}
	for name, b := range a.byStore {
		ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, b.Age(now).Seconds(), name)
	}
}

// measured records a successful measurement of a store's queue.
func (m *metrics) measured(name string, b kafkaqueue.Backlog, at time.Time) {
	name = m.storeLabel(name)
	m.backlogs.mu.Lock()
	m.backlogs.byStore[name] = b
	m.backlogs.mu.Unlock()
	m.queueDepth.WithLabelValues(name).Set(float64(b.Total))
	m.queueMeasured.WithLabelValues(name).Set(float64(at.UnixMilli()) / 1e3)
	m.queueStale.WithLabelValues(name).Set(0)
}

// unmeasured records a failed measurement of a store's queue: the last figures stay, flagged
// stale, and the oldest age keeps growing from the last oldest timestamp. A store never
// measured gets no depth or age, only the flag.
func (m *metrics) unmeasured(name string) {
	m.queueStale.WithLabelValues(m.storeLabel(name)).Set(1)
}

// backlog returns the last successful measurement of a store's queue, if any.
func (m *metrics) backlog(name string) (kafkaqueue.Backlog, bool) {
	m.backlogs.mu.Lock()
	defer m.backlogs.mu.Unlock()
	b, ok := m.backlogs.byStore[m.storeLabel(name)]
	return b, ok
}

// storeLabel bounds the store label to configured names.
func (m *metrics) storeLabel(name string) string {
	if m.stores[name] {
		return name
	}
	return "other"
}

// methodLabel maps a full gRPC method name to a bounded label.
func methodLabel(full string) string {
	const prefix = "/tributary.record.v1.RecordService/"
	if strings.HasPrefix(full, prefix) {
		return strings.TrimPrefix(full, prefix)
	}
	if strings.HasPrefix(full, "/grpc.health.v1.Health/") {
		return "health"
	}
	if strings.HasPrefix(full, "/grpc.reflection.") {
		return "reflection"
	}
	return "other"
}

// rpcStats counts and times every call when it ends, with its final status: also the calls
// refused before a handler runs (a request over limits.max_request_bytes is
// RESOURCE_EXHAUSTED, undecodable bytes INVALID_ARGUMENT), which an interceptor never sees.
type rpcStats struct{ m *metrics }

type methodKey struct{}

func (rpcStats) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, methodLabel(info.FullMethodName))
}

func (h rpcStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || end.IsClient() {
		return
	}
	method, _ := ctx.Value(methodKey{}).(string)
	h.m.rpcDuration.WithLabelValues(method).Observe(end.EndTime.Sub(end.BeginTime).Seconds())
	h.m.rpcRequests.WithLabelValues(method, status.Code(end.Error).String()).Inc()
}

func (rpcStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (rpcStats) HandleConn(context.Context, stats.ConnStats)                       {}

// observe counts the items of a finished request by store, operation and result, and
// records its duration once for each (store, operation) it had: a batch of a thousand puts is
// one latency sample, not a thousand.
func (m *metrics) observe(ops []store.Op, results []store.Result, d time.Duration) {
	type storeOp struct {
		store string
		op    store.OpKind
	}
	var seen map[storeOp]bool
	for i := range results {
		name := m.storeLabel(ops[i].Addr.Store)
		m.items.WithLabelValues(name, ops[i].Kind.String(), resultLabel(results[i])).Inc()
		k := storeOp{name, ops[i].Kind}
		if len(ops) > 1 {
			if seen == nil {
				seen = map[storeOp]bool{}
			}
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		m.itemDuration.WithLabelValues(name, ops[i].Kind.String()).Observe(d.Seconds())
	}
}

func resultLabel(r store.Result) string {
	if r.Err != nil {
		return "error_" + strings.ReplaceAll(store.KindOf(r.Err).String(), " ", "_")
	}
	return strings.ReplaceAll(r.Outcome.String(), " ", "_")
}

// storeObserver turns the Service's measurements into metrics: what coalescing and
// dependency waves made of the requests, and the retries the Service made.
type storeObserver struct{ m *metrics }

var _ store.Observer = storeObserver{}

func (o storeObserver) AdapterCall(c store.AdapterCall) {
	name, call := o.m.storeLabel(c.Store), c.Call.String()
	o.m.adapterDuration.WithLabelValues(name, call).Observe(c.Duration.Seconds())
	o.m.adapterBatch.WithLabelValues(name, call).Observe(float64(c.Size))
	result := "ok"
	if c.Err != nil {
		result = "error"
	}
	o.m.adapterCalls.WithLabelValues(name, call, result).Inc()
}

func (o storeObserver) CoalescedBatch(b store.CoalescedBatch) {
	name := o.m.storeLabel(b.Store)
	o.m.coalescedBatch.WithLabelValues(name).Observe(float64(b.Size))
	o.m.coalescerWaiting.WithLabelValues(name).Set(float64(b.Waiting))
}

func (o storeObserver) QueueFull(name string) {
	o.m.coalescerRefused.WithLabelValues(o.m.storeLabel(name)).Inc()
}

func (o storeObserver) Retry(r store.Retry) {
	name := o.m.storeLabel(r.Store)
	switch r.Reason {
	case store.RetryMergeConflict:
		o.m.mergeRetries.WithLabelValues(name).Add(float64(r.Ops))
	case store.RetryUnavailable:
		o.m.unavailableRetries.WithLabelValues(name, r.Call.String()).Add(float64(r.Ops))
	}
}

var _ store.DeadlineObserver = storeObserver{}

func (o storeObserver) DeadlineCut(c store.DeadlineCut) {
	o.m.deadlineCut.WithLabelValues(o.m.storeLabel(c.Store)).Add(float64(c.Ops))
}

func (o storeObserver) LateOutcome(l store.LateOutcome) {
	result := strings.ReplaceAll(l.Outcome.String(), " ", "_")
	if l.Err != 0 {
		result = "error_" + strings.ReplaceAll(l.Err.String(), " ", "_")
	}
	o.m.lateOutcomes.WithLabelValues(o.m.storeLabel(l.Store), result).Inc()
}

// observedPublisher counts what a store's accepted-mode path publishes.
type observedPublisher struct {
	inner queue.Publisher
	store string
	m     *metrics
}

func (p observedPublisher) Publish(ctx context.Context, msgs []queue.Message) error {
	start := time.Now()
	err := p.inner.Publish(ctx, msgs)
	p.m.publishDuration.WithLabelValues(p.store).Observe(time.Since(start).Seconds())
	failed := 0
	if err != nil {
		failed = len(msgs)
		if pe, ok := errors.AsType[*queue.PublishError](err); ok && len(pe.Errs) == len(msgs) {
			failed = 0
			for _, e := range pe.Errs {
				if e != nil {
					failed++
				}
			}
		}
	}
	p.m.published.WithLabelValues(p.store, "ok").Add(float64(len(msgs) - failed))
	p.m.published.WithLabelValues(p.store, "error").Add(float64(failed))
	return err
}

func (p observedPublisher) Close() error { return p.inner.Close() }

// workerObserver turns a worker's per-fetch statistics into metrics.
type workerObserver struct {
	store string
	m     *metrics
}

func (o workerObserver) FetchDone(s worker.FetchStats) {
	o.m.workerFetches.WithLabelValues(o.store).Inc()
	o.m.workerRedeliv.WithLabelValues(o.store).Add(float64(s.Redelivered))
	o.m.workerRecords.WithLabelValues(o.store, "applied").Add(float64(s.Applied))
	o.m.workerRecords.WithLabelValues(o.store, "dead_lettered").Add(float64(s.DeadLettered))
	o.m.workerRecords.WithLabelValues(o.store, "retried").Add(float64(s.Retries))
	o.m.workerLag.WithLabelValues(o.store).Set(s.MaxLag.Seconds())
	o.m.workerDuration.WithLabelValues(o.store).Observe(s.Duration.Seconds())
}
