package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

// Options configure Open. The zero value (or nil) gives the documented defaults.
type Options struct {
	// Logger receives operational events of every pipeline (never row data or credentials);
	// each line carries the pipeline's name. Default: discarded.
	Logger *slog.Logger
	// Observe, when set, is called once per pipeline by Open for the observers its runner and
	// its sink report measurements to (either may be nil): what a metrics exporter such as
	// package mirrorprom hooks in with. Default: none.
	Observe func(pipeline string) (cdc.Observer, sink.Observer)
	// RetireInterval is how often Run looks for generations a reindex retired whose
	// retire_after has passed, and deletes them (doc.go, Reindexing). Default (zero or
	// negative): 30 s.
	RetireInterval time.Duration
}

// defaultRetireInterval is Options.RetireInterval's default.
const defaultRetireInterval = 30 * time.Second

// Mirror is a configuration's pipelines with everything they own: the state store, and per
// pipeline its dead-letter file, sink, source and runner.
type Mirror struct {
	// file is the bbolt state file (Config.State); nil with a shared store (Config.StateStore),
	// which Run opens (leader.go) and whose lease decides where each pipeline runs.
	file   *statestore.DB
	shared *StateStoreConfig
	lead   *leaderState // nil with a state file
	seats  []*seat
	log    *slog.Logger
	opts   Options
	// retireEvery is Options.RetireInterval.
	retireEvery time.Duration
	running     atomic.Bool
	closed      atomic.Bool
}

// runner is what Run and Status need of a cdc.Runner (tests substitute fakes).
type runner interface {
	Run(ctx context.Context) error
	Status() cdc.Status
}

// seat is one configured pipeline for the mirror's whole life: its configuration, its
// dead-letter file, its observers and, in cur, the sink, source and runner it runs now. With
// a state file cur is built by Open and never changes; with a shared store it is built anew at
// every takeover and is nil while the process is standby (leader.go).
type seat struct {
	name    string
	pc      *PipelineConfig
	dlq     *dlqFile
	runObs  cdc.Observer
	sinkObs sink.Observer
	cur     atomic.Pointer[pipeline]
	// role is the pipeline's leadership as Status reports it (nil with a state file).
	role *roleState
}

// pipeline is one term of a pipeline: what it writes with while it runs here.
type pipeline struct {
	name   string
	dlq    *dlqFile // the seat's, shared by every term; closed by the seat
	sink   *sink.Sink
	src    cdc.Source
	runner runner
	check  *clusterCheck // the start check of the sink's cluster (preflight.go)
	health *healthCache  // the health of its indices (clusterhealth.go)
	// entered re-snapshots the tables a relation entered (schemaevents.go).
	entered *enteredHook
}

// Open validates cfg and builds every pipeline: it opens the state file (once, for all of
// them) and the dead-letter files that exist (one that does not is created by Run, once its
// pipeline passed the start check), and builds sinks, sources and runners. Nothing connects
// to a server until Run. On error everything opened is closed again. With a shared state
// store (Config.StateStore) Open builds no sink, source or runner: Run connects to the store
// and builds them in the process that takes a pipeline's lease (doc.go, High availability).
func Open(cfg *Config, opts *Options) (_ *Mirror, err error) {
	if cfg == nil {
		return nil, errors.New("mirror: nil Config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetireInterval <= 0 {
		o.RetireInterval = defaultRetireInterval
	}
	m := &Mirror{log: o.Logger, retireEvery: o.RetireInterval, opts: o, shared: cfg.StateStore}
	defer func() {
		if err != nil {
			_ = m.Close()
		}
	}()
	if m.shared == nil {
		if m.file, err = statestore.Open(cfg.State, nil); err != nil {
			return nil, fmt.Errorf("mirror: state file: %w", err)
		}
	} else {
		m.lead = newLeaderState(m.shared, len(cfg.Pipelines))
	}
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		s := &seat{name: pc.Name, pc: pc}
		if o.Observe != nil {
			s.runObs, s.sinkObs = o.Observe(pc.Name)
		}
		m.seats = append(m.seats, s)
		if s.dlq, err = openDLQ(pc.DLQ); err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: dead-letter file: %w", pc.Name, err)
		}
		if m.shared != nil {
			s.role = newRoleState()
			continue
		}
		p, err := m.open(s, m.file)
		if p != nil {
			s.cur.Store(p)
		}
		if err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pc.Name, err)
		}
		m.logConfigured(pc)
	}
	if m.shared != nil {
		for i := range cfg.Pipelines {
			m.logConfigured(&cfg.Pipelines[i])
		}
	}
	return m, nil
}

