// Command quickstart runs the store layer on its embedded default -- the in-memory adapter, no
// servers -- and shows each kind of operation: a put, a conditional put that loses to a stale
// revision, a merge, a read and a delete.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.SetFlags(0)
		log.Fatal(err)
	}
}

// addVisits is the merge: it adds the incoming visit count to the stored one. It is a pure
// function of its inputs, because the store may run it more than once.
func addVisits(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	var cur, in struct {
		Name   string `json:"name"`
		Visits int64  `json:"visits"`
	}
	if c.Current != nil {
		if err := json.Unmarshal(c.Current.JSON, &cur); err != nil {
			return store.MergeResult{}, err
		}
	}
	if err := json.Unmarshal(c.Incoming.JSON, &in); err != nil {
		return store.MergeResult{}, err
	}
	cur.Visits += in.Visits
	b, err := json.Marshal(cur)
	return store.MergeResult{Doc: store.Document{JSON: b}}, err
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := store.New(map[string]store.Adapter{"main": memstore.New()}, &store.Options{Merger: store.MergeFunc(addVisits)})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	out := os.Stdout
	ada := store.Address{Store: "main", Namespace: "crm", Dataset: "people", Key: store.StringKey("ada")}

	doc, err := store.NewDocument(map[string]any{"name": "Ada", "visits": 1, "since": "2026-11-30T09:00:00Z"}, "/since")
	if err != nil {
		return err
	}
	put, err := one(ctx, s, store.Put(ada, doc))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "put:              %v\n", put.Outcome)

	newer, _ := store.NewDocument(map[string]any{"name": "Ada Lovelace", "visits": 1})
	upd, err := one(ctx, s, store.Put(ada, newer).WithPrecondition(store.IfRevision(put.Revision)))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "conditional put:  %v\n", upd.Outcome)

	// The first put's revision is stale now: the store refuses, on every backend, with ErrConflict.
	_, err = one(ctx, s, store.Put(ada, doc).WithPrecondition(store.IfRevision(put.Revision)))
	fmt.Fprintf(out, "stale put:        conflict=%v\n", errors.Is(err, store.ErrConflict))

	inc, _ := store.NewDocument(map[string]any{"visits": 41})
	merged, err := one(ctx, s, store.Merge(ada, "add-visits", inc))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "merge:            %v %s\n", merged.Outcome, merged.Doc.JSON)

	read, err := one(ctx, s, store.Read(ada))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "read:             %v %s\n", read.Outcome, read.Doc.JSON)

	del, err := one(ctx, s, store.Delete(ada))
	if err != nil {
		return err
	}
	gone, err := one(ctx, s, store.Read(ada))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "delete, read:     %v, %v\n", del.Outcome, gone.Outcome)
	return nil
}

// one runs a single operation and returns its result, with the operation's error as the error.
func one(ctx context.Context, s store.Store, op store.Op) (store.Result, error) {
	res, err := s.Do(ctx, []store.Op{op}, store.WaitApplied)
	if err != nil {
		return store.Result{}, err
	}
	return res[0], res[0].Err
}
