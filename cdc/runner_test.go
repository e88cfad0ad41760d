package cdc_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// harness runs a Runner over fakes inside a synctest bubble, where time is virtual: waits
// and backoffs pass instantly and deterministically.
type harness struct {
	t     *testing.T
	src   *fakeSource
	sink  *fakeSink
	store *statestore.Memory
	dlq   *memDLQ
	r     *cdc.Runner
	done  chan error
}

func newHarness(t *testing.T, opts cdc.RunnerOptions) *harness {
	t.Helper()
	h := &harness{t: t, src: &fakeSource{}, sink: &fakeSink{}, store: statestore.NewMemory(), dlq: &memDLQ{}}
	if opts.BatchMaxWait == 0 {
		opts.BatchMaxWait = time.Hour // batches close by count unless a test says otherwise
	}
	r, err := cdc.NewRunner("pipe", h.src, h.sink, h.store, h.dlq, &opts)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

// run starts Run and waits until it blocks reading the stream it opened.
func (h *harness) run(ctx context.Context) *fakeStream {
	h.done = make(chan error, 1)
	n := len(h.src.streams)
	go func() { h.done <- h.r.Run(ctx) }()
	synctest.Wait()
	return h.src.stream(n)
}

func (h *harness) wait() error {
	h.t.Helper()
	synctest.Wait()
	select {
	case err := <-h.done:
		return err
	default:
		h.t.Fatal("Run has not returned")
		return nil
	}
}

func (h *harness) checkpoint() string {
	cp, err := h.store.LoadCheckpoint(context.Background(), "pipe")
	if err != nil {
		h.t.Fatal(err)
	}
	return string(cp)
}

func concat(txs ...[]cdc.Event) []cdc.Event {
	var out []cdc.Event
	for _, tx := range txs {
		out = append(out, tx...)
	}
	return out
}

func TestRunnerBatchesByCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 3})
		st := h.run(t.Context())
		st.send(concat(txEvents(1, 1), txEvents(2, 1), txEvents(3, 1), txEvents(4, 1), txEvents(5, 1), txEvents(6, 1), txEvents(7, 1))...)
		synctest.Wait()
		want := [][]string{{"1/0", "2/0", "3/0"}, {"4/0", "5/0", "6/0"}}
		if got := batchTxs(h.sink.calls()); !reflect.DeepEqual(got, want) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		st.end(nil) // the stream's end flushes the rest
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		want = append(want, []string{"7/0"})
		if got := batchTxs(h.sink.calls()); !reflect.DeepEqual(got, want) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		if got := st.ackList(); !reflect.DeepEqual(got, []string{"3", "6", "7"}) {
			t.Fatalf("acks %v", got)
		}
		p := h.r.Progress()
		if p.Events != 7 || p.Batches != 3 || p.Pending != 0 || p.LastCheckpoint.IsZero() {
			t.Fatalf("progress %+v", p)
		}
	})
}

func TestRunnerBatchesByBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		small := txEvents(1, 1)[0]
		big := txEvents(2, 1)[0]
		big.After = []cdc.Value{int64(1), strings.Repeat("x", 4000)}
		// Room for three small events but not four; the big one exceeds the limit alone.
		h := newHarness(t, cdc.RunnerOptions{BatchMaxBytes: 700})
		st := h.run(t.Context())
		var evs []cdc.Event
		for i := range 5 {
			ev := small
			ev.Position = pos{1, i}
			evs = append(evs, ev)
		}
		evs = append(evs, big)
		ev := small
		ev.Position = pos{3, 0}
		evs = append(evs, ev)
		st.send(evs...)
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"1/0", "1/1", "1/2", "1/3"}, {"1/4"}, {"2/0"}, {"3/0"}}
		if got := batchTxs(h.sink.calls()); !reflect.DeepEqual(got, want) {
			t.Fatalf("batches %v, want %v", got, want)
		}
	})
}