// open builds one term of seat s's pipeline on state; what it returns is closed by
// closeTerm (by Close for the term Open built) even on error.
func (m *Mirror) open(s *seat, state statestore.Store) (*pipeline, error) {
	pc := s.pc
	log := m.log
	p := &pipeline{name: pc.Name, check: newClusterCheck(pc), dlq: s.dlq}
	p.entered = newEnteredHook(pc.Name, log, func() cdc.Source { return p.src })
	var err error
	if p.sink, err = sink.New(pc.Sink, pc.Name, state, &sink.Options{Observer: s.sinkObs, OnEntered: p.entered.entered}); err != nil {
		return p, err
	}
	p.entered.handled = p.sink.EnteredHandled
	p.health = newHealthCache(p.sink.ClusterHealth)
	if pc.Source.Type == "postgres" {
		if err := recordPostgresNames(context.Background(), state, pc); err != nil {
			return p, err
		}
	}
	src, err := newSource(pc, log.With("pipeline", pc.Name, "source", pc.Source.Type), state)
	if err != nil {
		return p, err
	}
	p.src = src
	if p.runner, err = cdc.NewRunner(pc.Name, src, p.sink, state, p.dlq, runnerOptions(pc, log, s.runObs)); err != nil {
		return p, err
	}
	return p, nil
}

// logConfigured logs what a pipeline reads and writes.
func (m *Mirror) logConfigured(pc *PipelineConfig) {
	tables := "every published table"
	switch {
	case len(pc.Source.Tables) > 0:
		tables = strings.Join(pc.Source.Tables, ", ")
	case len(pc.Source.Topics) > 0:
		tables = "the topics " + strings.Join(pc.Source.Topics, ", ")
	case pc.Source.TopicPattern != "":
		tables = "the topics matching " + pc.Source.TopicPattern
	}
	m.log.Info("pipeline configured", "pipeline", pc.Name, "source", pc.Source.Type, "tables", tables,
		"sink", pc.Sink.ID, "index", pc.Sink.Index, "dlq", pc.DLQ)
}

