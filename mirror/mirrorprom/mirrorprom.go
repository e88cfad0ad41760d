package mirrorprom

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// Options configure New. The zero value (or nil) gives the defaults.
type Options struct {
	// Namespace starts every metric name. Default "mirror"; examples/cdcmirror uses
	// "cdcmirror", the names its exporter always had.
	Namespace string
}

// StatusSource is what the collector reads at scrape time: a *mirror.Mirror.
type StatusSource interface {
	Status() []cdc.Status
}

// Collector is a prometheus.Collector for the pipelines of a mirror. Register it on a
// registry of your own; it registers nothing by itself.
type Collector struct {
	ns string

	src atomic.Pointer[StatusSource]

	mu    sync.Mutex // guards pipes
	pipes map[string]*observer

	// From the observers.
	checkpoints, retryWait, bulkBytes          *prometheus.CounterVec
	bulkRequests, bulkItems, claims, unchanged *prometheus.CounterVec
	batchSeconds, bulkSeconds                  *prometheus.HistogramVec

	// From Status, at scrape time.
	healthy, healthReason, state                          *prometheus.Desc
	lagSeconds, lagBytes, retained, lagMeasured, lagError *prometheus.Desc
	pending, lastBatch, lastCheckpoint                    *prometheus.Desc
	snapActive, snapDone, snapEst, snapTables, snapTotal  *prometheus.Desc
	resnapActive, resnapDone, resnapEst, resnapTables     *prometheus.Desc
	resnapTotal, resnapRate, resnapQueued                 *prometheus.Desc
	events, batches, deadLetters, retries, reconnects     *prometheus.Desc
	incomplete                                            *prometheus.Desc
	role, takeovers, epoch, lastTakeover, storeErr        *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector; hand its Observe to mirror.Options.Observe, and Watch the mirror
// Open returned.
func New(opts *Options) *Collector {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Namespace == "" {
		o.Namespace = "mirror"
	}
	c := &Collector{ns: o.Namespace, pipes: map[string]*observer{}}
	pl := []string{"pipeline"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: c.ns, Name: name, Help: help}, append(pl, labels...))
	}
	c.checkpoints = counter("checkpoints_total", "Checkpoints saved after a batch.")
	c.retryWait = counter("backpressure_wait_seconds_total", "Time spent waiting before offering a pushed-back batch again.")
	c.bulkBytes = counter("bulk_request_bytes_total", "Bytes of _bulk request bodies.")
	c.bulkRequests = counter("bulk_requests_total", "_bulk requests by HTTP status class (none: no answer came).", "status")
	c.bulkItems = counter("bulk_items_total", "Per-item outcomes of _bulk answers: applied, superseded (409, a newer version is there), dead_lettered, retried (per-item 429).", "outcome")
	c.claims = counter("claims_total", "Fence claims of an index: on first use and after each connection loss.", "index")
	c.unchanged = counter("unchanged_values_total", "Values the source left out of updates as unchanged (PostgreSQL TOAST), by where the sink found them: batch, index, or unavailable (rows dead-lettered).", "from")
	c.batchSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: c.ns, Name: "batch_duration_seconds",
		Help:    "From a batch's first offer to the sink to its checkpoint (backoff waits included).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, pl)
	c.bulkSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: c.ns, Name: "bulk_duration_seconds",
		Help:    "From sending a _bulk request to reading its whole answer.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2, 14)}, pl)

	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(c.ns, "", name), help, append(pl, labels...), nil)
	}
	c.healthy = desc("healthy", "1 while the pipeline runs and makes progress; 0 when it is not running, stopped, stalled, reconnecting, pushed back or lagging beyond its thresholds (health_reason says which).")
	c.healthReason = desc("health_reason", "1 for the pipeline's current health reason: ok, not_running, starting, stopped, stalled, reconnecting, backpressure, sink_unavailable, sink_not_answering, lagging, cluster_red, table_incomplete, standby or other.", "reason")
	c.state = desc("state", "1 for the pipeline's current state, 0 for the others.", "state")
	c.lagSeconds = desc("replication_lag_seconds", "How far the index trails the source, in seconds: from the source's lag measurements (also while idle or disconnected), else from the newest commit of the last streamed batch.")
	c.lagBytes = desc("replication_lag_bytes", "Change log between the stored checkpoint and the server's position at the last lag measurement.")
	c.retained = desc("retained_bytes", "Change log the server keeps for the pipeline (PostgreSQL: WAL held by the slot); absent when the server keeps nothing on its behalf.")
	c.lagMeasured = desc("lag_measured_timestamp_seconds", "When the source last answered a lag measurement (Unix time).")
	c.lagError = desc("lag_measurement_failing", "1 while the last lag measurement failed (the source is unreachable), else 0.")
	c.pending = desc("pending_events", "Events read and not yet acknowledged by the sink.")
	c.lastBatch = desc("last_batch_timestamp_seconds", "When a batch last succeeded (Unix time); absent before the first.")
	c.lastCheckpoint = desc("last_checkpoint_timestamp_seconds", "When a checkpoint was last saved (Unix time); absent before the first.")
	c.snapActive = desc("snapshot_active", "1 while the initial snapshot is being read.")
	c.snapDone = desc("snapshot_rows_done", "Snapshot rows handed to the pipeline: of the running snapshot, else of the last one (kept after it ended).")
	c.snapEst = desc("snapshot_rows_estimated", "The source catalog's row estimate for the snapshot's tables: of the running snapshot, else of the last one.")
	c.snapTables = desc("snapshot_tables_done", "Snapshot tables read completely: of the running snapshot, else of the last one.")
	c.snapTotal = desc("snapshot_tables_total", "Tables the snapshot reads: of the running snapshot, else of the last one.")
	c.resnapActive = desc("resnapshot_active", "1 while a re-snapshot reads tables again while streaming.")
	c.resnapDone = desc("resnapshot_rows_done", "Rows the re-snapshot read: of the running one, else of the last one.")
	c.resnapEst = desc("resnapshot_rows_estimated", "The planner's row estimate for the re-snapshot's tables: of the running one, else of the last one.")
	c.resnapTables = desc("resnapshot_tables_done", "Tables the re-snapshot read completely: of the running one, else of the last one.")
	c.resnapTotal = desc("resnapshot_tables_total", "Tables the re-snapshot reads: of the running one, else of the last one.")
	c.resnapRate = desc("resnapshot_rows_per_second", "The re-snapshot's read rate: of the running one, else of the last one.")
	c.resnapQueued = desc("resnapshot_queued", "Re-snapshot requests waiting behind the running one.")
	c.events = desc("events_total", "Events in batches that succeeded (applied, superseded or dead-lettered); events per second is rate() of it.")
	c.batches = desc("batches_total", "Batches that succeeded.")
	c.deadLetters = desc("dead_letters_total", "Events written to the dead-letter file.")
	c.retries = desc("backpressure_retries_total", "Times the sink pushed a batch back and the runner offered it again.")
	c.reconnects = desc("reconnects_total", "Times the stream was reopened after a failure.")
	c.role = desc("role", "With a shared state store (active/standby): 1 for this process's current role for the pipeline (active, standby, taking_over), 0 for the others; absent without one.", "role")
	c.takeovers = desc("takeovers_total", "With a shared state store: times this process acquired the pipeline's lease (its first start as the active included).")
	c.epoch = desc("lease_epoch", "With a shared state store: the epoch of the pipeline's lease as last read (the fencing token; 0 before any process acquired it).")
	c.lastTakeover = desc("last_takeover_seconds", "With a shared state store: how long this process's last takeover of the pipeline took, from acquiring the lease until the pipeline was writing (every index claimed, the source reopened); absent before its first.")
	c.storeErr = desc("state_store_error", "With a shared state store: 1 while the last attempt to reach it failed (the active cannot renew its lease, a standby cannot take over), else 0.")
	c.incomplete = desc("incomplete_tables", "Tables whose index misses rows the pipeline cannot restore on its own (a relation entered them and no re-snapshot could be requested): see the status's incomplete list for the fix.")
	return c
}

