package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
)

// Health service names. The process ("") and the API (recordServiceName) are SERVING while
// the process runs; each dependency has its own service, so one failing store does not take
// the process or the other stores out of service. A store's queue, whatever its kind, is
// queueServicePrefix+store; a Kafka queue is also kafkaServicePrefix+store, the name of
// earlier releases (deprecated).
const (
	recordServiceName    = "tributary.record.v1.RecordService"
	storageServicePrefix = "tributary.record.v1.storage."
	queueServicePrefix   = "tributary.record.v1.queue."
	kafkaServicePrefix   = "tributary.record.v1.kafka."
)

// check is one periodic dependency check.
type check struct {
	service    string // health service name
	alias      string // a second name with the same status ("": none)
	store      string
	dependency string // storage | kafka | memory_queue
	probe      func(ctx context.Context) error
	close      func()
	figures    func() []any // log attributes added to its transitions (a Kafka queue's lag); nil: none
}

// healthChecker runs the checks and publishes their results to the gRPC health server and the
// dependency_healthy gauge.
type healthChecker struct {
	srv      *health.Server
	checks   []check
	interval time.Duration
	timeout  time.Duration
	m        *metrics
	log      *slog.Logger

	mu      sync.Mutex
	last    map[string]error // previous result per service, to log transitions only
	lagLost map[string]bool  // per store: its last queue measurement failed, to log transitions only
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

func newHealthChecker(rt *runtime) (*healthChecker, error) {
	h := &healthChecker{
		srv: health.NewServer(), interval: rt.cfg.Health.Interval, timeout: rt.cfg.Health.Timeout,
		m: rt.m, log: rt.log, last: map[string]error{}, lagLost: map[string]bool{},
	}
	for _, name := range rt.names {
		sc := rt.cfg.Stores[name]
		a, addr := rt.raw[name], healthAddress(name, sc)
		h.checks = append(h.checks, check{
			service: storageServicePrefix + name, store: name, dependency: "storage",
			probe: func(ctx context.Context) error { return probeStorage(ctx, a, addr) },
		})
		q := sc.Queue
		switch {
		case q == nil:
		case q.Kind == "memory":
			// The in-process queue is as available as the process.
			h.checks = append(h.checks, check{service: queueServicePrefix + name, store: name, dependency: "memory_queue",
				probe: func(context.Context) error { return nil }})
		default:
			mon, err := kafkaqueue.NewMonitor(kafkaConfig(q, q.Topic), nil)
			if err != nil {
				h.closeChecks()
				return nil, fmt.Errorf("stores.%s.queue: %w", name, err)
			}
			h.checks = append(h.checks, check{service: queueServicePrefix + name, alias: kafkaServicePrefix + name, store: name, dependency: "kafka",
				probe: func(ctx context.Context) error { return h.probeKafka(ctx, name, mon) }, close: func() { _ = mon.Close() },
				figures: func() []any { return h.lagFigures(name) }})
		}
	}
	h.srv.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if rt.mode != modeWorker {
		h.srv.SetServingStatus(recordServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	return h, nil
}

// probeStorage reads the health record. Any answer from the server -- found, not found, a
// dataset that does not exist -- proves the store reachable; only a failure that says the
// server could not answer, or refused the service's credentials (permission denied, also a
// role that does not cover the health record's dataset), counts.
func probeStorage(ctx context.Context, a driver.Store, addr driver.Address) error {
	res, err := a.Read(ctx, []driver.Address{addr})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("adapter returned %d results for one read", len(res))
	}
	if e := res[0].Err; e != nil {
		switch store.KindOf(e) {
		case store.KindUnavailable, store.KindOutcomeUnknown, store.KindInternal, store.KindCanceled,
			store.KindPermissionDenied: // refused credentials make the store unusable
			return e
		}
	}
	return nil
}

// backlogMonitor is what a Kafka queue's check asks the brokers: a *kafkaqueue.Monitor.
type backlogMonitor interface {
	Ping(ctx context.Context) error
	Backlog(ctx context.Context) (kafkaqueue.Backlog, error)
}

// probeKafka pings the store's topic and, when the brokers answer, measures the worker
// group's backlog against them (kafkaqueue.Monitor.Backlog): the queue depth and the
// timestamp of the oldest message not committed, exported as recordsvc_queue_depth and
// recordsvc_queue_oldest_age_seconds. The ping decides health; a failed measurement -- the
// brokers unreachable, or the backlog read failing on its own, which leaves the dependency
// healthy -- keeps the last figures, flagged stale (recordsvc_queue_stale), and the oldest
// age keeps growing from the last oldest timestamp.
func (h *healthChecker) probeKafka(ctx context.Context, name string, mon backlogMonitor) error {
	if err := mon.Ping(ctx); err != nil {
		h.lagMeasured(name, err, false) // the check's own transition says so
		return err
	}
	at := time.Now()
	b, err := mon.Backlog(ctx)
	if err != nil {
		h.lagMeasured(name, err, true)
		return nil
	}
	h.m.measured(name, b, at)
	h.lagMeasured(name, nil, true)
	return nil
}

// lagMeasured flags a failed measurement stale and, with logged, logs when the measurements
// of a store's queue start or stop failing while its brokers answer (a broker that does not
// answer is logged by its check, with the figures).
func (h *healthChecker) lagMeasured(name string, err error, logged bool) {
	if err != nil {
		h.m.unmeasured(name)
	}
	h.mu.Lock()
	lost := h.lagLost[name]
	h.lagLost[name] = err != nil
	h.mu.Unlock()
	switch {
	case !logged:
	case err != nil && !lost:
		h.log.Warn("queue lag not measured; reporting the last figures as stale", append([]any{slog.String("store", name), slog.String("error", err.Error())}, h.lagFigures(name)...)...)
	case err == nil && lost:
		h.log.Info("queue lag measured again", append([]any{slog.String("store", name)}, h.lagFigures(name)...)...)
	}
}

// lagFigures are the last measurement of a store's queue as log attributes: its depth, the
// age of its oldest unapplied record now, when it was measured and whether that is stale.
func (h *healthChecker) lagFigures(name string) []any {
	b, ok := h.m.backlog(name)
	if !ok {
		return []any{slog.Bool("queue_measured", false)}
	}
	h.mu.Lock()
	stale := h.lagLost[name]
	h.mu.Unlock()
	return []any{slog.Int64("queue_depth", b.Total), slog.Duration("queue_oldest_age", b.Age(time.Now()).Round(time.Millisecond)),
		slog.Bool("queue_stale", stale)}
}

// start runs one round of checks synchronously, so the statuses mean something from the
// first request on, and then keeps checking every interval until stop.
func (h *healthChecker) start() {
	h.round(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.round(ctx)
			}
		}
	}()
}