// closeTerm releases what open built: the background hooks, the sink and the source (not the
// seat's dead-letter file).
func closeTerm(p *pipeline) error {
	var errs []error
	if p.health != nil {
		p.health.close()
	}
	if p.entered != nil {
		p.entered.close()
	}
	if p.sink != nil {
		errs = append(errs, p.sink.Close())
	}
	if c, ok := p.src.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// runnerOptions maps the runner: settings onto cdc.RunnerOptions.
func runnerOptions(pc *PipelineConfig, log *slog.Logger, obs cdc.Observer) *cdc.RunnerOptions {
	r := pc.Runner
	return &cdc.RunnerOptions{
		BatchMaxEvents: r.BatchMaxEvents,
		BatchMaxBytes:  r.BatchMaxBytes,
		BatchMaxWait:   r.BatchMaxWait,
		BatchIdleWait:  r.BatchIdleWait,
		MaxInFlight:    r.MaxInFlight,
		BackoffMin:     r.BackoffMin,
		BackoffMax:     r.BackoffMax,
		StallThreshold: r.StallThreshold,

		BackpressureThreshold: r.BackpressureThreshold,
		UnansweredThreshold:   r.UnansweredThreshold,
		LagThreshold:          r.LagThreshold,
		LagInterval:           r.LagInterval,

		Logger:   log,
		Observer: obs,
	}
}

// Pipelines returns the pipelines' names in configuration order.
func (m *Mirror) Pipelines() []string {
	out := make([]string, len(m.seats))
	for i, s := range m.seats {
		out[i] = s.name
	}
	return out
}

// DeadLettersByTable returns how many events each table of the pipeline has had written to
// its dead-letter file by this process since Open, keyed by cdc.TableID.String() (nil for
// none, or an unknown pipeline). cdc.Progress.DeadLetters is the pipeline's total; the file
// itself may hold older records. Safe to call at any time from any goroutine.
func (m *Mirror) DeadLettersByTable(pipeline string) map[string]int64 {
	for _, s := range m.seats {
		if s.name == pipeline && s.dlq != nil {
			return s.dlq.counts()
		}
	}
	return nil
}

// ErrResnapshotUnsupported is Resnapshot's error for a pipeline whose source cannot read
// tables again while streaming.
var ErrResnapshotUnsupported = errors.New("mirror: the pipeline's source cannot re-snapshot while streaming")

// Resnapshot asks pipeline's source to read tables again while the pipeline keeps streaming
// (cdc.Resnapshotter): req.Tables as the configuration spells them (empty: every captured
// table), req.Where an optional SQL condition on each table's rows. It returns the request's
// id once the request is durable at the source; the running pipeline carries it out (its
// Status's Progress.Resnapshot tells how far), and one started later takes it up. The
// source's refusals (a table not captured or without a primary key, a condition the server
// refuses) come back as its errors; a source that cannot is ErrResnapshotUnsupported.
func (m *Mirror) Resnapshot(ctx context.Context, pipeline string, req cdc.ResnapshotRequest) (string, error) {
	for _, s := range m.seats {
		if s.name != pipeline {
			continue
		}
		p, err := m.active(s)
		if err != nil {
			return "", err
		}
		rs, ok := p.src.(cdc.Resnapshotter)
		if !ok {
			return "", fmt.Errorf("%w (pipeline %q)", ErrResnapshotUnsupported, pipeline)
		}
		id, err := rs.Resnapshot(ctx, req)
		if errors.Is(err, errors.ErrUnsupported) {
			// MySQL (not MariaDB): the source type can, this server cannot.
			return "", fmt.Errorf("%w (pipeline %q): %w", ErrResnapshotUnsupported, pipeline, err)
		}
		if err != nil {
			return "", fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		m.log.Info("re-snapshot requested", "pipeline", pipeline, "id", id, "tables", len(req.Tables), "where", req.Where != "")
		return id, nil
	}
	return "", fmt.Errorf("%w: %q (it has %s)", ErrNoPipeline, pipeline, strings.Join(m.Pipelines(), ", "))
}

// ErrNoPipeline is the error for a pipeline name the configuration does not have.
var ErrNoPipeline = errors.New("mirror: no such pipeline")

// Status returns every pipeline's status (cdc.Runner.Status), in configuration order; safe to
// call at any time from any goroutine, also before Run and after it returned.
func (m *Mirror) Status() []cdc.Status {
	out := make([]cdc.Status, len(m.seats))
	for i, s := range m.seats {
		p := s.cur.Load()
		if p == nil || p.runner == nil {
			out[i] = s.role.status(cdc.Status{Pipeline: s.name, State: "not running",
				Health: cdc.Health{Class: cdc.HealthNotRunning, Reason: "not running"}})
			continue
		}
		out[i] = p.runner.Status()
		if p.check != nil {
			out[i] = p.check.status(out[i])
		}
		if p.health != nil {
			out[i] = withClusterHealth(out[i], p.health.get(time.Now()))
		}
		if p.entered != nil {
			out[i] = p.entered.status(out[i])
		}
		out[i] = s.role.status(out[i])
	}
	return out
}

// Run runs every pipeline in a goroutine of its own until ctx ends, then returns nil. Each
// pipeline first checks its sink's cluster (the deployment requirement: it must refuse to
// auto-create df-w-* indices) before its runner opens the source, so that a refusal certain
// before the first write creates nothing -- no slot, publication, index or dead-letter file;
// a cluster out of reach is checked again after a backoff, Status saying "starting: checking
// the cluster" meanwhile. Each runner supervises its stream (a failure that is not permanent
// reopens it from the stored checkpoint); a pipeline that stops anyway -- a permanent failure
// such as a start refusal, an authentication failure, lost history or a fencing conflict --
// is logged once and shows in Status, and the other pipelines go on. When every pipeline has stopped, Run returns their
// errors joined (errors.Join), each a *PipelineError naming its pipeline. Run may be called
// again after it returned, not concurrently.
func (m *Mirror) Run(ctx context.Context) error {
	if m.closed.Load() {
		return errors.New("mirror: Run after Close")
	}
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("mirror: Run called while running")
	}
	defer m.running.Store(false)
	errs := make([]error, len(m.seats))
	var left atomic.Int64
	left.Store(int64(len(m.seats)))
	var wg sync.WaitGroup
	if m.lead != nil {
		wg.Go(func() {
			m.lead.connect(ctx, m.log, func(err error) {
				for _, s := range m.seats {
					s.role.set(func(ld *cdc.Leadership) { ld.StoreErr = err })
				}
			})
		})
	}
	for i, s := range m.seats {
		wg.Go(func() {
			var err error
			if m.lead != nil {
				err = m.lead.run(ctx, m, s)
			} else {
				err = m.runTerm(ctx, s.cur.Load())
			}
			running := left.Add(-1)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				errs[i] = &PipelineError{Pipeline: s.name, Err: err}
			}
			// The runner logged why (once); this says what it means for the mirror.
			if running > 0 {
				m.log.Warn("pipeline stopped; the other pipelines go on", "pipeline", s.name, "running", running)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(errs...)
}

// runTerm runs p until ctx ends or its runner stops: the start check, then the runner, with
// retired generations deleted meanwhile.
func (m *Mirror) runTerm(ctx context.Context, p *pipeline) error {
	if p.sink != nil {
		retire, stopRetire := context.WithCancel(ctx)
		defer stopRetire()
		go m.deleteRetired(retire, p)
	}
	err := m.start(ctx, p)
	if err == nil {
		err = p.runner.Run(ctx)
	}
	return err
}

// start is what comes before p's runner runs: the start check of the sink's cluster, then the
// dead-letter file (created now, not by a pipeline refused at start).
func (m *Mirror) start(ctx context.Context, p *pipeline) error {
	if p.sink != nil && p.check != nil {
		if err := m.checkCluster(ctx, p); err != nil {
			return err
		}
	}
	if p.dlq != nil {
		if err := p.dlq.open(); err != nil {
			err = cdc.Permanent(fmt.Errorf("dead-letter file: %w", err))
			if p.check != nil {
				p.check.set(func() { p.check.phase, p.check.refused = checkRefused, err })
			}
			m.log.Error("pipeline stopped before it started", "pipeline", p.name, "err", err)
			return err
		}
	}
	return nil
}

// deleteRetired deletes, while Run runs, the generations of p's tables whose retention ended,
// looking every Options.RetireInterval.
func (m *Mirror) deleteRetired(ctx context.Context, p *pipeline) {
	tick := time.NewTicker(m.retireEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		deleted, err := p.sink.DeleteRetired(ctx, time.Now())
		for _, idx := range deleted {
			m.log.Info("retired generation deleted", "pipeline", p.name, "index", idx)
		}
		if err != nil && ctx.Err() == nil {
			m.log.Warn("deleting a retired generation failed; tried again later", "pipeline", p.name, "error", err)
		}
	}
}

// PipelineError is why one pipeline stopped.
type PipelineError struct {
	Pipeline string
	Err      error
}

// Error names the pipeline once: the runner's errors already do.
func (e *PipelineError) Error() string {
	msg := e.Err.Error()
	if strings.Contains(msg, "pipeline "+strconv.Quote(e.Pipeline)) {
		return msg
	}
	return "pipeline " + strconv.Quote(e.Pipeline) + ": " + msg
}

func (e *PipelineError) Unwrap() error { return e.Err }

// Close releases what Open opened: sinks, dead-letter files and the state file. Call it after
// Run returned. Later calls do nothing.
func (m *Mirror) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, s := range m.seats {
		if p := s.cur.Swap(nil); p != nil {
			errs = append(errs, closeTerm(p))
		}
		if s.dlq != nil {
			errs = append(errs, s.dlq.Close())
		}
	}
	if m.file != nil {
		errs = append(errs, m.file.Close())
	}
	if m.lead != nil {
		errs = append(errs, m.lead.close())
	}
	return errors.Join(errs...)
}
