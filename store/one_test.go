package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

// The single-operation calls: one Result and one error, a missing record an outcome, the
// operation's failure the error, options for preconditions and completion.
func TestSingleOperationCalls(t *testing.T) {
	ctx := context.Background()
	svc := memstore.NewService(t, nil, "main")
	a := addr("main", "k")

	res, err := svc.Get(ctx, a)
	if err != nil || res.Outcome != store.Absent {
		t.Fatalf("get of a missing record: %+v %v, want Absent and no error", res, err)
	}
	res, err = svc.Put(ctx, a, jdoc(`{"n":1}`), store.IfAbsent())
	if err != nil || res.Outcome != store.Created || res.Revision.IsZero() {
		t.Fatalf("put if absent: %+v %v", res, err)
	}
	rev := res.Revision
	if _, err := svc.Put(ctx, a, jdoc(`{"n":2}`), store.IfAbsent()); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second put if absent: %v, want ErrAlreadyExists", err)
	}
	if res, err = svc.Put(ctx, a, jdoc(`{"n":3}`), store.IfRevision(rev), store.WaitVisible); err != nil || res.Outcome != store.Updated {
		t.Fatalf("put at the read revision: %+v %v", res, err)
	}
	if _, err := svc.Delete(ctx, a, store.IfRevision(rev)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete at a stale revision: %v, want ErrConflict", err)
	}
	if res, err = svc.Get(ctx, a); err != nil || res.Outcome != store.Found || string(res.Doc.JSON) != `{"n":3}` {
		t.Fatalf("get: %+v %v", res, err)
	}
	if res, err = svc.Delete(ctx, a); err != nil || res.Outcome != store.Deleted {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if res, err = svc.Delete(ctx, a); err != nil || res.Outcome != store.Absent {
		t.Fatalf("delete of a missing record: %+v %v", res, err)
	}
	// No Merger configured: the operation's refusal is the error, of the request as a whole.
	var re *store.RequestError
	if _, err := svc.Merge(ctx, a, "program", jdoc(`{}`)); !errors.As(err, &re) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("merge without a Merger: %v, want a RequestError of ErrInvalid", err)
	}
	// Accepted mode without a queue fails the operation, retryable.
	if _, err := svc.Put(ctx, a, jdoc(`{}`), store.ReturnAccepted); !errors.Is(err, store.ErrNoQueue) || !store.KindOf(err).Retryable() {
		t.Fatalf("accepted put without a queue: %v, want ErrNoQueue, retryable", err)
	}
	var re2 *store.RequestError
	if _, err := svc.Put(ctx, a, jdoc(`{}`), store.ReturnAccepted); errors.As(err, &re2) {
		t.Fatalf("accepted put without a queue refused the request: %v", err)
	}
	if _, err := svc.Get(ctx, addr("elsewhere", "k")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("get from an unknown store: %v, want ErrInvalid", err)
	}
}

func TestSingleOperationMerge(t *testing.T) {
	ctx := context.Background()
	svc := memstore.NewService(t, &store.Options{Merger: store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
		return store.MergeResult{Doc: c.Incoming}, nil
	})})
	a := addr("main", "m")
	res, err := svc.Merge(ctx, a, "keep incoming", jdoc(`{"v":1}`))
	if err != nil || res.Outcome != store.Created || string(res.Doc.JSON) != `{"v":1}` {
		t.Fatalf("merge: %+v %v", res, err)
	}
}
