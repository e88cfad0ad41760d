package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// hanging is a store that can hang like a SIGSTOPped server behind a client with a request
// timeout: while hung, a call waits for its context or the store's own timeout. A read then
// fails (canceled when its caller's context ended, unavailable on the store's timeout); a
// write has reached the server: it fails with an unknown outcome and is applied when the
// store resumes, as a stopped server applies what its socket buffered once continued.
type hanging struct {
	*memstore.Adapter
	timeout time.Duration

	mu      sync.Mutex
	hung    chan struct{} // closed on resume; nil when not hung
	late    []driver.Write
	calls   atomic.Int64
	noBound atomic.Int64 // calls made while hung whose context had no deadline
	bounds  []time.Time  // the deadlines of the calls made while hung
}

func (h *hanging) hang() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hung = make(chan struct{})
}

// resume applies the writes that reached the hung store and ends the hang.
func (h *hanging) resume() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.Adapter.Write(context.Background(), h.late, driver.WriteOptions{}); err != nil {
		panic(err)
	}
	h.late = nil
	close(h.hung)
	h.hung = nil
}

// wait blocks a call while the store hangs. It returns nil when the store was not hung or
// resumed, else the call's failure.
func (h *hanging) wait(ctx context.Context, write bool, w []driver.Write) error {
	h.calls.Add(1)
	h.mu.Lock()
	hung := h.hung
	if hung != nil {
		if d, ok := ctx.Deadline(); ok {
			h.bounds = append(h.bounds, d)
		} else {
			h.noBound.Add(1)
		}
		if write {
			h.late = append(h.late, w...)
		}
	}
	h.mu.Unlock()
	if hung == nil {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	select {
	case <-hung:
		return errResumed
	case <-tctx.Done():
	}
	switch {
	case write:
		return driver.NewError(driver.KindOutcomeUnknown, "hanging: the write timed out in flight", nil)
	case ctx.Err() != nil:
		return driver.NewError(driver.KindCanceled, "hanging: canceled", ctx.Err())
	}
	return driver.NewError(driver.KindUnavailable, "hanging: the read timed out", nil)
}

var errResumed = errors.New("resumed")

// Close keeps the records readable for the check after the Service closed.
func (h *hanging) Close(context.Context) error { return nil }

func (h *hanging) Read(ctx context.Context, a []driver.Address) ([]driver.ReadResult, error) {
	if err := h.wait(ctx, false, nil); err != nil && err != errResumed {
		return nil, err
	}
	return h.Adapter.Read(ctx, a)
}

func (h *hanging) Write(ctx context.Context, w []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	switch err := h.wait(ctx, true, w); {
	case err == errResumed:
		// Applied at the resume (resume); its answer: what a replay reports now.
		out := make([]driver.WriteResult, len(w))
		for i := range out {
			out[i] = driver.WriteResult{Outcome: driver.Updated}
		}
		return out, nil
	case err != nil:
		return nil, err
	}
	return h.Adapter.Write(ctx, w, o)
}

// retryCounter counts resends and deadline cuts.
type retryCounter struct {
	store.NopObserver
	retries, cut, late atomic.Int64
}

func (c *retryCounter) Retry(r store.Retry) {
	if r.Reason == store.RetryUnavailable {
		c.retries.Add(int64(r.Ops))
	}
}
func (c *retryCounter) DeadlineCut(d store.DeadlineCut) { c.cut.Add(int64(d.Ops)) }
func (c *retryCounter) LateOutcome(store.LateOutcome)   { c.late.Add(1) }

// TestDeadlineHungStore: a store hangs (each request waits for the store's own timeout,
// shorter than the callers' deadlines but long enough for several to pile up). Calls with a
// deadline -- single operations coalesced into batches, which queue behind the hung batches,
// and multi-operation requests -- answer by their deadline with a retryable failure per
// operation: KindUnavailable for reads and for writes never sent, KindOutcomeUnknown for
// writes a hung call carried. No adapter call made while hung outlives the latest deadline of
// its callers. After the resume, every record is what its caller was told: an acknowledged
// write is present, an unavailable one absent, an outcome-unknown one either.
func TestDeadlineHungStore(t *testing.T) {
	h := &hanging{Adapter: memstore.New(), timeout: 400 * time.Millisecond}
	obs := &retryCounter{}
	s, err := store.New(map[string]store.Adapter{"m": h}, &store.Options{
		Observer: obs, Coalesce: store.CoalesceOptions{MaxInFlight: 2},
		RetryAttempts: 10, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const deadline = 1500 * time.Millisecond

	type call struct {
		ops     []store.Op
		res     []store.Result
		err     error
		took    time.Duration
		started time.Time
	}
	var (
		mu    sync.Mutex
		calls []*call
		wg    sync.WaitGroup
	)
	run := func(ops ...store.Op) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &call{ops: ops, started: time.Now()}
			cctx, cancel := context.WithTimeout(ctx, deadline)
			c.res, c.err = s.Do(cctx, ops, store.WaitApplied)
			c.took = time.Since(c.started)
			cancel()
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
		}()
	}
	doc := func(k string) store.Document { return store.Document{JSON: []byte(`{"k":"` + k + `"}`)} }
	n := 0
	next := func() string { n++; return fmt.Sprintf("k%03d", n) }
	load := func(rounds int) {
		for range rounds {
			for range 4 {
				k := next()
				run(store.Put(addr("m", k), doc(k)))
			}
			run(store.Read(addr("m", next())))
			a, b := next(), next()
			run(store.Put(addr("m", a), doc(a)), store.Read(addr("m", "k001")), store.Put(addr("m", b), doc(b)).WithPrecondition(store.IfAbsent()))
			time.Sleep(20 * time.Millisecond)
		}
	}
	load(3) // before the hang
	wg.Wait()
	h.hang()
	hungAt := time.Now()
	load(20)
	wg.Wait()
	hungFor := time.Since(hungAt)
	h.resume()
	load(2) // after
	wg.Wait()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var worst time.Duration
	kinds := map[string]int{}
	for _, c := range calls {
		if c.err != nil {
			t.Fatalf("a call with a deadline failed as a whole: %v; want one result per operation", c.err)
		}
		worst = max(worst, c.took)
		for i, r := range c.res {
			switch {
			case r.Err == nil:
				kinds[r.Outcome.String()]++
			case errors.Is(r.Err, store.ErrUnavailable), errors.Is(r.Err, store.ErrOutcomeUnknown):
				kinds[store.KindOf(r.Err).String()]++
				if c.ops[i].Kind == store.OpRead && !errors.Is(r.Err, store.ErrUnavailable) {
					t.Errorf("a read cut at its deadline: %v, want unavailable", r.Err)
				}
			default:
				t.Errorf("operation %v: %v, want success or a retryable failure", c.ops[i].Addr, r.Err)
			}
		}
	}
	// Generous: the machine may be loaded; the point is the answer, not its speed.
	if worst > deadline+5*time.Second {
		t.Errorf("slowest call took %s, deadline %s", worst, deadline)
	}
	if kinds["unavailable"] == 0 || kinds["outcome unknown"] == 0 {
		t.Errorf("outcomes %v: want both unavailable and outcome-unknown operations while hung", kinds)
	}
	h.mu.Lock()
	var latestBound time.Time
	for _, b := range h.bounds {
		if b.After(latestBound) {
			latestBound = b
		}
	}
	h.mu.Unlock()
	if h.noBound.Load() > 0 {
		t.Errorf("%d adapter calls made while hung had no deadline", h.noBound.Load())
	}
	if limit := hungAt.Add(hungFor + deadline); latestBound.After(limit) {
		t.Errorf("an adapter call's deadline %s is after every caller's deadline (%s)", latestBound, limit)
	}
	t.Logf("hung %s, %d calls, deadline %s: slowest call %s; outcomes %v; resends %d, operations cut %d, late outcomes %d",
		hungFor.Round(time.Millisecond), len(calls), deadline, worst.Round(time.Millisecond), kinds,
		obs.retries.Load(), obs.cut.Load(), obs.late.Load())

	// Row by row: what each caller was told against what the store holds.
	stored := map[string]bool{}
	for _, c := range calls {
		for _, op := range c.ops {
			if op.Kind != store.OpPut {
				continue
			}
			r, err := h.Adapter.Read(ctx, []driver.Address{{Store: "m", Namespace: "ns", Dataset: "ds", Key: driver.NewStringKey(op.Addr.Key.StringValue())}})
			if err != nil || r[0].Err != nil {
				t.Fatal(err, r[0].Err)
			}
			stored[op.Addr.Key.StringValue()] = r[0].Found
		}
	}
	for _, c := range calls {
		for i, op := range c.ops {
			if op.Kind != store.OpPut {
				continue
			}
			k := op.Addr.Key.StringValue()
			r := c.res[i]
			switch {
			case r.Err == nil && !stored[k]:
				t.Errorf("%s: acknowledged (%v) but absent", k, r.Outcome)
			case errors.Is(r.Err, store.ErrUnavailable) && stored[k]:
				t.Errorf("%s: told unavailable (%v) but stored", k, r.Err)
			}
		}
	}
}

// TestDeadlineApply: Apply, a worker's entry point, answers by its context's deadline too, one
// retryable failure per operation the hung store holds; a canceled context still ends the
// call with its error.
func TestDeadlineApply(t *testing.T) {
	h := &hanging{Adapter: memstore.New(), timeout: time.Hour}
	s, err := store.New(map[string]store.Adapter{"m": h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.hang()
	defer h.resume()
	doc := store.Document{JSON: []byte(`{"n":1}`)}
	ops := []store.QueuedOp{{Op: store.Put(addr("m", "a"), doc)}, {Op: store.Delete(addr("m", "b"))}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := s.Apply(ctx, ops)
	if err != nil {
		t.Fatalf("Apply with a deadline on a hung store: %v, want one result per operation", err)
	}
	for i, r := range res {
		if !errors.Is(r.Err, store.ErrOutcomeUnknown) && !errors.Is(r.Err, store.ErrUnavailable) {
			t.Errorf("operation %d: %v, want outcome unknown or unavailable", i, r.Err)
		}
	}
	// A write queued behind its record's write in flight on the hung store was never sent,
	// and says so.
	first := make(chan error, 1)
	calls := h.calls.Load()
	go func() {
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer fcancel()
		_, err := s.Put(fctx, addr("m", "c"), doc)
		first <- err
	}()
	for h.calls.Load() == calls {
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Put(ctx2(t, 200*time.Millisecond), addr("m", "c"), doc); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a put queued behind a hung one: %v, want unavailable", err)
	}
	if err := <-first; !errors.Is(err, store.ErrOutcomeUnknown) {
		t.Errorf("the put the hung store holds: %v, want outcome unknown", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); ccancel() }()
	if _, err := s.Apply(cctx, ops[1:]); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply canceled: %v, want context.Canceled", err)
	}
}

func ctx2(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
