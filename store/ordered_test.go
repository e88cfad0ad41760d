package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// putLog records the document of every put the backend applied.
type putLog struct {
	driver.Store
	mu   sync.Mutex
	docs []string
}

func (p *putLog) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	res, err := p.Store.Write(ctx, ws, o)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range ws {
		if err == nil && res[i].Err == nil && w.Kind == driver.Put {
			p.docs = append(p.docs, string(w.Doc.JSON))
		}
	}
	return res, err
}

func queued(ops ...store.Op) []store.QueuedOp {
	at := time.Now()
	q := make([]store.QueuedOp, len(ops))
	for i, op := range ops {
		q[i] = store.QueuedOp{Op: op, AcceptedAt: at}
	}
	return q
}

func applyInOrder(t *testing.T, s *store.Service, ops ...store.Op) []store.Result {
	t.Helper()
	res, err := s.ApplyInOrder(context.Background(), queued(ops...))
	if err != nil {
		t.Fatalf("ApplyInOrder: %v", err)
	}
	return res
}

func heldBack(r store.Result) bool {
	return errors.Is(r.Err, store.ErrHeldBack) && errors.Is(r.Err, store.ErrUnavailable)
}

// A queue worker's fetch of many merges on a few hot records: one read call and one write
// call, every merge applied in queue order.
func TestApplyInOrderCombinesAHotRecord(t *testing.T) {
	c := &counting{Store: memstore.New()}
	s := newCombineService(t, c, nil)
	var ops []store.Op
	for i := range 300 {
		ops = append(ops, store.Merge(addr("m", fmt.Sprint("hot", i%3)), "inc", store.Document{JSON: []byte(`{}`)}))
	}
	for i, r := range applyInOrder(t, s, ops...) {
		if want := fmt.Sprintf(`{"n":%d}`, i/3+1); r.Err != nil || string(r.Doc.JSON) != want {
			t.Fatalf("merge %d: %+v (doc %s), want %s", i, r, r.Doc.JSON, want)
		}
	}
	if r, w := c.reads.Load(), c.writes.Load(); r != 1 || w != 1 {
		t.Fatalf("%d read and %d write calls, want 1 and 1: a hot record costs one round, not one per queued merge", r, w)
	}
}

// A failing operation holds back the later operations of its record only; what came before
// it is applied; a put of the chain is stored on its own, so every state a client wrote
// whole reaches the backend.
func TestApplyInOrderHoldsBackBehindAFailure(t *testing.T) {
	c := &counting{Store: memstore.New()}
	s := newCombineService(t, c, nil)
	doc := store.Document{JSON: []byte(`{}`)}
	a, b, p := addr("m", "a"), addr("m", "b"), addr("m", "p")
	res := applyInOrder(t, s,
		store.Merge(a, "inc", doc),
		store.Merge(b, "inc", doc),
		store.Merge(a, "fail", doc), // a program failing on its input: permanent
		store.Merge(b, "inc", doc),
		store.Merge(a, "inc", doc),
		store.Put(p, store.Document{JSON: []byte(`{"v":1}`)}),
		store.Put(p, store.Document{JSON: []byte(`{"v":2}`)}).WithPrecondition(store.IfAbsent()), // fails: p exists
		store.Put(p, store.Document{JSON: []byte(`{"v":3}`)}),
		store.Merge(a, "inc", doc),
	)
	if res[0].Err != nil || res[1].Err != nil || res[3].Err != nil || res[5].Err != nil {
		t.Fatalf("the operations before the failures, and of record b: %+v", res[:6])
	}
	if !errors.Is(res[2].Err, store.ErrInvalid) {
		t.Fatalf("the failing program: %v, want invalid", res[2].Err)
	}
	if !errors.Is(res[6].Err, store.ErrAlreadyExists) {
		t.Fatalf("the if-absent put of an existing record: %v, want already exists", res[6].Err)
	}
	for _, i := range []int{4, 7, 8} {
		if !heldBack(res[i]) {
			t.Fatalf("operation %d after a failure on its record: %v, want held back (unavailable)", i, res[i].Err)
		}
	}
	got := mustDo(t, s, store.Read(a), store.Read(b), store.Read(p))
	if string(got[0].Doc.JSON) != `{"n":1}` || string(got[1].Doc.JSON) != `{"n":2}` || string(got[2].Doc.JSON) != `{"v":1}` {
		t.Fatalf("records a, b, p: %s %s %s; want n=1, n=2, v=1", got[0].Doc.JSON, got[1].Doc.JSON, got[2].Doc.JSON)
	}

	// An operation failing validation holds back its record's later operations as well.
	bad := store.Put(addr("m", "q"), store.Document{JSON: []byte(`[1]`)})
	res = applyInOrder(t, s, bad, store.Put(addr("m", "q"), store.Document{JSON: []byte(`{}`)}), store.Merge(b, "inc", doc))
	if !errors.Is(res[0].Err, store.ErrInvalid) || !heldBack(res[1]) || res[2].Err != nil {
		t.Fatalf("an invalid put, then a put and another record's merge: %v, %v, %v", res[0].Err, res[1].Err, res[2].Err)
	}
}

