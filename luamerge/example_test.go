package luamerge_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/luamerge"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

// A store whose merges run Lua programs: the program adds visits and stamps the update time;
// untouched members keep their order and the big id stays exact.
func Example() {
	ctx := context.Background()
	engine, err := luamerge.New(nil)
	if err != nil {
		panic(err)
	}
	s, err := store.New(map[string]store.Adapter{"main": memstore.New()}, &store.Options{
		Merger: engine,
		Now:    func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	ada := store.Address{Store: "main", Namespace: "crm", Dataset: "people", Key: store.StringKey("ada")}

	const addVisits = `
return function(current, incoming, context)
  if current == nil then
    current = {name = incoming.name, visits = 0}
  end
  current.visits = current.visits + incoming.visits
  current.updated = json.datetime(context.time)
  return current
end`
	one := func(op store.Op) store.Result {
		res, err := s.Do(ctx, []store.Op{op}, store.WaitApplied)
		if err != nil {
			panic(err)
		}
		return res[0]
	}
	r := one(store.Merge(ada, addVisits, store.Document{JSON: []byte(`{"name":"Ada","visits":1}`)}))
	fmt.Println(r.Outcome, string(r.Doc.JSON), r.Doc.Times)

	one(store.Put(ada, store.Document{JSON: []byte(`{"visits":41,"name":"Ada","id":12345678901234567890}`)}))
	r = one(store.Merge(ada, addVisits, store.Document{JSON: []byte(`{"visits":1}`)}))
	fmt.Println(r.Outcome, string(r.Doc.JSON))

	r = one(store.Merge(ada, "return function(current)\n  current.id = current.id + 1\n  return current\nend", store.Document{JSON: []byte(`{}`)}))
	var pe *luamerge.ProgramError
	fmt.Println(errors.Is(r.Err, store.ErrInvalid), errors.As(r.Err, &pe), pe.Line)
	// Output:
	// created {"name":"Ada","updated":"2026-11-30T09:00:00Z","visits":1} [/updated]
	// updated {"visits":42,"name":"Ada","id":12345678901234567890,"updated":"2026-11-30T09:00:00Z"}
	// true true 2
}
