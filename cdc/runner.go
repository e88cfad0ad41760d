package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/internal/backoff"
)

// RunnerOptions configure a Runner. nil, and the zero value of each field, take the documented
// defaults.
type RunnerOptions struct {
	// BatchMaxEvents closes a batch at this many events. Default 1000.
	BatchMaxEvents int
	// BatchMaxBytes closes a batch before it would exceed this estimated size (an event larger
	// than this travels alone). The estimate is the JSON size of the event's values plus a
	// fixed overhead per event. Default 5 MiB, inside Elasticsearch's recommended bulk sizes.
	BatchMaxBytes int
	// BatchMaxWait closes a batch this long after its first event arrived, so a trickle of
	// changes still reaches the sink promptly. Default 500ms.
	BatchMaxWait time.Duration
	// BatchIdleWait closes a batch once no event arrived for this long: when the source goes
	// quiet (the end of a burst, a lone change), what it sent is written at once instead of
	// waiting out BatchMaxWait, while a steady stream keeps filling batches up to their size
	// bounds (MaxInFlight batches at the sink at once leave the next one gathering). Default
	// 5ms; negative turns it off (batches close by size and BatchMaxWait only).
	BatchIdleWait time.Duration
	// MaxInFlight is how many batches may be at the sink at once when the sink is a
	// ConcurrentSink (package sink's is): the runner goes on gathering and sending batches
	// while earlier ones are being written, and commits them -- dead letters, checkpoint,
	// ack -- strictly in batch order, so the stored checkpoint never passes a batch the sink
	// has not answered. Changes whose order matters never overtake an earlier batch writing
	// the same document (see ConcurrentSink), and no batch is sent while another is being
	// pushed back. A batch the sink answered that waits for an earlier one to be answered
	// holds no slot (one slow request does not idle the others); at most 2*MaxInFlight
	// batches are uncommitted. Default 4; 1 writes one batch at a time. Other sinks always
	// get 1.
	MaxInFlight int

	// BackoffMin and BackoffMax bound the jittered exponential waits: before a batch the sink
	// answered with backpressure is offered again (a RetryAfter from the sink is honoured even
	// when it is longer), and before a failed stream is reopened. The backpressure wait starts
	// over with every batch, the reopening wait once a batch succeeded after the reopening.
	// Defaults 100ms and 5s: a pipeline resumes within seconds of its servers coming back.
	BackoffMin, BackoffMax time.Duration

	// StallThreshold is how long events may wait without any batch succeeding before Health
	// reports the pipeline stalled. Default 2 minutes.
	StallThreshold time.Duration
	// BackpressureThreshold is how long one batch may keep being pushed back by the sink before
	// Health reports it. Default 1 minute.
	BackpressureThreshold time.Duration
	// UnansweredThreshold is how long one write may wait for the sink's answer before Health
	// reports the sink not answering (class sink_not_answering), counted from when the runner
	// called Sink.Write, whatever the sink's own request timeout: an engine that stopped
	// answering (a black-holed network, a hung node) shows within this bound, not once its
	// requests time out, and the pipeline is healthy again as soon as the write is answered.
	// A write that legitimately takes longer (a large batch on an overloaded cluster) is
	// reported the same way while it lasts -- for that long nothing was answered either;
	// raise the threshold where that is normal. An idle pipeline has no write at the sink and
	// nothing to report: its first write after the engine went silent is. Default 8s: with a
	// health probe polling every second or two, an unresponsive engine is reported within 10s
	// of the first write it leaves unanswered. Negative turns the check off.
	UnansweredThreshold time.Duration
	// LagThreshold is how far behind its source (Status.Lag.Seconds) the pipeline may fall
	// before Health reports it; not checked while a snapshot is being read. Sources that are
	// LagReporters only. Default 1 minute.
	LagThreshold time.Duration
	// LagInterval is how often the source is asked how far the pipeline trails it (LagReporter
	// sources only), whether the stream is open or not. Default 5s.
	LagInterval time.Duration
	// Permanent decides which failures end Run instead of reopening the stream. Default
	// IsPermanent (cdc/failure.go); a function given here is asked in addition.
	Permanent func(error) bool

	// Logger receives operational events (never row data). Default: discarded.
	Logger *slog.Logger
	// Clock is the runner's time source (batch waits, backoff, health). Default the system clock.
	Clock Clock
	// Rand supplies backoff jitter. Default a generator seeded at random.
	Rand *rand.Rand
	// Observer receives per-batch measurements for metrics. Default: none.
	Observer Observer
	// ReportInterval rate-limits the Warn lines about dead letters and truncates: the first
	// of each (table, reason class) is logged at once, then at most one line per interval
	// with the number of others since the last line. Default 1 minute.
	ReportInterval time.Duration
}

