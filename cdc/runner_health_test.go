package cdc_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

func TestRunnerHealthBackpressureThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 2, BackpressureThreshold: 30 * time.Second, StallThreshold: time.Hour})
		var blocked atomic.Bool
		blocked.Store(true)
		h.sink.respond = func(int, []cdc.Event) ([]cdc.DeadLetter, error) {
			if blocked.Load() {
				return nil, &cdc.BackpressureError{Err: errors.New("es_rejected_execution_exception")}
			}
			return nil, nil
		}
		st := h.run(t.Context())
		st.send(txEvents(1, 2)...)
		time.Sleep(29 * time.Second)
		if hl := h.r.Health(); !hl.Healthy {
			t.Fatalf("unhealthy before the backpressure threshold: %s", hl.Reason)
		}
		if s := h.r.Status(); s.BackpressureSince.IsZero() {
			t.Fatal("Status.BackpressureSince unset while the batch is pushed back")
		}
		time.Sleep(7 * time.Second) // the backoff is at most 5s: a retry happened past 30s
		hl := h.r.Health()
		if hl.Healthy || !strings.Contains(hl.Reason, "backpressure") || !strings.Contains(hl.Reason, "es_rejected_execution_exception") {
			t.Fatalf("health %+v after 36s of backpressure, want the backpressure with its cause", hl)
		}
		blocked.Store(false)
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if hl := h.r.Health(); !hl.Healthy {
			t.Fatalf("still unhealthy after the batch succeeded: %s", hl.Reason)
		}
		if s := h.r.Status(); !s.BackpressureSince.IsZero() {
			t.Fatal("Status.BackpressureSince still set after the batch succeeded")
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// lagSource is a fakeSource that is a LagReporter: the server's head is what the test sets,
// a checkpoint "N" is at position N.
type lagSource struct {
	*fakeSource
	mu   sync.Mutex
	head uint64
	err  error
	asks int
}

func (s *lagSource) Lag(ctx context.Context, cp cdc.Checkpoint) (cdc.SourceLag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks++
	if s.err != nil {
		return cdc.SourceLag{}, s.err
	}
	var applied uint64
	for _, c := range string(cp) {
		applied = applied*10 + uint64(c-'0')
	}
	return cdc.SourceLag{Head: s.head, Applied: applied, Bytes: int64(s.head - min(applied, s.head)), Retained: 100}, nil
}

func (s *lagSource) set(head uint64, err error) {
	s.mu.Lock()
	s.head, s.err = head, err
	s.mu.Unlock()
}

func TestRunnerLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &lagSource{fakeSource: &fakeSource{}}
		dlq := &memDLQ{}
		store := statestore.NewMemory()
		r, err := cdc.NewRunner("pipe", src, &fakeSink{}, store, dlq, &cdc.RunnerOptions{BatchMaxEvents: 2,
			BatchMaxWait: time.Hour, LagInterval: 5 * time.Second, LagThreshold: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { done <- r.Run(ctx) }()
		synctest.Wait()
		st := src.stream(0)
		// Caught up at position 0.
		if l := r.Status().Lag; l.MeasuredAt.IsZero() || l.Seconds != 0 || l.Bytes != 0 || l.Retained != 100 {
			t.Fatalf("lag at start %+v", l)
		}
		// The server moves to 2 and the pipeline does not follow: seconds grow from the first
		// measurement that saw it behind, also while idle.
		src.set(2, nil)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		behindSince := time.Now()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		l := r.Status().Lag
		if l.Bytes != 2 || l.Seconds < 20 || l.Seconds > 25 {
			t.Fatalf("lag %+v after 20s behind, want 2 bytes and 20-25s", l)
		}
		if hl := r.Health(); !hl.Healthy {
			t.Fatalf("unhealthy below the lag threshold: %s", hl.Reason)
		}
		time.Sleep(15 * time.Second)
		if hl := r.Health(); hl.Healthy || !strings.Contains(hl.Reason, "lagging") {
			t.Fatalf("health %+v 35s behind with a 30s threshold", hl)
		}
		// The source becomes unreachable: the seconds keep growing, the failure is reported.
		src.set(2, errors.New("connection refused"))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		l = r.Status().Lag
		if l.Err == nil || l.Seconds < time.Since(behindSince).Seconds()-1 {
			t.Fatalf("lag %+v while the source cannot be asked, want the error and growing seconds", l)
		}
		// The pipeline applies transactions 1 and 2 (checkpoint "2" = position 2): caught up.
		src.set(2, nil)
		st.send(concat(txEvents(1, 1), txEvents(2, 1))...)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if l := r.Status().Lag; l.Seconds != 0 || l.Bytes != 0 || l.Err != nil {
			t.Fatalf("lag %+v after catching up", l)
		}
		if hl := r.Health(); !hl.Healthy {
			t.Fatalf("unhealthy after catching up: %s", hl.Reason)
		}
		cancel()
		<-done
	})
}

func TestRunnerSnapshotTotalsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1})
		st := h.run(t.Context())
		st.mu.Lock()
		st.progress = cdc.SnapshotProgress{Active: true, TablesTotal: 1, RowsDone: 7, RowsEstimated: 7}
		st.mu.Unlock()
		if p := h.r.Progress(); !p.Snapshot.Active || p.Snapshot.RowsDone != 7 {
			t.Fatalf("progress during the snapshot %+v", p.Snapshot)
		}
		if s := h.r.Status(); s.State != "snapshotting" {
			t.Fatalf("state %q during the snapshot", s.State)
		}
		st.mu.Lock()
		st.progress = cdc.SnapshotProgress{}
		st.mu.Unlock()
		p := h.r.Progress()
		if p.Snapshot.Active || p.Snapshot.RowsDone != 7 || p.Snapshot.TablesTotal != 1 {
			t.Fatalf("snapshot totals after the snapshot %+v, want them kept", p.Snapshot)
		}
		if s := h.r.Status(); s.State != "streaming" {
			t.Fatalf("state %q after the snapshot", s.State)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Message]++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[msg]
}

func TestRunnerLogsAnOutageOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &countingHandler{counts: map[string]int{}}
		h := newHarness(t, cdc.RunnerOptions{BackoffMax: time.Second, ReportInterval: time.Minute, Logger: slog.New(logs)})
		st := h.run(t.Context())
		h.src.mu.Lock()
		h.src.openErr = errors.New("connection refused")
		h.src.mu.Unlock()
		st.end(errors.New("connection reset"))
		time.Sleep(10 * time.Minute) // hundreds of attempts
		synctest.Wait()
		const msg = "pipeline failed; reopening the source at the stored checkpoint"
		if n, tries := logs.count(msg), h.r.Status().Reconnects; tries < 300 || n < 2 || n > 13 {
			t.Fatalf("%d attempts logged %d times; want the first two failures and about one line a minute", tries, n)
		}
		h.src.mu.Lock()
		h.src.openErr = nil
		h.src.mu.Unlock()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := logs.count("pipeline reconnected"); n != 1 {
			t.Fatalf("reconnection logged %d times, want 1", n)
		}
		h.src.stream(1).end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRunnerHealthSinkUnavailable: a sink whose destination is down (BackpressureError with
// Unavailable) makes the pipeline unhealthy at once, not after the backpressure threshold;
// healthy again once the batch went through.
func TestRunnerHealthSinkUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1, BackpressureThreshold: time.Hour})
		var down atomic.Bool
		down.Store(true)
		h.sink.respond = func(int, []cdc.Event) ([]cdc.DeadLetter, error) {
			if down.Load() {
				return nil, &cdc.BackpressureError{Err: errors.New("dial tcp: connection refused"), Unavailable: true}
			}
			return nil, nil
		}
		st := h.run(t.Context())
		st.send(txEvents(1, 1)...)
		synctest.Wait()
		hl := h.r.Health()
		if hl.Healthy || hl.Class != cdc.HealthUnavailable || !strings.Contains(hl.Reason, "connection refused") {
			t.Fatalf("health %+v with the destination down, want sink_unavailable with the cause", hl)
		}
		down.Store(false)
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if hl := h.r.Health(); !hl.Healthy {
			t.Fatalf("unhealthy after the destination came back: %s", hl.Reason)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRunnerHealthSinkNotAnswering: a write the sink leaves unanswered (a black-holed engine:
// no error, no answer, until the sink's own request timeout) makes the pipeline unhealthy
// once it waited beyond UnansweredThreshold (default 8s), with Status.UnansweredSince set and
// no row data in the reason; healthy again as soon as the sink answers. Negative turns the
// check off. (Backoff waits between offers are no wait for an answer:
// TestRunnerHealthBackpressureThreshold is healthy 29s into backpressure.)
func TestRunnerHealthSinkNotAnswering(t *testing.T) {
	for _, c := range []struct {
		name      string
		threshold time.Duration
		reported  bool
	}{{"default", 0, true}, {"off", -1, false}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1, UnansweredThreshold: c.threshold})
				answer := make(chan struct{})
				h.sink.respond = func(call int, _ []cdc.Event) ([]cdc.DeadLetter, error) {
					if call == 0 {
						<-answer
					}
					return nil, nil
				}
				st := h.run(t.Context())
				sent := time.Now()
				ev := txEvents(1, 1)
				ev[0].After = []cdc.Value{"secret row value"}
				st.send(ev...)
				synctest.Wait()
				time.Sleep(7 * time.Second)
				if hl := h.r.Health(); !hl.Healthy {
					t.Fatalf("unhealthy 7s into an unanswered write: %s", hl.Reason)
				}
				s := h.r.Status()
				if !s.UnansweredSince.Equal(sent) {
					t.Fatalf("Status.UnansweredSince %v while the write waits since %v", s.UnansweredSince, sent)
				}
				time.Sleep(2 * time.Second)
				hl := h.r.Health()
				if c.reported && (hl.Healthy || hl.Class != cdc.HealthNotAnswering || !strings.Contains(hl.Reason, "9s") ||
					strings.Contains(hl.Reason, "secret")) {
					t.Fatalf("health %+v 9s into an unanswered write, want sink_not_answering saying for how long, without row data", hl)
				}
				if !c.reported && !hl.Healthy {
					t.Fatalf("unhealthy with the check off: %s", hl.Reason)
				}
				if s := h.r.Status(); s.Health.Class != hl.Class {
					t.Fatalf("Status.Health %+v, Health %+v", s.Health, hl)
				}
				close(answer)
				synctest.Wait()
				if hl := h.r.Health(); !hl.Healthy {
					t.Fatalf("unhealthy once the write was answered: %s", hl.Reason)
				}
				if s := h.r.Status(); !s.UnansweredSince.IsZero() {
					t.Fatalf("Status.UnansweredSince %v once the write was answered", s.UnansweredSince)
				}
				st.end(nil)
				if err := h.wait(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