// Watch makes the collector read s's Status at every scrape; before it, only the observers'
// metrics are collected.
func (c *Collector) Watch(s StatusSource) { c.src.Store(&s) }

// Observe is a mirror.Options.Observe: the runner's and the sink's observers of one pipeline.
// Every series carries the pipeline's name as its pipeline label.
func (c *Collector) Observe(pipeline string) (cdc.Observer, sink.Observer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.pipes[pipeline]
	if o == nil {
		o = c.newObserver(pipeline)
		c.pipes[pipeline] = o
	}
	return o, o
}

func (c *Collector) vecs() []prometheus.Collector {
	return []prometheus.Collector{c.checkpoints, c.retryWait, c.bulkBytes, c.bulkRequests, c.bulkItems, c.claims,
		c.unchanged, c.batchSeconds, c.bulkSeconds}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.vecs() {
		v.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{c.healthy, c.healthReason, c.state, c.lagSeconds, c.lagBytes, c.retained,
		c.lagMeasured, c.lagError, c.pending, c.lastBatch, c.lastCheckpoint, c.snapActive, c.snapDone, c.snapEst,
		c.snapTables, c.snapTotal, c.resnapActive, c.resnapDone, c.resnapEst, c.resnapTables, c.resnapTotal,
		c.resnapRate, c.resnapQueued, c.events, c.batches, c.deadLetters, c.retries, c.reconnects, c.incomplete,
		c.role, c.takeovers, c.epoch, c.lastTakeover, c.storeErr} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the observers' metrics, and every pipeline's
// Status as it is now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.vecs() {
		v.Collect(ch)
	}
	src := c.src.Load()
	if src == nil {
		return
	}
	for _, s := range (*src).Status() {
		c.collectStatus(ch, s)
	}
}

