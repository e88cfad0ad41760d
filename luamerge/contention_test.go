package luamerge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/storetest"
)

// increment is the contention program: it adds incoming.by to the stored counter.
const increment = `return function(current, incoming, context)
  if current == nil then return {n = incoming.by} end
  current.n = current.n + incoming.by
  return current
end`

// luaBackends are the stores the Lua merge tests run on. Each entry gives an adapter and an
// existing namespace and dataset; server-backed entries skip themselves when their server is
// not configured (see internal/testenv).
type luaBackend struct {
	name    string
	adapter func(t testing.TB) (a store.Adapter, namespace, dataset string)
}

var luaBackends = []luaBackend{
	{"memory", func(t testing.TB) (store.Adapter, string, string) { return memstore.New(), "ns", "ds" }},
}

// The contention test's size: workers goroutines each run each merges on one record.
const contentionWorkers, contentionEach = 8, 25

// contentionBudget is the merge budget of the test services: as long as the test's own bound,
// so the contention test proves that no update is lost between two services, not that the
// merges are fast on a loaded machine (the default budget, 10s, is a production trade-off
// between giving up and waiting).
const contentionBudget = 10 * time.Minute

// newLuaService returns a service over the backend whose merges run in a luamerge Engine.
func newLuaService(t *testing.T, a store.Adapter, coalesce bool) *store.Service {
	t.Helper()
	e := newEngine(t, &Options{MaxInstructions: 100_000})
	s, err := store.New(map[string]store.Adapter{"main": a}, &store.Options{
		Merger:      e,
		MergeBudget: contentionBudget,
		Coalesce:    store.CoalesceOptions{Disabled: !coalesce},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// N goroutines each run M increment merges on one record, concurrently, half through a
// coalescing service and half through a second service over the same adapter (as a second
// process would); the counter must end at exactly N*M.
func TestLuaContention(t *testing.T) {
	for _, b := range luaBackends {
		t.Run(b.name, func(t *testing.T) {
			a, ns, ds := b.adapter(t)
			one := newLuaService(t, a, true)
			two := newLuaService(t, storetest.Shared(a), false)
			// A bound for a broken run, not a speed requirement.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			t.Cleanup(func() {
				_ = two.Close(context.Background())
				_ = one.Close(context.Background())
			})
			addr := store.Address{Store: "main", Namespace: ns, Dataset: ds, Key: store.StringKey(fmt.Sprintf("lua-counter-%d", time.Now().UnixNano()))}
			const workers, each = contentionWorkers, contentionEach
			inc := store.Document{JSON: []byte(`{"by":1}`)}
			var wg sync.WaitGroup
			errs := make(chan error, workers*each)
			for w := range workers {
				svc := one
				if w%2 == 1 {
					svc = two
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						res, err := svc.Do(ctx, []store.Op{store.Merge(addr, increment, inc)}, store.WaitApplied)
						if err == nil {
							err = res[0].Err
						}
						if err != nil {
							errs <- err
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("a merge failed: %v", err)
			}
			res, err := one.Do(ctx, []store.Op{store.Read(addr)}, store.WaitApplied)
			if err != nil || res[0].Err != nil {
				t.Fatal(err, res[0].Err)
			}
			var got struct{ N int }
			if err := json.Unmarshal(res[0].Doc.JSON, &got); err != nil || got.N != workers*each {
				t.Fatalf("counter %s, want %d", res[0].Doc.JSON, workers*each)
			}
		})
	}
}

// A program that fails leaves the record as it was, on every backend.
func TestLuaFailureLeavesRecordUntouched(t *testing.T) {
	for _, b := range luaBackends {
		t.Run(b.name, func(t *testing.T) {
			a, ns, ds := b.adapter(t)
			s := newLuaService(t, a, false)
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			ctx := context.Background()
			addr := store.Address{Store: "main", Namespace: ns, Dataset: ds, Key: store.StringKey(fmt.Sprintf("lua-untouched-%d", time.Now().UnixNano()))}
			// 2^53+1: beyond what a float64 holds, within what every backend stores exactly
			orig := store.Document{JSON: []byte(`{"n":1,"id":9007199254740993}`)}
			put, err := s.Do(ctx, []store.Op{store.Put(addr, orig)}, store.WaitApplied)
			if err != nil || put[0].Err != nil {
				t.Fatal(err, put[0].Err)
			}
			for _, program := range []string{
				fn(`current.n = 2 error("no")`),
				fn(`current.n = 2 current.id = current.id + 1 return current`),
				fn(`current.n = 2 while true do end`),
				fn(`current.n = 2 return {f = function() end}`),
				"return function(",
			} {
				res, err := s.Do(ctx, []store.Op{store.Merge(addr, program, store.Document{JSON: []byte(`{}`)})}, store.WaitApplied)
				if err != nil {
					t.Fatal(err)
				}
				if res[0].Err == nil || store.KindOf(res[0].Err) != store.KindInvalid {
					t.Fatalf("merge of %q: %v, want an invalid-kind error", program, res[0].Err)
				}
			}
			got, err := s.Do(ctx, []store.Op{store.Read(addr)}, store.WaitApplied)
			if err != nil || got[0].Err != nil || string(got[0].Doc.JSON) != string(orig.JSON) || !got[0].Revision.Equal(put[0].Revision) {
				t.Fatalf("record after failed merges: %s (revision %v), want %s (revision %v)", got[0].Doc.JSON, got[0].Revision, orig.JSON, put[0].Revision)
			}
		})
	}
}
