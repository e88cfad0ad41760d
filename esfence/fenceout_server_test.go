package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// TestFenceOutTakeover plays a takeover on both engines with two Fences as two processes, each
// with its own connection pool to ONE sqlstate store on the shared PostgreSQL, each on the view
// fenced by its lease's epoch. A (epoch 1) claims tables in every state a takeover meets -- a
// reindex in progress (two generations written), a legacy index, a switched table with a
// retired generation, a table whose index was deleted -- and writes; its lease expires (short
// ttl) and B acquires it (epoch 2). B's first FenceOut is cut between its pending records and
// its _aliases request: nothing is rotated, A still writes. B's second FenceOut completes: one
// _aliases request rotates every write alias. Then A's writes through its old aliases are
// refused by the cluster (require_alias; a delete auto-creates nothing), A's claims, claim
// round and FenceOut fail with ErrNotLeader without any _aliases request, and B claims every
// table and writes. Each index then holds exactly what B wrote over what A wrote before the
// takeover, document by document.
func TestFenceOutTakeover(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx := context.Background()
	engines(t, func(t *testing.T, s *server) {
		schema := pgTestSchema(t, dsn)
		storeA, storeB := openPGStore(t, dsn, schema), openPGStore(t, dsn, schema) // two processes
		const ttl = time.Second
		aTransport := &countingTransport{next: s.Transport}
		opened := 0
		newFence := func(v statestore.Store) *Fence {
			tp := esapi.Transport(aTransport)
			if opened++; opened > 1 {
				tp = s.Transport // B's
			}
			f, err := New(tp, v, &Options{Timeout: estest.CallTimeout})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		// A acquires through its own store, B through its own: newTakeover takes one
		// leaser, so B's Acquire and view go through a leaser that switches stores once A's
		// scene is built.
		leaser := &switchingLeaser{Leaser: storeA}
		tk := newTakeover(t, leaser, s.dest, newFence,
			func(name string) { s.OK(t, esapi.IndicesDeleteRequest{Index: []string{name}}) },
			ttl, func() {
				leaser.Leaser = storeB
				deadline := time.Now().Add(time.Minute)
				for {
					l, err := storeB.ReadLease(ctx, s.dest(partLive).Pipeline)
					if err == nil && !l.Held() {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("A's lease of ttl %v still held after a minute: %+v, %v", ttl, l, err)
					}
					time.Sleep(100 * time.Millisecond)
				}
			})

		// A writes every index it holds, before the takeover reaches the cluster: doc "keep"
		// (B overwrites it), doc "gone" (B deletes it), doc "a-only" (nobody touches it again).
		want := map[string]map[string]string{} // index -> id -> k
		put := func(alias, op, id, k string) estest.BulkItem {
			t.Helper()
			s.version++
			lines := []any{map[string]any{op: map[string]any{"_index": alias, "_id": id, "version": s.version, "version_type": "external"}}}
			if op == "index" {
				lines = append(lines, map[string]any{"k": k})
			}
			_, items := s.Bulk(t, esapi.BulkRequest{RequireAlias: ptr(true)}, lines...)
			if len(items) != 1 {
				t.Fatalf("bulk answer with %d items", len(items))
			}
			return items[0]
		}
		for index, alias := range tk.aliases {
			want[index] = map[string]string{}
			for _, id := range []string{"keep", "gone", "a-only"} {
				if it := put(alias, "index", id, "a"); it.Error != nil {
					t.Fatalf("A's write to %s: %+v", index, it.Error)
				}
				want[index][id] = "a"
			}
		}

		// B's FenceOut cut short after two pending records.
		calls := 0
		tk.b.afterPending = func(string) error {
			if calls++; calls == 2 {
				return errCrash
			}
			return nil
		}
		if _, err := tk.b.FenceOut(ctx, tk.pipeline); !errors.Is(err, errCrash) {
			t.Fatalf("FenceOut cut short: %v", err)
		}
		tk.b.afterPending = nil
		for index, alias := range tk.aliases {
			if it := put(alias, "index", "a-late", "a"); it.Error != nil {
				t.Fatalf("A's write to %s after a FenceOut that rotated nothing: %+v", index, it.Error)
			}
			want[index]["a-late"] = "a"
		}

		rep, err := tk.b.FenceOut(ctx, tk.pipeline)
		if err != nil {
			t.Fatal(err)
		}
		tk.wantReport(t, rep)

		// A, resumed: every write through its aliases is refused by the cluster.
		for _, alias := range tk.aliases {
			estest.WantItemError(t, "A's overwrite through "+alias, put(alias, "index", "keep", "stale"),
				http.StatusNotFound, "index_not_found_exception", "require_alias")
			estest.WantItemError(t, "A's delete through "+alias, put(alias, "delete", "a-only", ""),
				http.StatusNotFound, "index_not_found_exception", "forbids automatic creation")
			if s.IndexExists(t, alias) {
				t.Fatalf("A's delete auto-created %s", alias)
			}
		}
		aTransport.reset()
		tk.wantOldActiveRefused(t, func() int {
			aTransport.mu.Lock()
			defer aTransport.mu.Unlock()
			return aTransport.aliases
		})

		// B claims every table and writes: "keep" overwritten, "gone" deleted.
		fresh := tk.bClaims(t, s.dest)
		if len(fresh) != len(tk.aliases) {
			t.Fatalf("B claimed %d indices, A held %d", len(fresh), len(tk.aliases))
		}
		for index, alias := range fresh {
			if it := put(alias, "index", "keep", "b"); it.Error != nil || it.Index != index {
				t.Fatalf("B's write to %s: %+v (%+v)", index, it, it.Error)
			}
			want[index]["keep"] = "b"
			if it := put(alias, "delete", "gone", ""); it.Error != nil || it.Result != "deleted" {
				t.Fatalf("B's delete in %s: %+v (%+v)", index, it, it.Error)
			}
			delete(want[index], "gone")
		}

		// Document by document.
		for index, docs := range want {
			s.OK(t, esapi.IndicesRefreshRequest{Index: []string{index}})
			got := map[string]string{}
			var res struct {
				Hits struct {
					Hits []struct {
						ID     string          `json:"_id"`
						Source json.RawMessage `json:"_source"`
					} `json:"hits"`
				} `json:"hits"`
			}
			s.OK(t, esapi.SearchRequest{Index: []string{index}, Size: ptr(100)}).Decode(t, &res)
			for _, h := range res.Hits.Hits {
				var src struct {
					K string `json:"k"`
				}
				if err := json.Unmarshal(h.Source, &src); err != nil {
					t.Fatal(err)
				}
				got[h.ID] = src.K
			}
			if len(got) != len(docs) {
				t.Fatalf("%s holds %v, want %v", index, got, docs)
			}
			for id, k := range docs {
				if got[id] != k {
					t.Fatalf("%s: document %s is %q, want %q (all: %v)", index, id, got[id], k, got)
				}
			}
		}
		if ids := slices.Sorted(maps.Keys(want)); !slices.Equal(ids, slices.Sorted(maps.Keys(fresh))) {
			t.Fatalf("compared %v", ids)
		}
	})
}

// switchingLeaser is the leaser of the scene: A's store until the scene switches it to B's.
type switchingLeaser struct{ statestore.Leaser }