// Clock is a time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (o *RunnerOptions) withDefaults() (RunnerOptions, error) {
	var c RunnerOptions
	if o != nil {
		c = *o
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.BatchMaxEvents, 1000)
	def(&c.BatchMaxBytes, 5<<20)
	def(&c.MaxInFlight, 4)
	defDur(&c.BatchMaxWait, 500*time.Millisecond)
	if c.BatchIdleWait == 0 {
		c.BatchIdleWait = 5 * time.Millisecond
	}
	defDur(&c.BackoffMin, 100*time.Millisecond)
	defDur(&c.BackoffMax, 5*time.Second)
	defDur(&c.StallThreshold, 2*time.Minute)
	defDur(&c.BackpressureThreshold, time.Minute)
	if c.UnansweredThreshold == 0 {
		c.UnansweredThreshold = 8 * time.Second
	}
	defDur(&c.LagThreshold, time.Minute)
	defDur(&c.LagInterval, 5*time.Second)
	defDur(&c.ReportInterval, time.Minute)
	if c.BackoffMax < c.BackoffMin {
		return c, fmt.Errorf("cdc: RunnerOptions.BackoffMax %v is below BackoffMin %v", c.BackoffMax, c.BackoffMin)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if extra := c.Permanent; extra != nil {
		c.Permanent = func(err error) bool { return IsPermanent(err) || extra(err) }
	} else {
		c.Permanent = IsPermanent
	}
	return c, nil
}

