package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/sqlstate"
)

// Active/standby (doc.go, High availability). With a shared state store every pipeline runs
// in the one process holding the pipeline's lease in that store; the others are standby. A
// term -- one holding of the lease -- builds the pipeline's sink, source and runner on the
// store's view fenced by the lease's epoch, fences every index of the pipeline at the cluster
// (the old active's write aliases rotated away), frees the source (PostgreSQL: the old
// walsender terminated), and only then runs the runner, which resumes from the shared
// checkpoint. The term ends when the lease is lost (taken over, or not renewed in time), when
// a write through the fenced view is refused (ErrNotLeader), or when the runner stops.

// Lease timing derived from StateStoreConfig.LeaseTTL.
const (
	// leaseDrift is the clock-rate difference between this process and the store's server
	// that a holder allows for (statestore/sqlstate, Clock assumptions): it counts its lease
	// as lasting ttl*(1-leaseDrift) from before the call that acquired or renewed it.
	leaseDrift = 0.001
	// maxPoll bounds a standby's wait between two attempts to take the lease.
	maxPoll = time.Second
	// storeCallTimeout bounds one call to the store that is not a renewal.
	storeCallTimeout = 5 * time.Second
)

// errLeaseLost is the cause with which a term is cancelled when its lease is gone.
var errLeaseLost = errors.New("mirror: the pipeline's lease was lost")

// ErrStandby is the error of what only the active process of a pipeline can do (Resnapshot,
// Reindex) called in a process that does not hold the pipeline's lease.
var ErrStandby = errors.New("mirror: this process is not the pipeline's active one")

// leaderState is the mirror's shared store: opened by connect (in Run), then shared by every
// pipeline's lease loop.
type leaderState struct {
	cfg    StateStoreConfig
	holder string
	ttl    time.Duration
	renew  time.Duration
	poll   time.Duration
	conns  int

	// openStore opens the store (open; tests substitute another Leaser).
	openStore func(ctx context.Context) (statestore.Leaser, error)

	mu    sync.Mutex
	store statestore.Leaser
	ready chan struct{} // closed once store (or fatal) is set
	fatal error         // why it can never be opened (a configuration the store refuses)
}

func newLeaderState(c *StateStoreConfig, pipelines int) *leaderState {
	l := &leaderState{cfg: *c, ttl: c.LeaseTTL, holder: c.Holder, ready: make(chan struct{}), conns: 2 + 2*pipelines}
	l.openStore = func(ctx context.Context) (statestore.Leaser, error) { return l.open(ctx) }
	if l.ttl <= 0 {
		l.ttl = DefaultLeaseTTL
	}
	l.renew = l.ttl / 3
	l.poll = min(maxPoll, l.ttl/6)
	if l.holder == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown-host"
		}
		l.holder = host + ":" + strconv.Itoa(os.Getpid())
	}
	return l
}

// connect opens the store, trying again with a backoff until it succeeds or ctx ends;
// failed is told of every failure (nil once it opened), so that Status says why no pipeline
// can run.
func (l *leaderState) connect(ctx context.Context, log *slog.Logger, failed func(error)) {
	select {
	case <-l.ready:
		return // a later Run: already open
	default:
	}
	wait := 200 * time.Millisecond
	var lastLogged string
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*storeCallTimeout)
		st, err := l.openStore(cctx)
		cancel()
		if err == nil {
			l.mu.Lock()
			l.store = st
			l.mu.Unlock()
			close(l.ready)
			failed(nil)
			log.Info("state store opened", "type", l.cfg.Type, "schema", l.schema(), "identity", st.Identity(), "holder", l.holder)
			return
		}
		if ctx.Err() != nil {
			return
		}
		failed(err)
		if errors.Is(err, statestore.ErrInvalid) {
			// The connection string (or the schema) cannot work: no retry will open it.
			log.Error("the state store's configuration is refused: every pipeline stops", "type", l.cfg.Type, "err", err)
			l.mu.Lock()
			l.fatal = cdc.Permanent(fmt.Errorf("mirror: state store: %w", err))
			l.mu.Unlock()
			close(l.ready)
			return
		}
		if msg := err.Error(); msg != lastLogged {
			log.Warn("opening the state store failed; trying again", "type", l.cfg.Type, "err", err, "wait", wait)
			lastLogged = msg
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (l *leaderState) schema() string {
	if l.cfg.Schema == "" {
		return "tributary"
	}
	return l.cfg.Schema
}

func (l *leaderState) open(ctx context.Context) (*sqlstate.Store, error) {
	o := &sqlstate.Options{Schema: l.cfg.Schema, MaxConns: l.conns}
	if l.cfg.Type == "mysql" {
		return sqlstate.OpenMySQL(ctx, string(l.cfg.DSN), o)
	}
	return sqlstate.OpenPostgres(ctx, string(l.cfg.DSN), o)
}

// opened waits for the store: nil when ctx ended first, or with the error why it can never
// be opened.
func (l *leaderState) opened(ctx context.Context) (statestore.Leaser, error) {
	select {
	case <-l.ready:
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.store, l.fatal
	case <-ctx.Done():
		return nil, nil
	}
}

func (l *leaderState) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		return nil
	}
	return l.store.Close()
}

