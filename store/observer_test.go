package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// events records what a Service reports.
type events struct {
	mu      sync.Mutex
	calls   []store.AdapterCall
	batches []store.CoalescedBatch
	full    []string
	retries []store.Retry
}

func (e *events) AdapterCall(c store.AdapterCall) {
	e.mu.Lock()
	e.calls = append(e.calls, c)
	e.mu.Unlock()
}
func (e *events) CoalescedBatch(b store.CoalescedBatch) {
	e.mu.Lock()
	e.batches = append(e.batches, b)
	e.mu.Unlock()
}
func (e *events) QueueFull(s string)  { e.mu.Lock(); e.full = append(e.full, s); e.mu.Unlock() }
func (e *events) Retry(r store.Retry) { e.mu.Lock(); e.retries = append(e.retries, r); e.mu.Unlock() }

var _ store.Observer = store.NopObserver{}

// unavailableOnce reports the given keys unavailable on their first write, as a backend
// refusing them before doing anything would.
type unavailableOnce struct {
	driver.Store
	mu   sync.Mutex
	seen map[string]bool
	keys map[string]bool
}

func (u *unavailableOnce) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	u.mu.Lock()
	refuse := map[int]bool{}
	var pass []driver.Write
	for i, w := range ws {
		k := w.Addr.Key.StringValue()
		if u.keys[k] && !u.seen[k] {
			u.seen[k] = true
			refuse[i] = true
			continue
		}
		pass = append(pass, w)
	}
	u.mu.Unlock()
	inner, err := u.Store.Write(ctx, pass, o)
	if err != nil {
		return nil, err
	}
	out := make([]driver.WriteResult, len(ws))
	for i, j := 0, 0; i < len(ws); i++ {
		if refuse[i] {
			out[i] = driver.WriteResult{Err: driver.NewError(driver.KindUnavailable, "busy", nil)}
			continue
		}
		out[i] = inner[j]
		j++
	}
	return out, nil
}

func TestObserverAdapterCallsAndUnavailableRetries(t *testing.T) {
	obs := &events{}
	a := &unavailableOnce{Store: memstore.New(), seen: map[string]bool{}, keys: map[string]bool{"b": true, "c": true}}
	s, err := store.New(map[string]store.Adapter{"m": a}, &store.Options{Observer: obs, BackoffBase: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	doc := store.Document{JSON: []byte(`{"v":1}`)}
	ops := []store.Op{
		store.Put(addr("m", "a"), doc), store.Put(addr("m", "b"), doc), store.Put(addr("m", "c"), doc),
		store.Put(addr("m", "d"), doc).WithPrecondition(store.IfRevision(mustRevision(t))), // stale: a conflict
		store.Read(addr("m", "x")),
	}
	res, err := s.Do(context.Background(), ops, store.WaitApplied)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if res[i].Err != nil {
			t.Fatalf("put %d: %v", i, res[i].Err)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var reads, writes []store.AdapterCall
	for _, c := range obs.calls {
		if c.Store != "m" || c.Duration < 0 {
			t.Fatalf("call %+v: wrong store", c)
		}
		switch c.Call {
		case store.CallRead:
			reads = append(reads, c)
		case store.CallWrite:
			writes = append(writes, c)
		}
	}
	if len(reads) != 1 || reads[0].Size != 1 || reads[0].OK != 1 || reads[0].Attempt != 1 {
		t.Fatalf("read calls %+v, want one of one address, found or not found", reads)
	}
	if len(writes) != 2 {
		t.Fatalf("write calls %+v, want the batch and one resend", writes)
	}
	first, again := writes[0], writes[1]
	if first.Size != 4 || first.Attempt != 1 || first.OK != 1 || first.Unavailable != 2 || first.Conflict != 1 || first.Failed != 0 {
		t.Fatalf("first write call %+v, want 4 writes: 1 applied, 2 unavailable, 1 conflict", first)
	}
	if again.Size != 2 || again.Attempt != 2 || again.OK != 2 {
		t.Fatalf("resend %+v, want the 2 unavailable writes, applied", again)
	}
	if len(obs.retries) != 1 || obs.retries[0] != (store.Retry{Store: "m", Reason: store.RetryUnavailable, Call: store.CallWrite, Ops: 2}) {
		t.Fatalf("retries %+v, want one resend of 2 writes", obs.retries)
	}
}

// mustRevision returns a revision of a record that no longer has it.
func mustRevision(t *testing.T) store.Revision {
	s, err := store.New(map[string]store.Adapter{"m": memstore.New()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	res, err := s.Do(context.Background(), []store.Op{store.Put(addr("m", "d"), store.Document{JSON: []byte(`{}`)})}, store.WaitApplied)
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	return res[0].Revision
}

// interfering writes to the record behind the merge's back once, between its read and its
// conditional write, so the merge loses one compare-and-set.
type interfering struct {
	driver.Store
	once sync.Once
}

func (f *interfering) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	f.once.Do(func() {
		_, _ = f.Store.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: ws[0].Addr, Doc: driver.Document{JSON: []byte(`{"n":10}`)}}}, o)
	})
	return f.Store.Write(ctx, ws, o)
}

func TestObserverMergeConflictRetry(t *testing.T) {
	obs := &events{}
	add := store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
		var cur, in struct{ N int }
		if c.Current != nil {
			_ = json.Unmarshal(c.Current.JSON, &cur)
		}
		_ = json.Unmarshal(c.Incoming.JSON, &in)
		b, _ := json.Marshal(map[string]int{"n": cur.N + in.N})
		return store.MergeResult{Doc: store.Document{JSON: b}}, nil
	})
	s, err := store.New(map[string]store.Adapter{"m": &interfering{Store: memstore.New()}}, &store.Options{Observer: obs, Merger: add, BackoffBase: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	res, err := s.Do(context.Background(), []store.Op{store.Merge(addr("m", "k"), "add", store.Document{JSON: []byte(`{"n":1}`)})}, store.WaitApplied)
	if err != nil || res[0].Err != nil || string(res[0].Doc.JSON) != `{"n":11}` {
		t.Fatalf("merge: %v %v %s, want n=11 after one retry", err, res[0].Err, res[0].Doc.JSON)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.retries) != 1 || obs.retries[0] != (store.Retry{Store: "m", Reason: store.RetryMergeConflict, Call: store.CallWrite, Ops: 1}) {
		t.Fatalf("retries %+v, want one merge compare-and-set retry", obs.retries)
	}
	conflicts := 0
	for _, c := range obs.calls {
		conflicts += c.Conflict
	}
	if conflicts != 1 {
		t.Fatalf("adapter calls %+v report %d conflicts, want 1", obs.calls, conflicts)
	}
}

// gatedWrites holds every write until release is closed.
type gatedWrites struct {
	driver.Store
	entered chan struct{}
	release chan struct{}
}

func (g *gatedWrites) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.Store.Write(ctx, ws, o)
}