// Runner is a pipeline: it reads one Source and writes to one Sink.
//
// Batches. Run opens the source at the pipeline's stored checkpoint and gathers events into a
// batch until it holds BatchMaxEvents events, would exceed BatchMaxBytes (estimated from the
// values), BatchMaxWait passed since its first event, or no event came for BatchIdleWait -- or
// the stream ends. Events whose
// Malformed is set travel in the batch for checkpoint purposes but never reach the sink: they
// go straight to the dead-letter queue.
//
// Commit order. The sink gets the batch. On success the runner writes the batch's dead letters
// (malformed events and the rows the sink refused, in event order, with the row data: see
// DeadLetterRecord), then saves the last checkpoint the batch carries, then acks it to the
// stream. Only checkpoints count, and sources put them on transaction ends: a batch that ends
// inside a transaction leaves the stored checkpoint at the previous transaction end, and a
// batch without any leaves it unchanged. A crash at any point therefore resumes at or before
// the first event not yet acknowledged: nothing is lost, and what is delivered again is what
// came after the stored checkpoint -- the unfinished transaction and the last batch
// (TestRunnerCrash). External versioning makes such replays harmless.
//
// Batches in flight. With a ConcurrentSink, up to MaxInFlight batches are at the sink at
// once while the next one is gathered; each is committed as above, strictly in batch order,
// once it and every batch before it were answered (answered batches waiting for an earlier
// one hold no slot, up to MaxInFlight of them). A delete, a key-changing update or an
// update with Unchanged values waits for every earlier batch still at the sink that writes
// the same document, a Truncate for every earlier batch (see ConcurrentSink), and no batch
// is sent while another is pushed back. A failing batch ends the session: the batches after
// it are abandoned uncommitted and come again from the stored checkpoint.
//
// Backpressure. A *BackpressureError offers the identical batch (the same slice) again after
// a jittered exponential wait between BackoffMin and BackoffMax, or RetryAfter when that is
// longer, for as long as it takes; Health turns unhealthy at once when the sink says its
// destination is unavailable (BackpressureError.Unavailable), and once one batch has been
// pushed back for longer than BackpressureThreshold otherwise.
//
// Unanswered writes. A write the sink has not answered UnansweredThreshold after the runner
// called Sink.Write makes Health unhealthy (class sink_not_answering) until it is answered,
// without waiting for the sink's request timeout: a destination that went silent is reported
// within seconds. Status.UnansweredSince says since when the oldest write waits.
//
// Supervision. Any other failure -- the stream failing (a lost connection, a server restarting
// or shutting down), a sink error, a dead-letter write or checkpoint save that fails -- ends
// the stream's session: the runner closes the stream, waits a jittered exponential backoff
// (BackoffMin to BackoffMax, starting over once a batch succeeded after the reopening, or the
// reopened stream stayed open for twice BackoffMax, at least 5s) and
// opens the source again at the stored checkpoint, which is where the last successful batch
// left it: the events of the abandoned batch are delivered again. Health says "reconnecting"
// with the failure meanwhile. Each failure is logged once (Warn), the reconnection too. Only
// a permanent failure (IsPermanent, or RunnerOptions.Permanent: authentication refused, lost
// history, a fencing conflict, an invalid configuration, a start refusal) stops Run, with that
// error wrapped (errors.Is and errors.As reach it), logged once at Error. A failed ack is only
// logged: the checkpoint is already durable and acks are cumulative.
//
// Start checks. Right after the first successful Open of a Run, before reading any event, the
// runner hands the stream's tables (TableLister) to the sink (TableChecker) when both
// implement them; a refusal, like a source's refusal from Open (*StartError), stops Run before
// anything is written, the checkpoint unchanged, and is never retried. Reopenings skip the
// check: tables that appeared meanwhile are the sink's to handle on their first write.
//
// Lag. When the source is a LagReporter, the runner asks it every LagInterval how far the
// stored checkpoint trails the server -- while streaming, idle, reconnecting or pushed back --
// and derives Status.Lag: bytes behind, what the server retains, and seconds since the server
// was last at a position the pipeline has passed (which keeps growing while the source cannot
// be asked). Health turns unhealthy beyond LagThreshold, except while a snapshot is read.
//
// Reports. Dead letters (the sink's and malformed events) and truncates the sink applied are
// logged at Warn with table, op, position and reason, never row data: the first of each
// (table, reason class) at once, then at most one line per ReportInterval with the number
// since the last line, and the remainder when Run returns.
//
// Observation. Progress, Health and Status may be called from any goroutine at any time.
// Health is unhealthy before Run, after Run returned, while starting and reconnecting, beyond
// the backpressure, unanswered-write and lag thresholds, and while events have waited longer than
// StallThreshold with no batch succeeding (measured from the later of the last success and
// the arrival of the oldest pending event, so an idle pipeline is healthy).
//
// Errors and logs name the pipeline, tables and positions, never row values.
type Runner struct {
	pipeline string
	src      Source
	sink     Sink
	cps      CheckpointStore
	dlq      DeadLetterWriter
	o        RunnerOptions
	log      *slog.Logger
	wait     backoff.Policy

	running atomic.Bool
	reports reporter // used by Run's goroutine only

	mu           sync.Mutex // guards the fields below, read by Progress, Health and Status
	stream       Stream
	progress     Progress
	state        runState
	stopErr      error
	lastSuccess  time.Time        // when a batch last succeeded, or the run started
	pendingSince time.Time        // when the oldest event not yet acknowledged was read
	snapshot     SnapshotProgress // the last snapshot progress seen (kept after it ends)
	resnapshot   SnapshotProgress // the last re-snapshot progress seen (kept after it ends)
	applied      Checkpoint       // the stored checkpoint, as far as this runner knows
	reconnects   int64
	lastFailure  error
	failedAt     time.Time
	// inflight are the batches handed to the sink and not yet committed, in batch order
	// (runner_flight.go): appended and removed by the loop's goroutine under mu.
	inflight []*flight
	failures int // reopening attempts since the last batch that succeeded
	// streamingSince is when the current session's stream opened (zero: none open).
	streamingSince time.Time
	lag            lagState
}

type runState uint8

const (
	notStarted runState = iota
	starting
	running
	reconnecting
	stopped
)

func (s runState) String() string {
	switch s {
	case starting:
		return "starting"
	case running:
		return "streaming"
	case reconnecting:
		return "reconnecting"
	case stopped:
		return "stopped"
	}
	return "not running"
}