// roleState is a pipeline's leadership as Status shows it.
type roleState struct {
	mu sync.Mutex
	cdc.Leadership
}

func newRoleState() *roleState {
	return &roleState{Leadership: cdc.Leadership{Role: cdc.RoleStandby, Since: time.Now()}}
}

func (r *roleState) set(f func(*cdc.Leadership)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.Role
	f(&r.Leadership)
	if r.Role != before {
		r.Since = time.Now()
	}
}

func (r *roleState) get() cdc.Leadership {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Leadership
}

// status overlays the leadership on st: a standby or a process taking over says so in its
// State and Health; nil r (a state file) leaves st as it is.
func (r *roleState) status(st cdc.Status) cdc.Status {
	if r == nil {
		return st
	}
	ld := r.get()
	st.Leadership = ld
	switch ld.Role {
	case cdc.RoleStandby:
		st.State = "standby"
		reason := "standby: no process holds the lease"
		if ld.Holder != "" {
			reason = fmt.Sprintf("standby: %s is active (lease epoch %d)", ld.Holder, ld.Epoch)
		}
		if ld.StoreErr != nil {
			// A standby that cannot reach the store cannot take over: healthy it is not.
			st.Health = cdc.Health{Class: cdc.HealthStandby, Reason: reason + "; the state store is unreachable: " + ld.StoreErr.Error()}
			return st
		}
		st.Health = cdc.Health{Healthy: true, Class: cdc.HealthStandby, Reason: reason}
	case "":
		if ld.StoreErr != nil && st.State == "not running" {
			st.State = "stopped"
			st.Health = cdc.Health{Class: cdc.HealthStopped, Reason: "stopped: the state store: " + ld.StoreErr.Error()}
		}
	case cdc.RoleTakingOver:
		if st.State == "not running" {
			st.State = "taking over"
			st.Health = cdc.Health{Class: cdc.HealthStarting, Reason: fmt.Sprintf("taking over (lease epoch %d): fencing the indices and freeing the source", ld.Epoch)}
		}
	}
	return st
}

// active is s's running term, or ErrStandby when this process does not hold its lease.
func (m *Mirror) active(s *seat) (*pipeline, error) {
	p := s.cur.Load()
	if p == nil || (s.role != nil && s.role.get().Role != cdc.RoleActive) {
		holder := ""
		if s.role != nil {
			holder = s.role.get().Holder
		}
		if holder != "" {
			return nil, fmt.Errorf("%w (pipeline %q; %s holds its lease)", ErrStandby, s.name, holder)
		}
		return nil, fmt.Errorf("%w (pipeline %q)", ErrStandby, s.name)
	}
	return p, nil
}

