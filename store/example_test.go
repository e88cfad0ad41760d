package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

// A batch runs operations on one record in request order and returns one result per operation.
func ExampleService_Do() {
	ctx := context.Background()
	s, _ := store.New(map[string]store.Adapter{"main": memstore.New()}, nil)
	defer s.Close(ctx)

	k := store.Address{Store: "main", Namespace: "shop", Dataset: "carts", Key: store.Int64Key(42)}
	res, err := s.Do(ctx, []store.Op{
		store.Read(k),
		store.Put(k, store.Document{JSON: []byte(`{"items":1}`)}),
		store.Read(k),
		store.Delete(k),
	}, store.WaitApplied)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		if r.Doc.JSON != nil {
			fmt.Println(r.Outcome, string(r.Doc.JSON))
		} else {
			fmt.Println(r.Outcome)
		}
	}
	// Output:
	// absent
	// created
	// found {"items":1}
	// deleted
}

// A write conditioned on a revision fails with ErrConflict once the record has moved on.
func ExampleIfRevision() {
	ctx := context.Background()
	s, _ := store.New(map[string]store.Adapter{"main": memstore.New()}, nil)
	defer s.Close(ctx)

	k := store.Address{Store: "main", Namespace: "crm", Dataset: "people", Key: store.StringKey("ada")}
	put := func(doc string, p store.Precondition) store.Result {
		res, _ := s.Do(ctx, []store.Op{store.Put(k, store.Document{JSON: []byte(doc)}).WithPrecondition(p)}, store.WaitApplied)
		return res[0]
	}
	first := put(`{"v":1}`, store.Precondition{})
	second := put(`{"v":2}`, store.IfRevision(first.Revision))
	stale := put(`{"v":3}`, store.IfRevision(first.Revision))
	fmt.Println(second.Outcome, errors.Is(stale.Err, store.ErrConflict))
	// Output: updated true
}

// A merge reads the record, runs the Merger and writes the result conditionally, retrying when
// another writer got there first.
func ExampleMerge() {
	ctx := context.Background()
	counter := store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
		var cur struct{ N int }
		if c.Current != nil {
			_ = json.Unmarshal(c.Current.JSON, &cur)
		}
		b, _ := json.Marshal(map[string]int{"n": cur.N + 1})
		return store.MergeResult{Doc: store.Document{JSON: b}}, nil
	})
	s, _ := store.New(map[string]store.Adapter{"main": memstore.New()}, &store.Options{Merger: counter})
	defer s.Close(ctx)

	k := store.Address{Store: "main", Namespace: "web", Dataset: "hits", Key: store.StringKey("/home")}
	for range 3 {
		_, _ = s.Do(ctx, []store.Op{store.Merge(k, "count", store.Document{JSON: []byte(`{}`)})}, store.WaitApplied)
	}
	res, _ := s.Do(ctx, []store.Op{store.Read(k)}, store.WaitApplied)
	fmt.Println(string(res[0].Doc.JSON))
	// Output: {"n":3}
}