func (c *Collector) collectStatus(ch chan<- prometheus.Metric, s cdc.Status) {
	p := s.Pipeline
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{p}, labels...)...)
	}
	count := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), p)
	}
	stamp := func(d *prometheus.Desc, t time.Time) {
		if !t.IsZero() {
			gauge(d, float64(t.UnixNano())/1e9)
		}
	}
	gauge(c.healthy, b2f(s.Health.Healthy))
	gauge(c.healthReason, 1, ReasonClass(s.Health))
	gauge(c.incomplete, float64(len(s.Incomplete)))
	st := stateLabel(s.State)
	for _, known := range states {
		gauge(c.state, b2f(known == st), known)
	}

	measured := !s.Lag.MeasuredAt.IsZero() || s.Lag.Err != nil
	switch {
	case measured:
		gauge(c.lagSeconds, s.Lag.Seconds)
		gauge(c.lagBytes, float64(s.Lag.Bytes))
		if s.Lag.Retained >= 0 {
			gauge(c.retained, float64(s.Lag.Retained))
		}
		stamp(c.lagMeasured, s.Lag.MeasuredAt)
		gauge(c.lagError, b2f(s.Lag.Err != nil))
	default:
		c.mu.Lock()
		o := c.pipes[p]
		c.mu.Unlock()
		if o != nil {
			if v, ok := o.batchLag(); ok {
				gauge(c.lagSeconds, v)
			}
		}
	}

	pr := s.Progress
	gauge(c.pending, float64(pr.Pending))
	stamp(c.lastBatch, pr.LastBatch)
	stamp(c.lastCheckpoint, pr.LastCheckpoint)
	snap := pr.Snapshot // the runner keeps the last snapshot's figures after it ended
	gauge(c.snapActive, b2f(snap.Active))
	gauge(c.snapDone, float64(snap.RowsDone))
	gauge(c.snapEst, float64(snap.RowsEstimated))
	gauge(c.snapTables, float64(snap.TablesDone))
	gauge(c.snapTotal, float64(snap.TablesTotal))
	rs := pr.Resnapshot
	gauge(c.resnapActive, b2f(rs.Active))
	gauge(c.resnapDone, float64(rs.RowsDone))
	gauge(c.resnapEst, float64(rs.RowsEstimated))
	gauge(c.resnapTables, float64(rs.TablesDone))
	gauge(c.resnapTotal, float64(rs.TablesTotal))
	gauge(c.resnapRate, rs.RowsPerSecond)
	gauge(c.resnapQueued, float64(rs.Queued))
	count(c.events, pr.Events)
	count(c.batches, pr.Batches)
	count(c.deadLetters, pr.DeadLetters)
	count(c.retries, pr.Retries)
	count(c.reconnects, s.Reconnects)

	if ld := s.Leadership; ld.Role != "" { // a shared state store: active/standby
		r := stateLabel(ld.Role)
		for _, known := range roles {
			gauge(c.role, b2f(known == r), known)
		}
		count(c.takeovers, ld.Takeovers)
		gauge(c.epoch, float64(ld.Epoch))
		if ld.Takeovers > 0 {
			gauge(c.lastTakeover, ld.LastTakeover.Seconds())
		}
		gauge(c.storeErr, b2f(ld.StoreErr != nil))
	}
}

// states are the values of Status.State, as label values.
var states = []string{"not_running", "starting", "snapshotting", "resnapshotting", "streaming", "reconnecting", "stopped",
	"standby", "taking_over"}

// roles are the values of Status.Leadership.Role, as label values.
var roles = []string{stateLabel(cdc.RoleActive), stateLabel(cdc.RoleStandby), stateLabel(cdc.RoleTakingOver)}

func stateLabel(s string) string { return strings.ReplaceAll(s, " ", "_") }