// NewRunner returns the runner of a pipeline; it starts when Run is called. pipeline names the
// pipeline (one source feeding one sink): the key of its checkpoint and the name in its dead
// letters, status and logs. opts may be nil (every default).
func NewRunner(pipeline string, src Source, sink Sink, checkpoints CheckpointStore, dlq DeadLetterWriter, opts *RunnerOptions) (*Runner, error) {
	if pipeline == "" {
		return nil, errors.New("cdc: NewRunner needs a pipeline name")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if src == nil || sink == nil || checkpoints == nil || dlq == nil {
		return nil, errors.New("cdc: NewRunner needs a source, a sink, a checkpoint store and a dead-letter writer")
	}
	return &Runner{pipeline: pipeline, src: src, sink: sink, cps: checkpoints, dlq: dlq, o: o,
		log: o.Logger.With("pipeline", pipeline), reports: newReporter(o.ReportInterval),
		wait: backoff.Policy{Min: o.BackoffMin, Max: o.BackoffMax}}, nil
}

// Progress is what a runner has done so far (totals over every Run of the Runner).
type Progress struct {
	Events      int64 // events in batches that succeeded (applied, superseded or dead-lettered)
	Batches     int64 // batches that succeeded
	DeadLetters int64 // events written to the dead-letter queue
	Retries     int64 // batches offered again after backpressure
	Pending     int   // events read and not yet acknowledged, those the stream holds ready included
	// LastBatch and LastCheckpoint are when a batch last succeeded and when a checkpoint was
	// last saved (zero: never).
	LastBatch, LastCheckpoint time.Time
	// Snapshot is the source's snapshot progress: while a snapshot is read, then its last
	// figures (Active false) for as long as the Runner lives.
	Snapshot SnapshotProgress
	// Resnapshot is the progress of a re-snapshot read while streaming (Resnapshotter),
	// likewise kept after it ended.
	Resnapshot SnapshotProgress
}

// Progress returns the runner's progress; safe to call at any time from any goroutine.
func (r *Runner) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progressLocked()
}

func (r *Runner) progressLocked() Progress {
	p := r.progress
	if r.stream != nil {
		r.noteProgressLocked(true)
		p.Pending += len(r.stream.Events())
	}
	p.Snapshot, p.Resnapshot = r.snapshot, r.resnapshot
	return p
}

// noteProgressLocked keeps the stream's snapshot or re-snapshot progress; ended says that a
// stream reporting neither has no snapshot running.
func (r *Runner) noteProgressLocked(ended bool) {
	switch sp := r.stream.Progress(); {
	case sp.Resnapshot != "":
		r.resnapshot = sp
		r.snapshot.Active = false
	case sp.Active || sp.TablesTotal > 0 || sp.RowsDone > 0:
		r.snapshot = sp
	case ended:
		r.snapshot.Active = false
	}
}

// Health is the runner's health signal.
type Health struct {
	Healthy bool
	// Class names the state in one of a fixed set of words, for metric labels and alerts:
	// HealthOK, or the class of Reason.
	Class string
	// Reason says why the runner is unhealthy: not running, starting, reconnecting after a
	// failure, stopped by an error, told by the sink that its destination is unavailable,
	// waiting for the sink's answer to a write beyond UnansweredThreshold, pushed back by the
	// sink beyond BackpressureThreshold, behind its source beyond LagThreshold, or stalled
	// (events pending and no batch succeeded for longer than StallThreshold).
	Reason string
}

// Health classes (Health.Class).
const (
	HealthOK           = "ok"
	HealthNotRunning   = "not_running"
	HealthStarting     = "starting"
	HealthReconnecting = "reconnecting"
	HealthStopped      = "stopped"
	HealthBackpressure = "backpressure"
	HealthUnavailable  = "sink_unavailable"
	HealthNotAnswering = "sink_not_answering"
	HealthStalled      = "stalled"
	HealthLagging      = "lagging"
)

// Health reports whether the pipeline is running and making progress; safe to call at any
// time from any goroutine.
func (r *Runner) Health() Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.healthLocked(r.o.Clock.Now())
}

