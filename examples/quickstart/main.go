// Command quickstart runs the store layer on its embedded default -- the in-memory adapter, no
// servers -- with the Lua merge engine, and shows each kind of operation: a put, a read, a
// conditional put that loses to a stale revision, then one batch (one Do call) with a Lua
// merge, a put whose precondition fails on its own while the others apply, and a read; last a
// delete and a read of the absent record.
//
//	make quickstart   (or: cd examples && go run ./quickstart)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/tributary-dev/tributary/luamerge"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.SetFlags(0)
		log.Fatal(err)
	}
}

// addVisits is the merge program, in Lua: it adds the incoming visit count to the stored one
// (or creates the record). It is a pure function of its inputs, because the store may run it
// more than once.
const addVisits = `return function(current, incoming, context)
  if current == nil then return incoming end
  current.visits = (current.visits or 0) + incoming.visits
  return current
end`

func run(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	engine, err := luamerge.New(nil) // the Lua merge engine: sandboxed, limits by default
	if err != nil {
		return err
	}
	s, err := store.New(map[string]store.Adapter{"main": memstore.New()}, &store.Options{Merger: engine})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	ada := store.Address{Store: "main", Namespace: "crm", Dataset: "people", Key: store.StringKey("ada")}

	// One operation per call: one Result, one error.
	doc, err := store.NewDocument(map[string]any{"name": "Ada", "visits": 1})
	if err != nil {
		return err
	}
	put, err := s.Put(ctx, ada, doc, store.IfAbsent())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "put:              %v\n", put.Outcome)
	read, err := s.Get(ctx, ada)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "read:             %v %s\n", read.Outcome, read.Doc.JSON)

	// A batch: one Result per operation, in order. The put's revision is stale once the merge
	// has run, so that put fails -- alone: the merge and the read still apply, and Do's own
	// error stays nil.
	inc, _ := store.NewDocument(map[string]any{"visits": 41})
	results, err := s.Do(ctx, []store.Op{
		store.Merge(ada, addVisits, inc),
		store.Put(ada, doc).WithPrecondition(store.IfRevision(put.Revision)),
		store.Read(ada),
	}, store.WaitApplied)
	if err != nil {
		return err
	}
	for i, r := range results {
		switch {
		case errors.Is(r.Err, store.ErrConflict):
			fmt.Fprintf(out, "batch[%d]:         conflict (stale revision)\n", i)
		case r.Err != nil:
			return r.Err
		case r.Doc.JSON != nil:
			fmt.Fprintf(out, "batch[%d]:         %v %s\n", i, r.Outcome, r.Doc.JSON)
		default:
			fmt.Fprintf(out, "batch[%d]:         %v\n", i, r.Outcome)
		}
	}

	// A missing record is no error: its outcome is Absent.
	del, err := s.Delete(ctx, ada)
	if err != nil {
		return err
	}
	gone, err := s.Get(ctx, ada)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "delete, read:     %v, %v\n", del.Outcome, gone.Outcome)
	return nil
}