// round runs every check concurrently, each bounded by the timeout, so a hanging store
// delays nobody else's status.
func (h *healthChecker) round(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range h.checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, h.timeout)
			err := c.probe(cctx)
			cancel()
			if ctx.Err() != nil {
				return // stopping: keep the last real result
			}
			h.set(c, err)
		}()
	}
	wg.Wait()
}

func (h *healthChecker) set(c check, err error) {
	st, v := healthpb.HealthCheckResponse_SERVING, 1.0
	if err != nil {
		st, v = healthpb.HealthCheckResponse_NOT_SERVING, 0
	}
	h.srv.SetServingStatus(c.service, st)
	if c.alias != "" {
		h.srv.SetServingStatus(c.alias, st)
	}
	h.m.healthy.WithLabelValues(c.store, c.dependency).Set(v)
	h.mu.Lock()
	prev, seen := h.last[c.service]
	h.last[c.service] = err
	h.mu.Unlock()
	var figures []any
	if c.figures != nil {
		figures = c.figures()
	}
	switch {
	case err != nil && (!seen || prev == nil):
		h.log.Warn("dependency unhealthy", append([]any{slog.String("service", c.service), slog.String("error", err.Error())}, figures...)...)
	case err == nil && seen && prev != nil:
		h.log.Info("dependency healthy again", append([]any{slog.String("service", c.service)}, figures...)...)
	}
}

// stop ends the checks and reports every service NOT_SERVING, as a stopping process should.
func (h *healthChecker) stop() {
	if h.cancel != nil {
		h.cancel()
	}
	h.done.Wait()
	h.srv.Shutdown()
	h.closeChecks()
}

func (h *healthChecker) closeChecks() {
	for _, c := range h.checks {
		if c.close != nil {
			c.close()
		}
	}
}