// TestRunnerBatchesByIdle: a batch closes once no event came for BatchIdleWait, well before
// BatchMaxWait; events coming closer together than that keep filling it, and BatchMaxWait still
// bounds a batch whose events never pause.
func TestRunnerBatchesByIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1000, BatchMaxWait: 200 * time.Millisecond,
			BatchIdleWait: 10 * time.Millisecond})
		st := h.run(t.Context())
		st.send(txEvents(1, 2)...)
		time.Sleep(6 * time.Millisecond)
		st.send(txEvents(2, 1)...) // 6 ms later: the same batch
		time.Sleep(9 * time.Millisecond)
		synctest.Wait()
		if n := len(h.sink.calls()); n != 0 {
			t.Fatalf("%d batches 9ms after the last event, want 0 before the idle wait", n)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		want := [][]string{{"1/0", "1/1", "2/0"}}
		if got := batchTxs(h.sink.calls()); !reflect.DeepEqual(got, want) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		// A stream that never pauses for 10 ms: BatchMaxWait closes the batch.
		for i := range 40 {
			st.send(txEvents(10+i, 1)...)
			time.Sleep(6 * time.Millisecond)
		}
		synctest.Wait()
		calls := h.sink.calls()
		if len(calls) != 2 || len(calls[1]) != 34 {
			t.Fatalf("batches %v, want the second one closed by BatchMaxWait after 34 events", batchTxs(calls))
		}
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		if got := batchTxs(h.sink.calls()); len(got) != 3 || len(got[2]) != 6 {
			t.Fatalf("batches %v, want the rest in a third closed by the idle wait", got)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunnerBatchesByTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 100, BatchMaxWait: 200 * time.Millisecond, BatchIdleWait: -1})
		st := h.run(t.Context())
		st.send(txEvents(1, 2)...)
		time.Sleep(150 * time.Millisecond)
		st.send(txEvents(2, 1)...)
		time.Sleep(49 * time.Millisecond)
		synctest.Wait()
		if n := len(h.sink.calls()); n != 0 {
			t.Fatalf("%d batches before the wait elapsed", n)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		want := [][]string{{"1/0", "1/1", "2/0"}}
		if got := batchTxs(h.sink.calls()); !reflect.DeepEqual(got, want) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		// The next batch's wait starts at its own first event.
		time.Sleep(time.Second)
		st.send(txEvents(3, 1)...)
		time.Sleep(199 * time.Millisecond)
		synctest.Wait()
		if n := len(h.sink.calls()); n != 1 {
			t.Fatalf("%d batches, want 1 before the second wait elapsed", n)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if n := len(h.sink.calls()); n != 2 {
			t.Fatalf("%d batches, want 2", n)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRunnerCheckpointsOnlyAtTransactionEnds: a batch that ends inside a transaction saves
// the checkpoint of the last transaction it completed (or none), and nothing is saved or
// acked before the sink answered.
func TestRunnerCheckpointsOnlyAtTransactionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 4})
		var seen []string
		h.sink.respond = func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			seen = append(seen, h.checkpoint()) // what was stored while the sink worked
			return nil, nil
		}
		st := h.run(t.Context())
		st.send(concat(txEvents(1, 3), txEvents(2, 6), txEvents(3, 1))...)
		synctest.Wait()
		// Batches: 1/0..1/2 + 2/0 | 2/1..2/4 | then 2/5, 3/0 wait for more.
		want := [][]string{{"1/0", "1/1", "1/2", "2/0"}, {"2/1", "2/2", "2/3", "2/4"}}
		if got := batchTxs(h.sink.calls()); !reflect.DeepEqual(got, want) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		if cp := h.checkpoint(); cp != "1" {
			t.Fatalf("checkpoint %q after a batch wholly inside transaction 2, want 1", cp)
		}
		if got := st.ackList(); !reflect.DeepEqual(got, []string{"1"}) {
			t.Fatalf("acks %v, want [1]", got)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if cp := h.checkpoint(); cp != "3" {
			t.Fatalf("final checkpoint %q, want 3", cp)
		}
		if got := st.ackList(); !reflect.DeepEqual(got, []string{"1", "3"}) {
			t.Fatalf("acks %v, want [1 3]", got)
		}
		if !reflect.DeepEqual(seen, []string{"", "1", "1"}) {
			t.Fatalf("checkpoints stored during the sink's writes %v, want [ 1 1]", seen)
		}
	})
}

func TestRunnerBackpressureReplaysTheSameBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 3, BackoffMin: 10 * time.Millisecond, BackoffMax: time.Second})
		var at []time.Time
		h.sink.respond = func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			at = append(at, time.Now())
			switch call {
			case 0:
				return nil, &cdc.BackpressureError{Err: errors.New("429")}
			case 1:
				return nil, &cdc.BackpressureError{Err: errors.New("503"), RetryAfter: 5 * time.Second}
			case 2:
				if h.checkpoint() != "" {
					t.Error("checkpoint saved before the batch succeeded")
				}
			}
			return nil, nil
		}
		st := h.run(t.Context())
		st.send(txEvents(1, 3)...)
		time.Sleep(10 * time.Second) // virtual: lets every backoff elapse
		synctest.Wait()
		calls := h.sink.calls()
		if len(calls) != 3 {
			t.Fatalf("%d sink calls, want 3", len(calls))
		}
		for i := 1; i < 3; i++ {
			if &calls[i][0] != &calls[0][0] || len(calls[i]) != len(calls[0]) {
				t.Fatalf("call %d got another batch than call 0", i)
			}
		}
		if gap := at[1].Sub(at[0]); gap < 5*time.Millisecond || gap > 10*time.Millisecond {
			t.Fatalf("first backoff %v, want within [5ms, 10ms]", gap)
		}
		if gap := at[2].Sub(at[1]); gap < 5*time.Second {
			t.Fatalf("second backoff %v ignored RetryAfter 5s", gap)
		}
		if cp := h.checkpoint(); cp != "1" {
			t.Fatalf("checkpoint %q, want 1", cp)
		}
		if p := h.r.Progress(); p.Retries != 2 || p.Batches != 1 || p.Events != 3 {
			t.Fatalf("progress %+v", p)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunnerFatalErrorStopsWithCheckpointUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 2})
		h.sink.respond = func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			if call == 1 {
				return nil, errFatal
			}
			return nil, nil
		}
		st := h.run(t.Context())
		st.send(concat(txEvents(1, 2), txEvents(2, 2))...)
		err := h.wait()
		if !errors.Is(err, errFatal) {
			t.Fatalf("Run = %v, want the sink's error", err)
		}
		if cp := h.checkpoint(); cp != "1" {
			t.Fatalf("checkpoint %q after the fatal batch, want 1", cp)
		}
		if got := st.ackList(); !reflect.DeepEqual(got, []string{"1"}) {
			t.Fatalf("acks %v", got)
		}
		if hl := h.r.Health(); hl.Healthy || !strings.Contains(hl.Reason, "stopped") {
			t.Fatalf("health after a fatal error %+v", hl)
		}
		// The next run resumes from the stored checkpoint and replays transaction 2.
		h.sink.respond = nil
		st = h.run(t.Context())
		if got := string(h.src.openedAt()[1]); got != "1" {
			t.Fatalf("second run opened the source at %q, want 1", got)
		}
		st.send(txEvents(2, 2)...)
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if cp := h.checkpoint(); cp != "2" {
			t.Fatalf("checkpoint %q, want 2", cp)
		}
	})
}

func TestRunnerMalformedEventsGoToTheDLQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 4})
		h.sink.respond = func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			if call == 0 {
				return []cdc.DeadLetter{{Index: 1, Reason: "mapping conflict"}}, nil
			}
			return nil, nil
		}
		h.dlq.onWrite = func() error {
			if h.checkpoint() != "" && len(h.dlq.list()) == 0 {
				t.Error("checkpoint saved before the dead letters were written")
			}
			return nil
		}
		st := h.run(t.Context())
		evs := txEvents(1, 4)
		evs[1].Malformed = errors.New("cannot decode column 2")
		evs[1].After = nil
		bad := txEvents(2, 1) // a batch of nothing but a malformed event
		bad[0].Malformed = errors.New("unknown type")
		st.send(evs...)
		synctest.Wait()
		st.send(bad...)
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		calls := batchTxs(h.sink.calls())
		if want := [][]string{{"1/0", "1/2", "1/3"}}; !reflect.DeepEqual(calls, want) {
			t.Fatalf("sink batches %v, want %v (malformed events never reach the sink)", calls, want)
		}
		recs := h.dlq.list()
		var got []string
		for _, r := range recs {
			got = append(got, r.Event.Position.String()+" "+r.Reason)
			if r.Pipeline != "pipe" || r.Time.IsZero() {
				t.Fatalf("record %+v", r)
			}
		}
		want := []string{"1/1 malformed: cannot decode column 2", "1/2 mapping conflict", "2/0 malformed: unknown type"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("dead letters %q, want %q", got, want)
		}
		if cp := h.checkpoint(); cp != "2" {
			t.Fatalf("checkpoint %q, want 2", cp)
		}
		if p := h.r.Progress(); p.DeadLetters != 3 || p.Events != 5 || p.Batches != 2 {
			t.Fatalf("progress %+v", p)
		}
	})
}

func TestRunnerDLQFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1})
		errDisk := errors.New("disk full")
		var failing atomic.Bool
		failing.Store(true)
		h.dlq.onWrite = func() error {
			if failing.Load() {
				return errDisk
			}
			return nil
		}
		st := h.run(t.Context())
		ev := txEvents(1, 1)
		ev[0].Malformed = errors.New("bad")
		st.send(ev...)
		synctest.Wait()
		if cp := h.checkpoint(); cp != "" {
			t.Fatalf("checkpoint %q saved although its dead letter was not written", cp)
		}
		if s := h.r.Status(); s.State != "reconnecting" || !errors.Is(s.LastFailure, errDisk) || s.Health.Healthy {
			t.Fatalf("status after a failed dead-letter write: %+v", s)
		}
		failing.Store(false)
		time.Sleep(time.Minute) // past any backoff
		synctest.Wait()
		if n := len(h.src.openedAt()); n != 2 || h.src.openedAt()[1] != nil {
			t.Fatalf("opened %d times (%q), want a reopening at no checkpoint", n, h.src.openedAt())
		}
		st = h.src.stream(1)
		st.send(ev...)
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if cp := h.checkpoint(); cp != "1" || len(h.dlq.list()) != 1 {
			t.Fatalf("checkpoint %q, %d dead letters; want 1 and 1", cp, len(h.dlq.list()))
		}
	})
}

func TestRunnerBadDeadLetterIndexIsFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1})
		h.sink.respond = func(int, []cdc.Event) ([]cdc.DeadLetter, error) {
			return []cdc.DeadLetter{{Index: 1, Reason: "x"}}, nil
		}
		st := h.run(t.Context())
		st.send(txEvents(1, 1)...)
		if err := h.wait(); !cdc.IsPermanent(err) || h.checkpoint() != "" {
			t.Fatalf("Run = %v, checkpoint %q; want a permanent error (a sink bug) and no checkpoint", err, h.checkpoint())
		}
	})
}

func TestRunnerStreamFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 10, BackoffMin: time.Second, BackoffMax: 4 * time.Second})
		st := h.run(t.Context())
		st.send(txEvents(1, 2)...)
		errLost := errors.New("connection lost")
		h.src.mu.Lock()
		h.src.openErr = errLost // the server stays away for a while
		h.src.mu.Unlock()
		st.end(errLost)
		synctest.Wait()
		// What arrived before the failure was still delivered and checkpointed.
		if cp := h.checkpoint(); cp != "1" || len(h.sink.calls()) != 1 {
			t.Fatalf("checkpoint %q, %d batches", cp, len(h.sink.calls()))
		}
		hl := h.r.Health()
		if hl.Healthy || !strings.Contains(hl.Reason, "reconnecting") || !strings.Contains(hl.Reason, "connection lost") {
			t.Fatalf("health while reconnecting %+v", hl)
		}
		// Ten minutes of failed reopenings: the waits stay within BackoffMax.
		start := time.Now()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		s := h.r.Status()
		if min := int64(10 * time.Minute / (4 * time.Second)); s.Reconnects < min {
			t.Fatalf("%d reopenings in 10 minutes with waits capped at 4s, want at least %d", s.Reconnects, min)
		}
		if s.State != "reconnecting" || s.FailedAt.Before(start.Add(-time.Second)) || s.FailedAt.After(start) {
			t.Fatalf("status %+v: want reconnecting, failing since the stream failed", s)
		}
		h.src.mu.Lock()
		h.src.openErr = nil
		h.src.mu.Unlock()
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if got := h.src.openedAt()[len(h.src.openedAt())-1]; string(got) != "1" {
			t.Fatalf("reopened at %q, want the stored checkpoint 1", got)
		}
		st = h.src.stream(1)
		if hl := h.r.Health(); !hl.Healthy {
			t.Fatalf("unhealthy after reconnecting: %s", hl.Reason)
		}
		st.send(txEvents(2, 2)...)
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if cp := h.checkpoint(); cp != "2" {
			t.Fatalf("checkpoint %q, want 2", cp)
		}
	})
}

func TestRunnerBackoffStartsOverAfterProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1, BackoffMin: time.Second, BackoffMax: time.Hour})
		st := h.run(t.Context())
		// Five failures in a row grow the wait to between 16s and 32s...
		for i := range 5 {
			st.end(errors.New("reset"))
			time.Sleep(time.Duration(1<<i) * time.Second)
			synctest.Wait()
			st = h.src.stream(i + 1)
		}
		// ...a batch that succeeds starts it over: the next reopening comes within a second.
		st.send(txEvents(1, 1)...)
		synctest.Wait()
		st.end(errors.New("reset"))
		opened := len(h.src.openedAt())
		time.Sleep(time.Second)
		synctest.Wait()
		if len(h.src.openedAt()) != opened+1 {
			t.Fatalf("no reopening within BackoffMin after a successful batch (opened %d, then %d)", opened, len(h.src.openedAt()))
		}
		h.src.stream(opened).end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunnerPermanentStreamFailureStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{})
		st := h.run(t.Context())
		errAuth := errors.New("password authentication failed")
		st.end(cdc.Permanent(errAuth))
		err := h.wait()
		if !errors.Is(err, errAuth) || !cdc.IsPermanent(err) || !strings.Contains(err.Error(), `"pipe"`) {
			t.Fatalf("Run = %v, want the permanent failure naming the pipeline", err)
		}
		if len(h.src.openedAt()) != 1 {
			t.Fatalf("a permanent failure reopened the source (%d opens)", len(h.src.openedAt()))
		}
		// The status says what stopped it.
		if s := h.r.Status(); s.State != "stopped" || !errors.Is(s.LastFailure, errAuth) || s.FailedAt.IsZero() ||
			s.Health.Healthy || !strings.Contains(s.Health.Reason, errAuth.Error()) {
			t.Fatalf("status after a permanent failure: %+v", s)
		}
		// RunnerOptions.Permanent adds classes of its own.
		errMine := errors.New("mine")
		h2 := newHarness(t, cdc.RunnerOptions{Permanent: func(err error) bool { return errors.Is(err, errMine) }})
		st = h2.run(t.Context())
		st.end(errMine)
		if err := h2.wait(); !errors.Is(err, errMine) {
			t.Fatalf("Run = %v, want the failure the option calls permanent", err)
		}
	})
}

func TestRunnerRetryableSinkErrorReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 2})
		h.sink.respond = func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			if call == 1 {
				return nil, errors.New("connection reset by peer")
			}
			return nil, nil
		}
		st := h.run(t.Context())
		st.send(concat(txEvents(1, 2), txEvents(2, 2))...)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(h.src.openedAt()); n != 2 || string(h.src.openedAt()[1]) != "1" {
			t.Fatalf("opened %q, want a reopening at the stored checkpoint 1", h.src.openedAt())
		}
		st = h.src.stream(1)
		st.send(txEvents(2, 2)...)
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if cp, s := h.checkpoint(), h.r.Status(); cp != "2" || s.Reconnects != 1 {
			t.Fatalf("checkpoint %q, %d reconnects; want 2 and 1", cp, s.Reconnects)
		}
	})
}

func TestRunnerContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 10})
		ctx, cancel := context.WithCancel(t.Context())
		st := h.run(ctx)
		st.send(txEvents(1, 2)...)
		cancel()
		if err := h.wait(); err != context.Canceled {
			t.Fatalf("Run = %v, want context.Canceled unwrapped", err)
		}
		if cp := h.checkpoint(); cp != "" {
			t.Fatalf("checkpoint %q for a batch never written", cp)
		}
		select {
		case <-st.done:
		default:
			t.Fatal("stream not closed")
		}
	})
}

func TestRunnerHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 2, StallThreshold: time.Minute, BackoffMax: time.Second, BackpressureThreshold: time.Hour})
		if hl := h.r.Health(); hl.Healthy {
			t.Fatal("healthy before Run")
		}
		var blocked atomic.Bool
		blocked.Store(true)
		h.sink.respond = func(int, []cdc.Event) ([]cdc.DeadLetter, error) {
			if blocked.Load() {
				return nil, &cdc.BackpressureError{Err: errors.New("429")}
			}
			return nil, nil
		}
		st := h.run(t.Context())
		// Idle for long: nothing pending, so healthy.
		time.Sleep(10 * time.Minute)
		if hl := h.r.Health(); !hl.Healthy {
			t.Fatalf("idle pipeline unhealthy: %s", hl.Reason)
		}
		st.mu.Lock()
		st.progress = cdc.SnapshotProgress{Active: true, RowsDone: 42}
		st.mu.Unlock()
		st.send(txEvents(1, 2)...)
		time.Sleep(59 * time.Second)
		if hl := h.r.Health(); !hl.Healthy {
			t.Fatalf("unhealthy before the threshold: %s", hl.Reason)
		}
		time.Sleep(2 * time.Second)
		hl := h.r.Health()
		if hl.Healthy || !strings.Contains(hl.Reason, "stalled") {
			t.Fatalf("health %+v after a minute of backpressure, want stalled", hl)
		}
		p := h.r.Progress()
		if p.Pending != 2 || p.Snapshot.RowsDone != 42 || p.Retries == 0 {
			t.Fatalf("progress %+v", p)
		}
		blocked.Store(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if hl := h.r.Health(); !hl.Healthy {
			t.Fatalf("still unhealthy after the batch succeeded: %s", hl.Reason)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if hl := h.r.Health(); hl.Healthy {
			t.Fatal("healthy after Run returned")
		}
	})
}

func TestRunnerOptionsValidation(t *testing.T) {
	mem := statestore.NewMemory()
	if _, err := cdc.NewRunner("", &fakeSource{}, &fakeSink{}, mem, &memDLQ{}, nil); err == nil {
		t.Fatal("no pipeline name accepted")
	}
	if _, err := cdc.NewRunner("p", &fakeSource{}, &fakeSink{}, mem, &memDLQ{}, nil); err != nil {
		t.Fatalf("nil options: %v, want every default", err)
	}
	if _, err := cdc.NewRunner("p", &fakeSource{}, &fakeSink{}, mem, nil, nil); err == nil {
		t.Fatal("no dead-letter writer accepted")
	}
	if _, err := cdc.NewRunner("p", &fakeSource{}, &fakeSink{}, mem, &memDLQ{}, &cdc.RunnerOptions{BackoffMin: time.Second, BackoffMax: time.Millisecond}); err == nil {
		t.Fatal("BackoffMax below BackoffMin accepted")
	}
}

// recordingObserver keeps what a runner reported.
type recordingObserver struct {
	batches []cdc.BatchStats
	waits   []time.Duration
	attempt []int
}

func (o *recordingObserver) BatchDone(s cdc.BatchStats) { o.batches = append(o.batches, s) }
func (o *recordingObserver) Backpressure(attempt int, wait time.Duration) {
	o.attempt = append(o.attempt, attempt)
	o.waits = append(o.waits, wait)
}

func TestRunnerObserverSeesBatchesAndBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &recordingObserver{}
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 3, BackoffMin: time.Second, BackoffMax: time.Second, Observer: obs})
		h.sink.respond = func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			if call == 0 {
				return nil, &cdc.BackpressureError{Err: errors.New("429")}
			}
			return []cdc.DeadLetter{{Index: 1, Reason: "mapping"}}, nil
		}
		st := h.run(t.Context())
		evs := txEvents(1, 3)
		committed := time.Now().Add(-time.Minute)
		for i := range evs {
			evs[i].CommitTime = committed
		}
		st.send(evs...)
		time.Sleep(2 * time.Second) // virtual
		synctest.Wait()
		if len(obs.attempt) != 1 || obs.attempt[0] != 1 || obs.waits[0] < 500*time.Millisecond || obs.waits[0] > time.Second {
			t.Fatalf("backpressure reports %v waits %v, want one first attempt within [0.5s, 1s]", obs.attempt, obs.waits)
		}
		if len(obs.batches) != 1 {
			t.Fatalf("%d batch reports, want 1", len(obs.batches))
		}
		b := obs.batches[0]
		if b.Events != 3 || b.DeadLetters != 1 || b.Attempts != 2 || !b.Checkpointed {
			t.Fatalf("batch stats %+v", b)
		}
		if b.Duration < 500*time.Millisecond || b.Lag < time.Minute {
			t.Fatalf("batch duration %v lag %v: want the backoff inside the duration and the lag from the commit time", b.Duration, b.Lag)
		}
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
	})
}