func (r *Runner) healthLocked(now time.Time) Health {
	switch r.state {
	case notStarted:
		return Health{Class: HealthNotRunning, Reason: "not running"}
	case starting:
		return Health{Class: HealthStarting, Reason: "starting: opening the source"}
	case reconnecting:
		return Health{Class: HealthReconnecting, Reason: fmt.Sprintf("reconnecting (attempt %d, failing since %s): %v",
			r.failures, r.failedAt.UTC().Format(time.RFC3339), r.lastFailure)}
	case stopped:
		if r.stopErr != nil {
			return Health{Class: HealthStopped, Reason: "stopped: " + r.stopErr.Error()}
		}
		return Health{Class: HealthStopped, Reason: "stopped"}
	}
	pushedSince, pushedErr := r.pushedLocked()
	if bp := (*BackpressureError)(nil); !pushedSince.IsZero() && errors.As(pushedErr, &bp) && bp.Unavailable {
		return Health{Class: HealthUnavailable, Reason: fmt.Sprintf("sink unavailable for %v: %v", now.Sub(pushedSince).Round(time.Second), pushedErr)}
	}
	if since := r.unansweredLocked(); !since.IsZero() && r.o.UnansweredThreshold > 0 {
		if d := now.Sub(since); d > r.o.UnansweredThreshold {
			return Health{Class: HealthNotAnswering, Reason: fmt.Sprintf("sink not answering: a write has waited %v for its answer, beyond the %v threshold",
				d.Round(time.Second), r.o.UnansweredThreshold)}
		}
	}
	if d := now.Sub(pushedSince); !pushedSince.IsZero() && d > r.o.BackpressureThreshold {
		return Health{Class: HealthBackpressure, Reason: fmt.Sprintf("backpressure: the sink has pushed the batch back for %v: %v", d.Round(time.Second), pushedErr)}
	}
	if r.progress.Pending > 0 {
		since := r.lastSuccess
		if r.pendingSince.After(since) {
			since = r.pendingSince
		}
		if waited := now.Sub(since); waited > r.o.StallThreshold {
			return Health{Class: HealthStalled, Reason: fmt.Sprintf("stalled: no batch succeeded for %v with %d events pending", waited.Round(time.Millisecond), r.progress.Pending)}
		}
	}
	if !r.snapshot.Active {
		if l := r.lagLocked(now); l.Seconds > r.o.LagThreshold.Seconds() {
			return Health{Class: HealthLagging, Reason: fmt.Sprintf("lagging: %.0fs behind the source (%d bytes), beyond the %v threshold", l.Seconds, l.Bytes, r.o.LagThreshold)}
		}
	}
	return Health{Healthy: true, Class: HealthOK}
}

// Status returns the runner's status; safe to call at any time from any goroutine.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Clock.Now()
	st := Status{Pipeline: r.pipeline, Health: r.healthLocked(now), State: r.state.String(),
		Progress: r.progressLocked(), Lag: r.lagLocked(now), Reconnects: r.reconnects,
		LastFailure: r.lastFailure, FailedAt: r.failedAt}
	st.BackpressureSince, _ = r.pushedLocked()
	st.UnansweredSince = r.unansweredLocked()
	if r.state == running && st.Progress.Snapshot.Active {
		st.State = "snapshotting"
	} else if r.state == running && st.Progress.Resnapshot.Active {
		st.State = "resnapshotting"
	}
	return st
}

func (r *Runner) setState(s runState) {
	r.mu.Lock()
	r.state = s
	r.mu.Unlock()
}

