package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

// fakeQueue is a store.Queue in memory: it keeps every batch and answers with answer(b) when
// set; refuse, when set, makes it a QueueChecker refusing the operations it names.
type fakeQueue struct {
	mu      sync.Mutex
	batches []store.AcceptedBatch
	answer  func(b *store.AcceptedBatch) []error
}

func (q *fakeQueue) Enqueue(_ context.Context, b *store.AcceptedBatch) []error {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := *b
	c.Ops, c.Indexes = append([]store.Op(nil), b.Ops...), append([]int(nil), b.Indexes...)
	q.batches = append(q.batches, c)
	if q.answer != nil {
		return q.answer(b)
	}
	return nil
}

// incoming merges by storing the incoming document.
var incoming = store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	return store.MergeResult{Doc: c.Incoming}, nil
})

type checkingQueue struct {
	fakeQueue
	refuse func(op *store.Op) error
}

func (q *checkingQueue) CheckAccepted(op *store.Op) error { return q.refuse(op) }

// TestQueueReceivesOneBatchPerStoreInRequestOrder: the Service hands each store's accepted-mode
// writes of a request to its Queue in one Enqueue call, validated, in request order, with their
// positions in the request, one request id and the request's acceptance time; reads run
// synchronously beside them.
func TestQueueReceivesOneBatchPerStoreInRequestOrder(t *testing.T) {
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	qa, qb := &fakeQueue{}, &fakeQueue{}
	svc := memstore.NewService(t, &store.Options{Now: func() time.Time { return at }, Merger: incoming,
		Queues: map[string]store.Queue{"a": qa, "b": qb}}, "a", "b")
	doc := store.Document{JSON: []byte(`{"x":1}`)}
	ops := []store.Op{
		store.Put(addr("a", "1"), doc),
		store.Delete(addr("b", "1")),
		store.Read(addr("a", "1")),
		store.Merge(addr("a", "2"), "p", doc),
		store.Put(addr("b", "2"), doc).WithPrecondition(store.IfAbsent()),
	}
	res, err := svc.Do(context.Background(), ops, store.ReturnAccepted)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := store.Accepted
		if i == 2 {
			want = store.NotFound // the read ran, and does not see the queued put
		}
		if r.Err != nil || r.Outcome != want {
			t.Fatalf("op %d: %+v, want %v", i, r, want)
		}
	}
	if len(qa.batches) != 1 || len(qb.batches) != 1 {
		t.Fatalf("Enqueue calls: %d and %d, want one per store", len(qa.batches), len(qb.batches))
	}
	ba, bb := qa.batches[0], qb.batches[0]
	if len(ba.RequestID) != 32 || ba.RequestID != bb.RequestID || !ba.AcceptedAt.Equal(at) || !bb.AcceptedAt.Equal(at) {
		t.Fatalf("batches name request %q/%q at %v/%v, want one 32-digit id at %v", ba.RequestID, bb.RequestID, ba.AcceptedAt, bb.AcceptedAt, at)
	}
	if len(ba.Ops) != 2 || ba.Indexes[0] != 0 || ba.Indexes[1] != 3 || ba.Ops[0].Kind != store.OpPut || ba.Ops[1].Kind != store.OpMerge {
		t.Fatalf("store a's batch: %+v, want ops 0 and 3", ba)
	}
	if len(bb.Ops) != 2 || bb.Indexes[0] != 1 || bb.Indexes[1] != 4 || !bb.Ops[1].If.Absent() {
		t.Fatalf("store b's batch: %+v, want ops 1 and 4 with its precondition", bb)
	}
	res2, err := svc.Do(context.Background(), ops[:1], store.ReturnAccepted)
	if err != nil || res2[0].Outcome != store.Accepted {
		t.Fatalf("a second request: %v %+v", err, res2)
	}
	if id := qa.batches[1].RequestID; id == ba.RequestID {
		t.Fatalf("two requests share the request id %s", id)
	}
}

// TestQueueFailures: per-operation errors keep their kinds and fail only their operations; an
// answer of the wrong length fails every operation as internal; a QueueChecker's refusal
// refuses the whole request at validation, and nothing is enqueued.
func TestQueueFailures(t *testing.T) {
	ctx := context.Background()
	doc := store.Document{JSON: []byte(`{"x":1}`)}
	q := &checkingQueue{refuse: func(op *store.Op) error {
		if op.Kind == store.OpMerge {
			return errors.New("merges cannot travel here")
		}
		return nil
	}}
	svc := memstore.NewService(t, &store.Options{Merger: incoming, Queues: map[string]store.Queue{"a": q}}, "a")

	q.answer = func(b *store.AcceptedBatch) []error {
		return []error{nil, &store.Error{Kind: store.KindUnavailable, Err: errors.New("partition offline")}, errors.New("unclassified")}
	}
	res, err := svc.Do(ctx, []store.Op{store.Put(addr("a", "1"), doc), store.Put(addr("a", "2"), doc), store.Delete(addr("a", "3"))}, store.ReturnAccepted)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Accepted || !errors.Is(res[1].Err, store.ErrUnavailable) || !errors.Is(res[2].Err, store.ErrInternal) {
		t.Fatalf("per-operation answers: %+v", res)
	}
	var e *store.Error
	if !errors.As(res[1].Err, &e) || e.Op != store.OpPut || e.Addr != addr("a", "2") {
		t.Fatalf("the failure %v does not name its operation", res[1].Err)
	}

	q.answer = func(*store.AcceptedBatch) []error { return []error{nil} }
	res, err = svc.Do(ctx, []store.Op{store.Put(addr("a", "1"), doc), store.Put(addr("a", "2"), doc)}, store.ReturnAccepted)
	if err != nil || !errors.Is(res[0].Err, store.ErrInternal) || !errors.Is(res[1].Err, store.ErrInternal) {
		t.Fatalf("an answer of the wrong length: %v %+v, want ErrInternal for both", err, res)
	}

	before := len(q.batches)
	_, err = svc.Do(ctx, []store.Op{store.Put(addr("a", "1"), doc), store.Merge(addr("a", "2"), "p", doc)}, store.ReturnAccepted)
	var re *store.RequestError
	if !errors.As(err, &re) || len(re.Items) != 1 || re.Items[0].Index != 1 || !errors.Is(err, store.ErrInvalid) || store.KindOf(err).Retryable() {
		t.Fatalf("a checker's refusal: %v, want a RequestError of kind Invalid for item 1", err)
	}
	if len(q.batches) != before {
		t.Fatal("a refused request was enqueued")
	}
	if _, err := svc.Do(ctx, []store.Op{store.Merge(addr("a", "2"), "p", doc)}, store.WaitApplied); err != nil {
		t.Fatalf("the checker applies to accepted mode only: %v", err)
	}
}

func TestPreconditionAccessors(t *testing.T) {
	rev, err := store.ParseRevision("AAECAwQ")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p            store.Precondition
		zero, absent bool
		rev          store.Revision
	}{
		{store.Precondition{}, true, false, store.Revision{}},
		{store.IfAbsent(), false, true, store.Revision{}},
		{store.IfRevision(rev), false, false, rev},
	} {
		if c.p.IsZero() != c.zero || c.p.Absent() != c.absent || !c.p.Revision().Equal(c.rev) {
			t.Errorf("%+v: IsZero %v Absent %v Revision %v, want %v %v %v", c.p, c.p.IsZero(), c.p.Absent(), c.p.Revision(), c.zero, c.absent, c.rev)
		}
	}
}
