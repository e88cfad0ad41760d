package cdc

import (
	"context"
	"sync"
	"time"
)

// lagState is what the runner knows about how far it trails its source; guarded by Runner.mu.
type lagState struct {
	watching bool      // the source is a LagReporter
	since    time.Time // when watching started
	last     SourceLag // the last successful measurement
	at       time.Time // when it was taken (zero: never)
	err      error     // the last measurement's failure (nil: it succeeded)
	// caughtUp is the latest time the server was at a position the pipeline has since
	// passed; samples are the server positions measured since that are not passed yet,
	// oldest first.
	caughtUp time.Time
	samples  []lagSample
}

type lagSample struct {
	at   time.Time
	head uint64
}

// maxLagSamples bounds the positions kept while the pipeline does not catch up: beyond it the
// oldest go, which can only make the seconds reported smaller than the truth by the age of
// the oldest kept sample (at the default interval, after more than five hours behind).
const maxLagSamples = 4096

// watchLag measures the lag every LagInterval until the returned stop is called, when the
// source is a LagReporter.
func (r *Runner) watchLag(ctx context.Context) (stop func()) {
	lr, ok := r.src.(LagReporter)
	r.mu.Lock()
	r.lag = lagState{watching: ok, since: r.o.Clock.Now()}
	r.mu.Unlock()
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			r.measureLag(ctx, lr)
			select {
			case <-ctx.Done():
				return
			case <-r.o.Clock.After(r.o.LagInterval):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// lagTimeout bounds one measurement.
const lagTimeout = 10 * time.Second

func (r *Runner) measureLag(ctx context.Context, lr LagReporter) {
	r.mu.Lock()
	cp := r.applied
	r.mu.Unlock()
	t := r.o.Clock.Now()
	mctx, cancel := context.WithTimeout(ctx, lagTimeout)
	l, err := lr.Lag(mctx, cp)
	cancel()
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.lag
	if err != nil {
		if s.err == nil {
			r.log.Warn("measuring the lag behind the source failed", "err", err)
		}
		s.err = err
		return
	}
	s.err, s.last, s.at = nil, l, t
	n := 0
	for n < len(s.samples) && s.samples[n].head <= l.Applied {
		s.caughtUp = laterOf(s.caughtUp, s.samples[n].at)
		n++
	}
	s.samples = s.samples[n:]
	if l.Applied >= l.Head {
		s.caughtUp, s.samples = t, s.samples[:0]
		return
	}
	if len(s.samples) == maxLagSamples {
		s.samples = s.samples[1:]
	}
	s.samples = append(s.samples, lagSample{at: t, head: l.Head})
}

// appliedCommit records that a batch made durable changes the source committed at t: the
// server was at their position then, and the pipeline has passed it.
func (r *Runner) appliedCommitLocked(t time.Time) {
	if r.lag.watching && !t.IsZero() {
		r.lag.caughtUp = laterOf(r.lag.caughtUp, t)
	}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lagLocked is Status.Lag at now.
func (r *Runner) lagLocked(now time.Time) Lag {
	s := &r.lag
	if !s.watching {
		return Lag{}
	}
	out := Lag{Bytes: s.last.Bytes, Retained: s.last.Retained, MeasuredAt: s.at, Err: s.err}
	if s.err == nil && !s.at.IsZero() && len(s.samples) == 0 {
		return out // caught up at the last measurement
	}
	base := s.caughtUp
	if base.IsZero() {
		base = s.since
		if len(s.samples) > 0 {
			base = s.samples[0].at
		}
	}
	out.Seconds = max(now.Sub(base).Seconds(), 0)
	return out
}