// Run runs the pipeline until ctx ends (it returns ctx.Err()), the stream ends without a
// failure (nil), or a permanent failure (that error, wrapped with the pipeline's name). Every
// other failure of the source or the sink reopens the stream at the stored checkpoint after a
// bounded jittered backoff (see Runner). Run may be called again after it returned, not
// concurrently.
func (r *Runner) Run(ctx context.Context) (err error) {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("cdc: Runner.Run called while running")
	}
	defer r.running.Store(false)
	r.mu.Lock()
	r.state, r.stopErr, r.lastSuccess = starting, nil, r.o.Clock.Now()
	r.lastFailure, r.failedAt, r.failures = nil, time.Time{}, 0
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.state, r.stopErr, r.stream, r.progress.Pending = stopped, err, nil, 0
		r.mu.Unlock()
	}()
	defer func() { r.reports.flush(r.log, r.o.Clock.Now(), true) }()
	stopLag := r.watchLag(ctx)
	defer stopLag()

	var lastLogged string
	var loggedAt time.Time
	checked := false // the start checks passed in this Run
	for attempt := 0; ; {
		err := r.session(ctx, attempt > 0, &checked)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			r.log.Info("source stream ended")
			return nil
		}
		wrapped := fmt.Errorf("cdc: pipeline %q: %w", r.pipeline, err)
		if r.o.Permanent(err) {
			r.log.Error("pipeline stopped: the failure is permanent", "err", err)
			r.mu.Lock()
			// Status keeps what stopped the pipeline (LastFailure: a refusal, the credentials
			// or a privilege the cluster refused), beside the stopped health.
			r.lastFailure, r.failedAt = err, r.o.Clock.Now()
			r.mu.Unlock()
			return wrapped
		}
		r.mu.Lock()
		// The backoff starts over, and a new outage begins, when a batch succeeded since the
		// last failure or the stream stayed open long enough to call the server back.
		if r.lastFailure == nil || (!r.streamingSince.IsZero() && r.o.Clock.Now().Sub(r.streamingSince) >= stableAfter(r.o.BackoffMax)) {
			attempt = 0
			r.failedAt = r.o.Clock.Now()
		}
		r.streamingSince = time.Time{}
		r.lastFailure = err
		r.failures = attempt + 1
		r.state = reconnecting
		r.reconnects++
		failedAt := r.failedAt
		r.mu.Unlock()
		wait := r.wait.Delay(attempt, r.o.Rand, 0)
		// Each distinct failure is logged once; the same one again at most once per
		// ReportInterval, so a long outage leaves a line a minute, not one per attempt.
		now := r.o.Clock.Now()
		if msg := err.Error(); attempt == 0 || msg != lastLogged || now.Sub(loggedAt) >= r.o.ReportInterval {
			r.log.Warn("pipeline failed; reopening the source at the stored checkpoint", "err", err,
				"attempt", attempt+1, "wait", wait, "failing_for", now.Sub(failedAt).Round(time.Millisecond))
			lastLogged, loggedAt = msg, now
		}
		attempt++
		select {
		case <-r.o.Clock.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stableAfter is how long a reopened stream must stay open for its next failure to count as
// a new outage (the backoff starting over) when no batch succeeded meanwhile: an idle
// pipeline has no batch to prove the server back.
func stableAfter(backoffMax time.Duration) time.Duration { return max(2*backoffMax, 5*time.Second) }

// session is one open stream: it loads the checkpoint, opens the source, runs the start
// checks (the first time in a Run) and the loop. It returns nil when the stream ended without a failure, and the
// failure otherwise (described, not yet wrapped with the pipeline's name).
func (r *Runner) session(ctx context.Context, reopening bool, checked *bool) error {
	cp, err := r.cps.LoadCheckpoint(ctx, r.pipeline)
	if err != nil {
		return fmt.Errorf("loading the checkpoint: %w", err)
	}
	r.mu.Lock()
	r.applied = cp
	r.mu.Unlock()
	st, err := r.src.Open(ctx, cp)
	if err != nil {
		return fmt.Errorf("opening the source: %w", err)
	}
	defer func() {
		r.mu.Lock()
		r.stream, r.progress.Pending = nil, 0
		r.mu.Unlock()
		_ = st.Close()
	}()
	r.mu.Lock()
	r.stream = st
	r.mu.Unlock()
	// The start checks run once per Run: a table that appeared while the pipeline ran is the
	// sink's to handle on its first write (dead letters, never a stop), also after a reopening.
	if !*checked {
		if err := r.preflight(ctx, st); err != nil {
			return fmt.Errorf("checking the captured tables: %w", err)
		}
		*checked = true
	}
	r.mu.Lock()
	r.state = running
	r.streamingSince = r.o.Clock.Now()
	failures, since := r.failures, r.failedAt
	r.mu.Unlock()
	if reopening {
		r.log.Info("pipeline reconnected", "attempts", failures, "outage", r.o.Clock.Now().Sub(since).Round(time.Millisecond))
	} else {
		r.log.Info("pipeline started", "resumed", cp != nil)
	}
	return r.loop(ctx, st)
}

func (r *Runner) loop(ctx context.Context, st Stream) error {
	p := r.newPipe(ctx, st)
	defer p.stop()
	// deadline closes the batch BatchMaxWait after its first event; idle, once no event came for
	// BatchIdleWait (a timer per quiet spell, not per event: it fires, sees when the last event
	// came, and waits out the rest).
	var deadline, idle <-chan time.Time
	var lastAt time.Time
	events := st.Events()
	flush := func() error {
		deadline, idle = nil, nil
		return p.dispatch()
	}
	for {
		var landed <-chan struct{}
		if len(r.inflight) > 0 {
			landed = r.inflight[0].done
		}
		select {
		case ev, ok := <-events:
			if !ok {
				if err := flush(); err != nil {
					return err
				}
				if err := p.drain(); err != nil {
					return err
				}
				if err := st.Err(); err != nil {
					return fmt.Errorf("reading the source: %w", err)
				}
				return nil
			}
			size := eventBytes(&ev)
			if len(p.b.entries) > 0 && p.b.bytes+size > r.o.BatchMaxBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			lastAt = r.o.Clock.Now()
			if len(p.b.entries) == 0 {
				deadline = r.o.Clock.After(r.o.BatchMaxWait)
				p.b.since = lastAt
			}
			if idle == nil && r.o.BatchIdleWait > 0 {
				idle = r.o.Clock.After(r.o.BatchIdleWait)
			}
			p.b.add(ev, size)
			r.mu.Lock()
			if r.progress.Pending == 0 {
				r.pendingSince = p.b.since
			}
			r.progress.Pending++
			r.mu.Unlock()
			if len(p.b.entries) >= r.o.BatchMaxEvents || p.b.bytes >= r.o.BatchMaxBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		case <-deadline:
			if err := flush(); err != nil {
				return err
			}
		case now := <-idle:
			if quiet := now.Sub(lastAt); quiet < r.o.BatchIdleWait {
				idle = r.o.Clock.After(r.o.BatchIdleWait - quiet)
				break
			}
			if err := flush(); err != nil {
				return err
			}
		case <-landed:
			if err := p.commitHead(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// batch is what the runner read since the last flush.
type batch struct {
	entries    []Event    // every event read, in order, malformed ones included
	toSink     []Event    // the well-formed ones: what the sink gets
	sinkEntry  []int      // toSink[i] is entries[sinkEntry[i]]
	checkpoint Checkpoint // the last checkpoint among entries; nil when none ended a transaction
	bytes      int
	// newestCommit is the latest CommitTime among entries (zero: none had one).
	newestCommit time.Time
	since        time.Time // when its first event was read
}

func (b *batch) add(ev Event, size int) {
	if ev.Malformed == nil {
		b.sinkEntry = append(b.sinkEntry, len(b.entries))
		b.toSink = append(b.toSink, ev)
	}
	b.entries = append(b.entries, ev)
	if ev.CommitTime.After(b.newestCommit) {
		b.newestCommit = ev.CommitTime
	}
	if ev.Checkpoint != nil {
		b.checkpoint = ev.Checkpoint
	}
	b.bytes += size
}

// commit finishes a flight the sink accepted, in batch order: it writes the batch's dead
// letters, then saves and acks its checkpoint -- in that order, so that a crash anywhere
// leaves the stored checkpoint at or before what the sink and the dead-letter queue hold.
func (r *Runner) commit(ctx context.Context, st Stream, f *flight) error {
	b := &f.b
	letters, err := r.deadLetters(b, f.dead)
	if err != nil {
		return fmt.Errorf("checking the sink's dead letters: %w", err)
	}
	if len(letters) > 0 {
		if err := r.dlq.WriteDeadLetters(ctx, letters); err != nil {
			return fmt.Errorf("writing dead letters: %w", err)
		}
	}
	now := r.o.Clock.Now()
	saved := false
	if b.checkpoint != nil {
		if err := r.cps.SaveCheckpoint(ctx, r.pipeline, b.checkpoint); err != nil {
			return fmt.Errorf("saving the checkpoint: %w", err)
		}
		saved = true
		// The ack only lets the server discard history; the checkpoint is already durable, and
		// acks are cumulative, so a failed one costs retained history until the next succeeds.
		if err := st.Ack(ctx, b.checkpoint); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log.Warn("acknowledging the checkpoint to the source failed", "err", err)
		}
	}
	r.mu.Lock()
	r.progress.Events += int64(len(b.entries))
	r.progress.Batches++
	r.progress.DeadLetters += int64(len(letters))
	r.progress.LastBatch = now
	if saved {
		r.progress.LastCheckpoint = now
	}
	r.lastSuccess = now
	r.lastFailure, r.failures = nil, 0
	if r.stream != nil {
		r.noteProgressLocked(false)
	}
	if saved {
		r.applied = b.checkpoint
		r.appliedCommitLocked(b.newestCommit)
	}
	r.mu.Unlock()
	r.report(b, letters, f.dead, now)
	r.log.Debug("batch done", "events", len(b.entries), "dead_letters", len(letters), "checkpoint", saved)
	stats := BatchStats{Events: len(b.entries), DeadLetters: len(letters), Attempts: f.attempts, Duration: now.Sub(f.start), Checkpointed: saved}
	if !b.newestCommit.IsZero() {
		stats.Lag = max(now.Sub(b.newestCommit), 0)
	}
	r.o.Observer.BatchDone(stats)
	return nil
}

// write offers a flight's events to the sink until it succeeds, fails fatally or ctx ends;
// backpressure replays the identical slice after a jittered, bounded wait.
// It returns the sink's dead letters and how many offers it took.
func (r *Runner) write(ctx context.Context, f *flight) ([]DeadLetter, int, error) {
	events := f.b.toSink
	defer func() {
		r.mu.Lock()
		f.pushedSince, f.pushedErr = time.Time{}, nil
		r.mu.Unlock()
	}()
	var lastLogged string
	var loggedAt time.Time
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		f.calledAt = r.o.Clock.Now()
		r.mu.Unlock()
		dead, err := r.sink.Write(ctx, events)
		r.mu.Lock()
		f.calledAt = time.Time{}
		r.mu.Unlock()
		if err == nil {
			return dead, attempt + 1, nil
		}
		var bp *BackpressureError
		if !errors.As(err, &bp) {
			return nil, attempt + 1, fmt.Errorf("writing to the sink: %w", err)
		}
		wait := r.wait.Delay(attempt, f.rand, bp.RetryAfter)
		r.mu.Lock()
		r.progress.Retries++
		if f.pushedSince.IsZero() {
			f.pushedSince = r.o.Clock.Now()
		}
		f.pushedErr = err
		r.mu.Unlock()
		// Logged once per distinct failure, the same one again at most once per ReportInterval.
		if now, msg := r.o.Clock.Now(), err.Error(); attempt == 0 || msg != lastLogged || now.Sub(loggedAt) >= r.o.ReportInterval {
			r.log.Warn("sink backpressure, offering the batch again", "events", len(events), "attempt", attempt+1, "wait", wait, "err", err)
			lastLogged, loggedAt = msg, now
		}
		r.o.Observer.Backpressure(attempt+1, wait)
		select {
		case <-r.o.Clock.After(wait):
		case <-ctx.Done():
			return nil, attempt + 1, ctx.Err()
		}
	}
}

// deadLetters builds the batch's dead-letter records in event order: malformed events and the
// events the sink refused.
func (r *Runner) deadLetters(b *batch, dead []DeadLetter) ([]DeadLetterRecord, error) {
	n := 0
	for _, ev := range b.entries {
		if ev.Malformed != nil {
			n++
		}
	}
	if n == 0 && len(dead) == 0 {
		return nil, nil
	}
	reasons := make(map[int]string, len(dead))
	for _, d := range dead {
		if d.Index < 0 || d.Index >= len(b.toSink) {
			return nil, Permanent(fmt.Errorf("dead letter index %d outside the batch of %d events (a sink bug)", d.Index, len(b.toSink)))
		}
		reasons[b.sinkEntry[d.Index]] = d.Reason
	}
	now := r.o.Clock.Now()
	out := make([]DeadLetterRecord, 0, n+len(reasons))
	for i, ev := range b.entries {
		reason, refused := reasons[i]
		switch {
		case ev.Malformed != nil:
			reason = "malformed: " + ev.Malformed.Error()
		case !refused:
			continue
		}
		out = append(out, DeadLetterRecord{Pipeline: r.pipeline, Reason: reason, Time: now, Event: ev})
	}
	return out, nil
}