// A long chain on one hot record whose first operation fails: every later one is held back
// in one pass down the chain, not one nested settle per operation.
func TestApplyInOrderHoldsBackALongChain(t *testing.T) {
	s := newCombineService(t, memstore.New(), nil)
	doc := store.Document{JSON: []byte(`{}`)}
	a := addr("m", "long")
	ops := []store.Op{store.Merge(a, "fail", doc)}
	for range 20000 {
		ops = append(ops, store.Merge(a, "inc", doc))
	}
	res := applyInOrder(t, s, ops...)
	if !errors.Is(res[0].Err, store.ErrInvalid) {
		t.Fatalf("the failing program: %v, want invalid", res[0].Err)
	}
	for i, r := range res[1:] {
		if !heldBack(r) {
			t.Fatalf("operation %d after the failure: %v, want held back", i+1, r.Err)
		}
	}
}

// Puts of one record in one call: each is its own write, in order (merges after a put
// combine with it).
func TestApplyInOrderStoresEveryPut(t *testing.T) {
	rec := &putLog{Store: memstore.New()}
	s := newCombineService(t, rec, nil)
	k := addr("m", "k")
	var ops []store.Op
	for i := range 5 {
		ops = append(ops, store.Put(k, store.Document{JSON: fmt.Appendf(nil, `{"n":%d}`, i*10)}))
		ops = append(ops, store.Merge(k, "inc", store.Document{JSON: []byte(`{}`)}))
	}
	for i, r := range applyInOrder(t, s, ops...) {
		if r.Err != nil {
			t.Fatalf("operation %d: %v", i, r.Err)
		}
	}
	want := []string{`{"n":1}`, `{"n":11}`, `{"n":21}`, `{"n":31}`, `{"n":41}`}
	if fmt.Sprint(rec.docs) != fmt.Sprint(want) {
		t.Fatalf("writes %v, want %v: one per put, the merge after it combined", rec.docs, want)
	}
}

// A write that fails retryably fails what it carried; the rest of the chain is held back.
func TestApplyInOrderHoldsBackBehindAnUnavailableWrite(t *testing.T) {
	f := &flaky{Store: memstore.New()}
	f.failures.Store(1)
	s := newCombineService(t, f, &store.Options{RetryAttempts: 1})
	k := addr("m", "k")
	doc := store.Document{JSON: []byte(`{}`)}
	res := applyInOrder(t, s, store.Put(k, doc), store.Put(k, doc), store.Merge(k, "inc", doc))
	if !errors.Is(res[0].Err, store.ErrUnavailable) || heldBack(res[0]) || !heldBack(res[1]) || !heldBack(res[2]) {
		t.Fatalf("results %v, %v, %v: want unavailable, then held back twice", res[0].Err, res[1].Err, res[2].Err)
	}
	if r := mustDo(t, s, store.Read(k))[0]; r.Outcome != store.Absent {
		t.Fatalf("the record after a failed first write: %v, want absent", r.Outcome)
	}
}
