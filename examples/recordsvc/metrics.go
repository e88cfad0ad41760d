package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
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

	mergeRuns    *prometheus.CounterVec // store
	mergeRetries *prometheus.CounterVec // store

	published       *prometheus.CounterVec   // store, result
	publishDuration *prometheus.HistogramVec // store

	workerRecords  *prometheus.CounterVec   // store, result
	workerFetches  *prometheus.CounterVec   // store
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
	m.mergeRuns = counter("merge_runs_total", "Merge program runs, retries included.", "store")
	m.mergeRetries = counter("merge_cas_retries_total", "Merge program runs repeated because another writer changed the record first (compare-and-set retries).", "store")
	m.published = counter("queue_published_total", "Accepted-mode records published to the store's durable queue, by result (ok or error).", "store", "result")
	m.publishDuration = histogram("queue_publish_duration_seconds", "Latency of one publish to the store's durable queue (until acknowledged).", latency, "store")
	m.workerRecords = counter("worker_records_total", "Queued records the worker finished, by result: applied, dead_lettered; retried counts repeated applications.", "store", "result")
	m.workerFetches = counter("worker_fetches_total", "Fetches the worker finished (applied or dead-lettered and committed).", "store")
	m.workerLag = gauge("worker_lag_seconds", "Largest time from acceptance to application among the records of the worker's last fetch.", "store")
	m.workerDuration = histogram("worker_fetch_duration_seconds", "Time from a fetch's return to its commit.", latency, "store")
	m.healthy = gauge("dependency_healthy", "1 when the last periodic check of the dependency passed, else 0.", "store", "dependency")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
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
	return "other"
}

// unaryInterceptor counts and times every call.
func (m *metrics) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	method := methodLabel(info.FullMethod)
	m.rpcDuration.WithLabelValues(method).Observe(time.Since(start).Seconds())
	m.rpcRequests.WithLabelValues(method, status.Code(err).String()).Inc()
	return resp, err
}

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

// observedAdapter measures an adapter's batch calls: what coalescing and dependency waves
// made of the requests.
type observedAdapter struct {
	inner     driver.Store
	validator driver.AddressValidator
	store     string
	m         *metrics
}

func observeAdapter(name string, a driver.Store, m *metrics) driver.Store {
	v, _ := a.(driver.AddressValidator)
	return &observedAdapter{inner: a, validator: v, store: name, m: m}
}

func (a *observedAdapter) Read(ctx context.Context, addrs []driver.Address) ([]driver.ReadResult, error) {
	start := time.Now()
	res, err := a.inner.Read(ctx, addrs)
	a.done("read", len(addrs), start, err)
	return res, err
}

func (a *observedAdapter) Write(ctx context.Context, writes []driver.Write, opts driver.WriteOptions) ([]driver.WriteResult, error) {
	start := time.Now()
	res, err := a.inner.Write(ctx, writes, opts)
	a.done("write", len(writes), start, err)
	return res, err
}

func (a *observedAdapter) done(call string, n int, start time.Time, err error) {
	a.m.adapterDuration.WithLabelValues(a.store, call).Observe(time.Since(start).Seconds())
	a.m.adapterBatch.WithLabelValues(a.store, call).Observe(float64(n))
	result := "ok"
	if err != nil {
		result = "error"
	}
	a.m.adapterCalls.WithLabelValues(a.store, call, result).Inc()
}

func (a *observedAdapter) Close(ctx context.Context) error { return a.inner.Close(ctx) }

// ValidateAddress forwards to the adapter's own checks, which the Service finds only
// through this wrapper.
func (a *observedAdapter) ValidateAddress(addr driver.Address) error {
	if a.validator == nil {
		return nil
	}
	return a.validator.ValidateAddress(addr)
}

// observedMerger counts merge runs; a run with Attempt > 1 is a compare-and-set retry, which
// is how the CAS retries become visible without a hook in the store package.
type observedMerger struct {
	inner store.Merger
	m     *metrics
}

func (o observedMerger) Merge(ctx context.Context, call *store.MergeCall) (store.MergeResult, error) {
	name := o.m.storeLabel(call.Context.Addr.Store)
	o.m.mergeRuns.WithLabelValues(name).Inc()
	if call.Context.Attempt > 1 {
		o.m.mergeRetries.WithLabelValues(name).Inc()
	}
	return o.inner.Merge(ctx, call)
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
	o.m.workerRecords.WithLabelValues(o.store, "applied").Add(float64(s.Applied))
	o.m.workerRecords.WithLabelValues(o.store, "dead_lettered").Add(float64(s.DeadLettered))
	o.m.workerRecords.WithLabelValues(o.store, "retried").Add(float64(s.Retries))
	o.m.workerLag.WithLabelValues(o.store).Set(s.MaxLag.Seconds())
	o.m.workerDuration.WithLabelValues(o.store).Observe(s.Duration.Seconds())
}
