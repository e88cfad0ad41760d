package faultsuite

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// The health recorder polls the runner's Status every recordPeriod and keeps its
// transitions: each change of (healthy, state, reason class).

const recordPeriod = 100 * time.Millisecond

type sample struct {
	at         time.Time
	healthy    bool
	state      string
	class      string // Health.Class: ok, reconnecting, backpressure, lagging, stalled, ...
	reason     string
	reconnects int64
}

func (s sample) String() string {
	h := "healthy"
	if !s.healthy {
		h = "unhealthy"
	}
	out := h + " " + s.state
	if s.reason != "" {
		out += ": " + shorten(s.reason, 240)
	}
	return out
}

type recorder struct {
	status func() cdc.Status
	start  time.Time
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	samples []sample // transitions, oldest first
}

func startRecorder(status func() cdc.Status) *recorder {
	r := &recorder{status: status, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(recordPeriod)
		defer tick.Stop()
		for {
			r.poll()
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

func (r *recorder) poll() {
	st := r.status()
	s := sample{at: time.Now(), healthy: st.Health.Healthy, state: st.State, reason: st.Health.Reason,
		class: st.Health.Class, reconnects: st.Reconnects}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.samples); n > 0 {
		last := r.samples[n-1]
		if last.healthy == s.healthy && last.state == s.state && last.class == s.class {
			return
		}
	}
	r.samples = append(r.samples, s)
}

// Stop ends the polling; the transitions stay readable.
func (r *recorder) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

func (r *recorder) snapshot() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.samples)
}

// sawUnhealthy reports whether, at some point between from and to, the pipeline was reported
// unhealthy with a reason of one of the classes (a transition's sample lasts until the next).
func (r *recorder) sawUnhealthy(from, to time.Time, classes ...string) bool {
	ss := r.snapshot()
	for i, s := range ss {
		end := to
		if i+1 < len(ss) {
			end = ss[i+1].at
		}
		if s.at.After(to) || end.Before(from) {
			continue
		}
		if !s.healthy && slices.Contains(classes, s.class) {
			return true
		}
	}
	return false
}

// stopped returns the first sample in the stopped state, if any.
func (r *recorder) stopped() (sample, bool) {
	for _, s := range r.snapshot() {
		if s.state == "stopped" {
			return s, true
		}
	}
	return sample{}, false
}

// transitions describes the transitions, one per line, with seconds since the recorder
// started and the fault's window marked.
func (r *recorder) transitions(marks map[string]time.Time) string {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for _, s := range r.snapshot() {
		lines = append(lines, line{s.at, s.String()})
	}
	for name, at := range marks {
		if !at.IsZero() {
			lines = append(lines, line{at, "-- " + name})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "\n  %+8.1fs %s", l.at.Sub(r.start).Seconds(), l.text)
	}
	return b.String()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// logBuffer keeps the pipeline's log lines (never row data: the library's rule) for the
// failure report.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
	part  []byte
}

const maxLogLines = 400

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := slices.Index(l.part, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.part[:i]))
		l.part = l.part[i+1:]
	}
	if over := len(l.lines) - maxLogLines; over > 0 {
		l.lines = slices.Delete(l.lines, 1, 1+over) // the first line (the start) stays
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "\n  | " + strings.Join(l.lines, "\n  | ")
}