// One batch slot, batches of one, a queue of two: while the first call blocks the slot,
// later calls fill the queue and the rest are refused, each refusal reported; once released,
// every batch is reported with the calls left waiting behind it.
func TestObserverCoalescerQueue(t *testing.T) {
	obs := &events{}
	g := &gatedWrites{Store: memstore.New(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	s, err := store.New(map[string]store.Adapter{"m": g}, &store.Options{Observer: obs,
		Coalesce: store.CoalesceOptions{MaxInFlight: 1, MaxBatch: 1, QueueLimit: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	doc := store.Document{JSON: []byte(`{}`)}
	put := func(k string) store.Result {
		res, err := s.Do(ctx, []store.Op{store.Put(addr("m", k), doc)}, store.WaitApplied)
		if err != nil {
			return store.Result{Err: err}
		}
		return res[0]
	}
	results := make(chan store.Result, 10)
	go func() { results <- put("first") }()
	<-g.entered
	const more = 8
	for i := range more {
		go func() { results <- put(string(rune('a' + i))) }()
	}
	// With the slot busy, at most three of them can wait (one taken by the collector, two
	// queued): the others come back refused at once.
	refused := 0
	for refused < more-3 {
		if r := <-results; errors.Is(r.Err, store.ErrUnavailable) {
			refused++
		} else {
			t.Fatalf("a call finished while the only slot was blocked: %+v", r)
		}
	}
	close(g.release)
	applied := 0
	for range 1 + more - refused {
		switch r := <-results; {
		case r.Err == nil:
			applied++
		case errors.Is(r.Err, store.ErrUnavailable):
			refused++ // the collector was slow to take a call from the queue
		default:
			t.Fatalf("a waiting call: %v", r.Err)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.full) != refused {
		t.Fatalf("%d QueueFull reports for %d refused calls", len(obs.full), refused)
	}
	sum, maxWaiting := 0, 0
	for _, b := range obs.batches {
		sum += b.Size
		maxWaiting = max(maxWaiting, b.Waiting)
	}
	if sum != applied || len(obs.batches) != applied {
		t.Fatalf("batches %+v cover %d calls, want %d batches of one", obs.batches, sum, applied)
	}
	if maxWaiting != 2 {
		t.Fatalf("batches %+v: the most calls waiting behind one is %d, want the full queue, 2", obs.batches, maxWaiting)
	}
}