// run is seat s's life under a shared store: standby until it takes the lease, a term while
// it holds it, standby again when it lost it. It returns when ctx ends (nil) or when the
// pipeline stopped for good in a term (its runner's permanent error; the lease is released
// so that the other process may try).
func (l *leaderState) run(ctx context.Context, m *Mirror, s *seat) error {
	st, err := l.opened(ctx)
	if err != nil {
		s.role.set(func(ld *cdc.Leadership) { ld.Role = "" })
		return err
	}
	if st == nil {
		return nil
	}
	for ctx.Err() == nil {
		lease, sent, ok := l.acquire(ctx, m, s, st)
		if !ok {
			return nil
		}
		err := l.term(ctx, m, s, st, lease, sent)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, errLeaseLost) && !errors.Is(err, statestore.ErrNotLeader) {
			return err
		}
	}
	return nil
}

// acquire polls the lease until this process takes it (ok) or ctx ends. sent is when the
// successful Acquire was sent: the lease lasts at least ttl from then on the server.
func (l *leaderState) acquire(ctx context.Context, m *Mirror, s *seat, st statestore.Leaser) (lease statestore.Lease, sent time.Time, ok bool) {
	s.role.set(func(ld *cdc.Leadership) { ld.Role = cdc.RoleStandby })
	lastHolder := "\x00"
	var lastErr string
	for {
		cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		sent = time.Now()
		lease, err := st.Acquire(cctx, s.name, l.holder, l.ttl)
		cancel()
		if ctx.Err() != nil {
			return lease, sent, false
		}
		switch {
		case err == nil:
			return lease, sent, true
		case errors.Is(err, statestore.ErrLeaseHeld):
			s.role.set(func(ld *cdc.Leadership) { ld.Holder, ld.Epoch, ld.StoreErr = lease.Holder, lease.Epoch, nil })
			if lease.Holder != lastHolder {
				m.log.Info("standby: another process is active", "pipeline", s.name, "active", lease.Holder, "epoch", lease.Epoch)
				lastHolder = lease.Holder
			}
			lastErr = ""
		default:
			s.role.set(func(ld *cdc.Leadership) { ld.StoreErr = err })
			if msg := err.Error(); msg != lastErr {
				m.log.Warn("standby: the state store did not answer; trying again", "pipeline", s.name, "err", err)
				lastErr = msg
			}
		}
		select {
		case <-ctx.Done():
			return lease, sent, false
		case <-time.After(l.poll):
		}
	}
}

// term runs one holding of the lease: see the comment at the top of the file. Its error says
// why it ended: errLeaseLost or ErrNotLeader (back to standby), ctx's (shutting down: the
// lease is released so the standby takes over at once), or the runner's permanent error.
func (l *leaderState) term(ctx context.Context, m *Mirror, s *seat, st statestore.Leaser, lease statestore.Lease, sent time.Time) (err error) {
	acquired := time.Now()
	m.log.Warn("taking over: this process holds the pipeline's lease", "pipeline", s.name, "epoch", lease.Epoch, "holder", l.holder)
	s.role.set(func(ld *cdc.Leadership) {
		ld.Role, ld.Holder, ld.Epoch, ld.StoreErr = cdc.RoleTakingOver, l.holder, lease.Epoch, nil
		ld.Takeovers++
	})
	tctx, cancel := context.WithCancelCause(ctx)
	lose := func(why error) { cancel(why) }
	var wg sync.WaitGroup
	wg.Go(func() { l.keep(tctx, m, s, st, lease, sent, lose) })

	fenced := &guardedStore{Store: st.Fenced(s.name, lease.Epoch), lose: lose}
	p, err := m.open(s, fenced)
	if err != nil {
		err = cdc.Permanent(err)
		m.log.Error("pipeline stopped: building it failed", "pipeline", s.name, "err", err)
	}
	s.cur.Store(p)
	if err == nil {
		if err = m.takeOver(tctx, s, p); err == nil {
			wg.Go(func() { m.watchActive(tctx, s, p, acquired) })
			err = m.runTerm(tctx, p)
		}
	}
	// The term is over: nothing of it runs any more once the lease is released.
	if cause := context.Cause(tctx); errors.Is(cause, errLeaseLost) && ctx.Err() == nil {
		err = cause
	}
	// A permanent failure may be the takeover seen here before the lease's loss: MariaDB ends
	// this process's binlog dump (error 4052) as soon as the new active's registers the same
	// server_id, and the cluster refuses a write through a rotated alias. When the lease moved
	// on -- or the store cannot confirm that it did not (cut off from it, this process may
	// already have lost it) --, the term lost it: standby again, not stopped for good; a
	// failure that is this pipeline's own comes back in a later term with the store reachable.
	if err != nil && ctx.Err() == nil && !errors.Is(err, errLeaseLost) && !errors.Is(err, statestore.ErrNotLeader) &&
		!leaseStillOurs(ctx, st, s.name, lease) {
		err = fmt.Errorf("%w: %w", errLeaseLost, err)
	}
	cancel(errTermOver)
	wg.Wait()
	if cerr := closeTerm(p); cerr != nil {
		m.log.Warn("closing the pipeline's term", "pipeline", s.name, "err", cerr)
	}
	stopped := err != nil && ctx.Err() == nil && !errors.Is(err, errLeaseLost) && !errors.Is(err, statestore.ErrNotLeader)
	if !stopped {
		// Standby again (or shutting down): no term to show. A pipeline stopped for good keeps
		// its last term, whose runner's Status says why.
		s.cur.Store(nil)
	}
	m.endTerm(ctx, s, st, lease, err, stopped)
	return err
}

