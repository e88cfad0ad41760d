package faultsuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
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

// burstRows is the size of the idle-after-burst case's captured transaction: fifty of the
// suite's batches, so that its acknowledgements trail the source's reader by a second or more
// (and the index stays within what the comparison reads in one search, maxDocs).
const burstRows = 5_000

// TestHealthIdleAfterBurst (issue 31, "health that never cries wolf"): a large captured
// transaction, right after it transactions of a table the pipeline does not capture (the
// source's reader passes them while the burst is still being written and acknowledged), then
// silence. Once the burst is applied, the pipeline must be healthy with its lag near zero a
// lag threshold later, not report an ever growing lag until a captured row changes; then the
// index equals the tables. Not a fault: it runs with the integration tests, for both sources.
func TestHealthIdleAfterBurst(t *testing.T) {
	for _, spec := range []caseSpec{{source: "postgres", engine: es}, {source: "mariadb", engine: ops}} {
		t.Run(spec.source, func(t *testing.T) {
			spec.seed = rand.Uint64N(1 << 40)
			h := newHarness(t, nil, spec)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			q := h.db.quote
			other := "flt_" + h.sfx + "_other"
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := h.db.exec(ctx, "DROP TABLE IF EXISTS "+q(other)); err != nil {
					t.Errorf("dropping %s: %v", other, err)
				}
			})
			if err := h.db.exec(ctx, "CREATE TABLE "+q(other)+" (id bigint PRIMARY KEY, v text)"); err != nil {
				t.Fatal(err)
			}
			h.run()
			before := h.pipe.status().Progress.Events

			digit := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
				"UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
			burst := fmt.Sprintf("INSERT INTO %s (%s, %s, %s) SELECT 800000000 + a.d*1000 + b.d*100 + c.d*10 + e.d, a.d, 'burst' "+
				"FROM %s a CROSS JOIN %s b CROSS JOIN %s c CROSS JOIN %s e WHERE a.d < 5",
				q(h.tables[0].name), q("id"), q("n"), q("label"), digit, digit, digit, digit)
			stmts := []string{burst} // one transaction of burstRows rows
			for i := range 3 {
				stmts = append(stmts, fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, 'other')", q(other), i+1))
			}
			h.mark("burst")
			if err := h.db.exec(ctx, stmts...); err != nil {
				t.Fatal(err)
			}
			if err := h.waitFor(catchUpDeadline, "the burst applied", func() (bool, error) {
				p := h.pipe.status().Progress
				return p.Events >= before+burstRows && p.Pending == 0, nil
			}); err != nil {
				t.Fatal(err)
			}
			applied := time.Now()
			h.mark("burst applied")
			threshold := h.cfg.Pipelines[0].Runner.LagThreshold
			var last cdc.Status
			err := h.waitFor(healthyDeadline, "healthy and caught up a lag threshold after the burst", func() (bool, error) {
				last = h.pipe.status()
				return last.Health.Healthy && last.Lag.Err == nil && last.Lag.MeasuredAt.After(applied.Add(threshold)) &&
					last.Lag.Seconds < threshold.Seconds(), nil
			})
			if err != nil {
				t.Fatalf("%s: %v: health %q, lag %.1fs (%d bytes, measured %.1fs after the burst applied)%s", spec, err, last.Health.Reason,
					last.Lag.Seconds, last.Lag.Bytes, last.Lag.MeasuredAt.Sub(applied).Seconds(), h.rec.transitions(h.marks))
			}
			t.Logf("%s: idle after a burst of %d rows: lag %.1fs (%d bytes) %.1fs after it was applied", spec, burstRows,
				last.Lag.Seconds, last.Lag.Bytes, last.Lag.MeasuredAt.Sub(applied).Seconds())
			res := h.verify(healthWant{})
			h.report("idle after a burst", res)
		})
	}
}

// TestFaultEngineUnresponsive (issue 31, "networks that misbehave"): with every default
// setting (the sink's 60s request timeout, the runner's thresholds), the network between the
// pipeline and Elasticsearch stops carrying anything under load: connections stay open,
// nothing is refused or reset, nothing is answered. Health must say sink_not_answering while
// it lasts -- well within the request timeout: the runner's UnansweredThreshold (8s) after
// the first write left unanswered -- with Status.UnansweredSince set, and be healthy again
// shortly after the network carries bytes again. The bytes are held, not lost, as TCP
// retransmission delivers them after a short outage (TestFaultPartition covers lost ones).
// The times are logged; the assertions are the transitions, with generous deadlines.
func TestFaultEngineUnresponsive(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: es, defaults: true}, unresponsiveEngine())
}

// notAnsweringDeadline bounds the wait for sink_not_answering: below the sink's default
// request timeout (60s), after which the sink would report a failure of its own.
const notAnsweringDeadline = 45 * time.Second

// unresponsiveEngine holds every byte between the pipeline and its engine until health says
// sink_not_answering, then lets them through and waits for health to return.
func unresponsiveEngine() fault {
	want := healthWant{unhealthy: []string{cdc.HealthNotAnswering}, during: true}
	return fault{name: "unresponsive engine", proxied: true, want: want, inject: func(h *harness) error {
		p := h.engProxy
		p.SetLatency(faultproxy.Both, time.Hour) // nothing moves; what was sent is held
		start := time.Now()
		var since time.Time
		err := h.waitFor(notAnsweringDeadline, "health sink_not_answering", func() (bool, error) {
			st := h.pipe.status()
			since = st.UnansweredSince
			return st.Health.Class == cdc.HealthNotAnswering, nil
		})
		took := time.Since(start)
		if err == nil {
			// Until the recorder saw it too (it polls every 100ms), for the case's assertions.
			err = h.waitFor(notAnsweringDeadline, "the recorder to see sink_not_answering", func() (bool, error) {
				return h.rec.sawUnhealthy(start, time.Now(), cdc.HealthNotAnswering), nil
			})
		}
		p.SetLatency(faultproxy.Both, 0)
		healed := time.Now()
		if err != nil {
			return fmt.Errorf("%w (health %q)", err, h.pipe.status().Health.Reason)
		}
		if since.IsZero() {
			return fmt.Errorf("health sink_not_answering without Status.UnansweredSince")
		}
		err = h.waitFor(time.Minute, "healthy once the network carries bytes again", func() (bool, error) {
			return h.pipe.status().Health.Healthy, nil
		})
		h.t.Logf("unresponsive engine: sink_not_answering %.1fs into the outage (the oldest write unanswered since %.1fs into it); healthy %.1fs after the network returned",
			took.Seconds(), since.Sub(start).Seconds(), time.Since(healed).Seconds())
		return err
	}}
}
