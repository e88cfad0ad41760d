package mirror

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/backoff"
)

// The start check. A pipeline's sink proves at every claim that its cluster refuses to
// auto-create df-w-* indices (the deployment requirement of esfence); a cluster that does not
// is a refusal certain before the first write. Run therefore makes that proof first, before
// the runner opens the source: a refused pipeline leaves no replication slot, publication,
// index, dead-letter file or state record behind. A cluster out of reach is not a refusal:
// the check is tried again after a jittered backoff (the runner's backoff_min and
// backoff_max) until it passes or ctx ends, and Status says "starting: checking the cluster"
// meanwhile.

// checkPhase is where a pipeline's start check is.
type checkPhase uint8

const (
	checkIdle    checkPhase = iota // not checking: the runner's own status stands
	checkRunning                   // checking the cluster: Status says starting
	checkRefused                   // refused: Status says stopped, with the refusal
)

// clusterCheck is a pipeline's start check: its backoff, and what Status shows while it runs
// and after it refused.
type clusterCheck struct {
	policy backoff.Policy
	rnd    *rand.Rand // used by Run's goroutine of the pipeline only

	mu       sync.Mutex
	phase    checkPhase
	attempts int       // failed attempts in this Run
	last     error     // the last failed attempt's error
	since    time.Time // when the first attempt failed
	refused  error
}

func newClusterCheck(pc *PipelineConfig) *clusterCheck {
	p := backoff.Policy{Min: pc.Runner.BackoffMin, Max: pc.Runner.BackoffMax}
	if p.Min <= 0 {
		p.Min = 100 * time.Millisecond // cdc.RunnerOptions' defaults
	}
	if p.Max <= 0 {
		p.Max = 5 * time.Second
	}
	p.Max = max(p.Max, p.Min)
	return &clusterCheck{policy: p, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// reportEvery is how often one failure that keeps repeating is logged again.
const reportEvery = time.Minute

// checkCluster runs p's start check: nil once the sink's cluster passed it; the refusal, a
// permanent error, when the start is certain to be refused; ctx.Err() when ctx ended first.
func (m *Mirror) checkCluster(ctx context.Context, p *pipeline) error {
	c := p.check
	c.set(func() { c.phase, c.attempts, c.last, c.since, c.refused = checkRunning, 0, nil, time.Time{}, nil })
	defer c.set(func() {
		if c.phase == checkRunning {
			c.phase = checkIdle
		}
	})
	var lastLogged string
	var loggedAt time.Time
	for attempt := 0; ; attempt++ {
		err := p.sink.CheckCluster(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			if attempt > 0 {
				m.log.Info("cluster checked after failures: it refuses to auto-create df-w-* indices", "pipeline", p.name, "attempts", attempt)
			} else {
				m.log.Info("cluster checked: it refuses to auto-create df-w-* indices", "pipeline", p.name)
			}
			return nil
		}
		if cdc.IsPermanent(err) {
			err = fmt.Errorf("checking the sink's cluster before opening the source: %w", err)
			c.set(func() { c.phase, c.refused = checkRefused, err })
			m.log.Error("pipeline refused at start: nothing was created", "pipeline", p.name, "err", err)
			return err
		}
		now := time.Now()
		c.set(func() {
			if c.attempts == 0 {
				c.since = now
			}
			c.attempts, c.last = attempt+1, err
		})
		wait := c.policy.Delay(attempt, c.rnd, 0)
		if msg := err.Error(); msg != lastLogged || now.Sub(loggedAt) >= reportEvery {
			m.log.Warn("checking the sink's cluster failed; trying again", "pipeline", p.name, "err", err,
				"attempt", attempt+1, "wait", wait)
			lastLogged, loggedAt = msg, now
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (c *clusterCheck) set(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// status overlays the check on the runner's status while it runs or after it refused.
func (c *clusterCheck) status(st cdc.Status) cdc.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.phase {
	case checkRunning:
		st.State = "starting"
		st.Health = cdc.Health{Class: cdc.HealthStarting, Reason: "starting: checking the cluster"}
		if c.last != nil {
			st.Health.Reason += fmt.Sprintf(" (attempt %d, failing since %s): %v", c.attempts,
				c.since.UTC().Format(time.RFC3339), c.last)
			st.LastFailure, st.FailedAt = c.last, c.since
		}
	case checkRefused:
		st.State = "stopped"
		st.Health = cdc.Health{Class: cdc.HealthStopped, Reason: "stopped: " + c.refused.Error()}
	}
	return st
}

// dlqFile is a pipeline's dead-letter file, created only once the pipeline passed its start
// check: Open opens a file that exists (repairing a torn last line) and only checks the
// directory of one that does not.
type dlqFile struct {
	path string
	mu   sync.Mutex
	f    *cdc.FileDLQ
	// byTable counts the records written since Open per table (cdc.TableID.String()): what
	// Mirror.DeadLettersByTable reports. Table names only, never row data.
	byTable map[string]int64
}

var _ cdc.DeadLetterWriter = (*dlqFile)(nil)

func openDLQ(path string) (*dlqFile, error) {
	d := &dlqFile{path: path}
	if _, err := os.Stat(path); err == nil {
		return d, d.open()
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("cdc: dead-letter file: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("cdc: dead-letter file: %s is not a directory", filepath.Dir(path))
	}
	return d, nil
}

// open opens (creating it) the file, once.
func (d *dlqFile) open() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f != nil {
		return nil
	}
	f, err := cdc.OpenFileDLQ(d.path, nil)
	if err != nil {
		return err
	}
	d.f = f
	return nil
}

func (d *dlqFile) WriteDeadLetters(ctx context.Context, records []cdc.DeadLetterRecord) error {
	d.mu.Lock()
	f := d.f
	d.mu.Unlock()
	if f == nil {
		return errors.New("cdc: dead-letter file " + d.path + ": not opened")
	}
	if err := f.WriteDeadLetters(ctx, records); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byTable == nil {
		d.byTable = make(map[string]int64)
	}
	for i := range records {
		d.byTable[records[i].Event.Table.String()]++
	}
	return nil
}

// counts is a copy of byTable (nil when nothing was written).
func (d *dlqFile) counts() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.byTable) == 0 {
		return nil
	}
	out := make(map[string]int64, len(d.byTable))
	for t, n := range d.byTable {
		out[t] = n
	}
	return out
}

// Close closes the file if it was opened.
func (d *dlqFile) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	return d.f.Close()
}