// errTermOver cancels what is left of a term once it ended.
var errTermOver = errors.New("mirror: the term is over")

// leaseStillOurs reports whether the store confirms that no other process acquired the lease
// since this term did (its epoch is still the term's); false when the store cannot tell.
func leaseStillOurs(ctx context.Context, st statestore.Leaser, name string, lease statestore.Lease) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	cur, err := st.ReadLease(rctx, name)
	return err == nil && cur.Epoch == lease.Epoch
}

// endTerm releases the lease when this process stops writing for a reason of its own (so the
// standby need not wait for its expiry), and reports the step down.
func (m *Mirror) endTerm(ctx context.Context, s *seat, st statestore.Leaser, lease statestore.Lease, err error, stopped bool) {
	lost := errors.Is(err, errLeaseLost) || errors.Is(err, statestore.ErrNotLeader)
	if !lost {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		rerr := st.Release(rctx, lease)
		cancel()
		switch {
		case rerr == nil:
			m.log.Info("lease released", "pipeline", s.name, "epoch", lease.Epoch)
		case errors.Is(rerr, statestore.ErrNotLeader):
		default:
			m.log.Warn("releasing the lease failed: the standby takes over once it expires", "pipeline", s.name, "err", rerr)
		}
	} else {
		m.log.Warn("stepped down: another process took the pipeline over or the lease could not be renewed in time; standby now",
			"pipeline", s.name, "epoch", lease.Epoch, "err", err)
	}
	s.role.set(func(ld *cdc.Leadership) {
		ld.Role = cdc.RoleStandby
		if stopped {
			ld.Role = "" // stopped here: not a candidate any more
		}
		if ld.Holder == m.lead.holder {
			ld.Holder = ""
		}
	})
}