// ReasonClass is the health_reason label: the runner's Health.Class (ok, not_running,
// starting, stopped, stalled, reconnecting, backpressure, sink_unavailable, sink_not_answering,
// lagging, cluster_red, table_incomplete), standby for a standby of an active/standby
// deployment (healthy or not), "other" for a Health without one. The reason's text itself
// (with its durations and error) is for /healthz and logs.
func ReasonClass(h cdc.Health) string {
	switch {
	case h.Class == cdc.HealthStandby:
		return h.Class
	case h.Healthy:
		return cdc.HealthOK
	case h.Class != "":
		return h.Class
	}
	return "other"
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// observer is one pipeline's cdc.Observer and sink.Observer.
type observer struct {
	checkpoints, retryWait, bulkBytes  prometheus.Counter
	batchSeconds, bulkSeconds          prometheus.Observer
	bulkRequests                       *prometheus.CounterVec // curried: status
	applied, superseded, dead, retried prometheus.Counter
	fromBatch, fromIndex, unavailable  prometheus.Counter
	claims                             *prometheus.CounterVec // curried: index
	lag                                atomic.Uint64          // float64 bits of the last batch's lag; NaN: none yet
}

var (
	_ cdc.Observer           = (*observer)(nil)
	_ sink.Observer          = (*observer)(nil)
	_ sink.UnchangedObserver = (*observer)(nil)
)

func (c *Collector) newObserver(p string) *observer {
	o := &observer{
		checkpoints:  c.checkpoints.WithLabelValues(p),
		retryWait:    c.retryWait.WithLabelValues(p),
		bulkBytes:    c.bulkBytes.WithLabelValues(p),
		batchSeconds: c.batchSeconds.WithLabelValues(p),
		bulkSeconds:  c.bulkSeconds.WithLabelValues(p),
		bulkRequests: c.bulkRequests.MustCurryWith(prometheus.Labels{"pipeline": p}),
		applied:      c.bulkItems.WithLabelValues(p, "applied"),
		superseded:   c.bulkItems.WithLabelValues(p, "superseded"),
		dead:         c.bulkItems.WithLabelValues(p, "dead_lettered"),
		retried:      c.bulkItems.WithLabelValues(p, "retried"),
		fromBatch:    c.unchanged.WithLabelValues(p, "batch"),
		fromIndex:    c.unchanged.WithLabelValues(p, "index"),
		unavailable:  c.unchanged.WithLabelValues(p, "unavailable"),
		claims:       c.claims.MustCurryWith(prometheus.Labels{"pipeline": p}),
	}
	o.lag.Store(math.Float64bits(math.NaN()))
	return o
}

// BatchDone implements cdc.Observer.
func (o *observer) BatchDone(s cdc.BatchStats) {
	if s.Checkpointed {
		o.checkpoints.Inc()
	}
	o.batchSeconds.Observe(s.Duration.Seconds())
	// A batch of snapshot reads has no commit time and says nothing about lag.
	if s.Lag > 0 {
		o.lag.Store(math.Float64bits(s.Lag.Seconds()))
	}
}

func (o *observer) batchLag() (float64, bool) {
	v := math.Float64frombits(o.lag.Load())
	return v, !math.IsNaN(v)
}

// Backpressure implements cdc.Observer.
func (o *observer) Backpressure(_ int, wait time.Duration) { o.retryWait.Add(wait.Seconds()) }

// BulkDone implements sink.Observer.
func (o *observer) BulkDone(s sink.BulkStats) {
	o.bulkRequests.WithLabelValues(statusClass(s.Status)).Inc()
	o.bulkSeconds.Observe(s.Duration.Seconds())
	o.bulkBytes.Add(float64(s.Bytes))
	o.applied.Add(float64(s.Applied))
	o.superseded.Add(float64(s.Superseded))
	o.dead.Add(float64(s.DeadLettered))
	o.retried.Add(float64(s.Retried))
}

// Claimed implements sink.Observer. Index names are one per captured table, so the label
// stays bounded.
func (o *observer) Claimed(index string) { o.claims.WithLabelValues(index).Inc() }

// UnchangedFilled implements sink.UnchangedObserver.
func (o *observer) UnchangedFilled(s sink.UnchangedStats) {
	o.fromBatch.Add(float64(s.FromBatch))
	o.fromIndex.Add(float64(s.FromIndex))
	o.unavailable.Add(float64(s.DeadLettered))
}

// statusClass folds HTTP statuses into a handful of label values.
func statusClass(status int) string {
	if status <= 0 {
		return "none"
	}
	return strconv.Itoa(status/100) + "xx"
}