// takeOver fences every index of the pipeline at the cluster and frees the source, trying
// again (as the cluster check does) until it succeeds, is refused for good, or tctx ends.
func (m *Mirror) takeOver(ctx context.Context, s *seat, p *pipeline) error {
	if ps, ok := p.src.(*pgcdc.Source); ok {
		cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		pid, err := ps.TakeSlot(cctx)
		cancel()
		switch {
		case err != nil:
			m.log.Warn("taking over: ending the old active's replication stream failed; the slot is free once its walsender exits (wal_sender_timeout)",
				"pipeline", s.name, "err", err)
		case pid != 0:
			m.log.Info("taking over: ended the old active's replication stream", "pipeline", s.name, "walsender_pid", pid)
		}
	}
	wait := 200 * time.Millisecond
	for {
		n, err := fenceOut(ctx, p)
		if err == nil {
			m.log.Info("taking over: every index of the pipeline fenced against the old active", "pipeline", s.name, "indices", n)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if cdc.IsPermanent(err) || errors.Is(err, statestore.ErrNotLeader) {
			m.log.Error("taking over: fencing the indices was refused", "pipeline", s.name, "err", err)
			return err
		}
		m.log.Warn("taking over: fencing the indices failed; trying again", "pipeline", s.name, "err", err, "wait", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// watchActive makes the role active once the runner reads the source (it loaded the shared
// checkpoint and opened the stream), and records how long the takeover took.
func (m *Mirror) watchActive(ctx context.Context, s *seat, p *pipeline, acquired time.Time) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		switch p.runner.Status().State {
		case "streaming", "snapshotting", "resnapshotting":
			took := time.Since(acquired)
			s.role.set(func(ld *cdc.Leadership) { ld.Role, ld.LastTakeover = cdc.RoleActive, took })
			m.log.Warn("active: the pipeline runs in this process", "pipeline", s.name, "takeover", took.Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// keep renews the lease every ttl/3 while ctx lasts. It calls lose (ending the term) when the
// lease was taken over, or when it could not be renewed before this process's own measure of
// it ran out: from then on another process may hold it.
func (l *leaderState) keep(ctx context.Context, m *Mirror, s *seat, st statestore.Leaser, lease statestore.Lease, sent time.Time, lose func(error)) {
	valid := time.Duration(float64(l.ttl) * (1 - leaseDrift))
	deadline := sent.Add(valid)
	next := sent.Add(l.renew)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if time.Now().After(deadline) {
			// Paused (SIGSTOP, a long GC) or cut off from the store past the lease.
			lose(fmt.Errorf("%w: not renewed within the lease (%s); another process may hold it", errLeaseLost, l.ttl))
			return
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		at := time.Now()
		nl, err := st.Renew(rctx, lease, l.ttl)
		cancel()
		switch {
		case err == nil:
			lease, deadline, next = nl, at.Add(valid), at.Add(l.renew)
			s.role.set(func(ld *cdc.Leadership) { ld.StoreErr = nil })
		case errors.Is(err, statestore.ErrNotLeader):
			lose(fmt.Errorf("%w: %w", errLeaseLost, err))
			return
		case ctx.Err() != nil:
			return
		default:
			s.role.set(func(ld *cdc.Leadership) { ld.StoreErr = err })
			if !time.Now().Before(deadline) {
				// The renewal ran into the lease's end: from now on another process may hold it.
				lose(fmt.Errorf("%w: not renewed within the lease (%s): %w", errLeaseLost, l.ttl, err))
				return
			}
			m.log.Warn("renewing the lease failed; trying again until it runs out", "pipeline", s.name, "err", err,
				"left", time.Until(deadline).Round(time.Millisecond))
			next = time.Now().Add(min(l.renew/4, 250*time.Millisecond, time.Until(deadline)))
		}
	}
}

// guardedStore is a term's fenced view of the shared store: a write refused because another
// process took the lease over ends the term at once, whoever made it (the runner saving a
// checkpoint, the sink claiming an index).
type guardedStore struct {
	statestore.Store
	lose func(error)
}

func (g *guardedStore) check(err error) error {
	if errors.Is(err, statestore.ErrNotLeader) {
		g.lose(fmt.Errorf("%w: %w", errLeaseLost, err))
	}
	return err
}

func (g *guardedStore) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	return g.check(g.Store.SaveCheckpoint(ctx, pipeline, cp))
}

func (g *guardedStore) Put(ctx context.Context, pipeline, namespace, key string, value []byte, expect statestore.Revision) (statestore.Revision, error) {
	rev, err := g.Store.Put(ctx, pipeline, namespace, key, value, expect)
	return rev, g.check(err)
}

func (g *guardedStore) Delete(ctx context.Context, pipeline, namespace, key string, expect statestore.Revision) error {
	return g.check(g.Store.Delete(ctx, pipeline, namespace, key, expect))
}

func (g *guardedStore) DeletePipeline(ctx context.Context, pipeline string) error {
	return g.check(g.Store.DeletePipeline(ctx, pipeline))
}

// fenceOut is the sink's FenceOut: how many indices had their write alias rotated.
func fenceOut(ctx context.Context, p *pipeline) (int, error) {
	rep, err := p.sink.FenceOut(ctx)
	return len(rep.Rotated), err
}
