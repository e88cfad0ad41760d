package searchstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/privtest"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/searchstore"
)

// TestPrivilegesRecordStore proves docs/privileges.md's record store row through a
// store.Service, as applications use it, on the secured servers: with exactly the role
// (internal/privtest), Get, Put, Merge and Delete work over TLS; with each privilege of it
// removed alone, the operations that need it fail with the permission kind naming the action
// (not retried, not internal) while the others still work.
func TestPrivilegesRecordStore(t *testing.T) {
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) {
		role := privtest.Pick(s, privtest.ESRecordStore, privtest.OSRecordStore)
		dataset := estest.UniqueName(t, "h6priv-rs")
		s.Index(t, dataset, `{"settings":{"number_of_shards":1,"number_of_replicas":0}}`)
		s.Must(t, "PUT", "/"+dataset+"/_doc/seed?refresh=true", `{"n":1}`)
		acct := privtest.NewAccount(t, s, "h6-priv-rs", []string{dataset}, role)
		svc := func(t *testing.T) *store.Service {
			a, err := searchstore.NewFromURLs([]string{s.URL}, &searchstore.Options{Username: acct.User, Password: acct.Password, CACert: s.CA})
			if err != nil {
				t.Fatal(err)
			}
			sv, err := store.New(map[string]store.Adapter{"search": a}, &store.Options{
				Coalesce: store.CoalesceOptions{Disabled: true},
				Merger: store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
					var cur, in struct{ N int }
					if c.Current != nil {
						_ = json.Unmarshal(c.Current.JSON, &cur)
					}
					_ = json.Unmarshal(c.Incoming.JSON, &in)
					d, err := store.NewDocument(map[string]int{"n": cur.N + in.N})
					return store.MergeResult{Action: store.MergeWrite, Doc: d}, err
				})})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sv.Close(context.Background()) })
			return sv
		}
		at := func(key string) store.Address {
			return store.Address{Store: "search", Namespace: "n", Dataset: dataset, Key: store.StringKey(key)}
		}
		doc := func(n int) store.Document {
			d, err := store.NewDocument(map[string]int{"n": n})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		errOf := func(r store.Result, err error) error {
			if err != nil {
				return err
			}
			return r.Err
		}

		t.Run("exactly the role", func(t *testing.T) {
			sv, ctx := svc(t), ctxOf(t)
			if r, err := sv.Put(ctx, at("k"), doc(1)); errOf(r, err) != nil || r.Outcome != store.Created {
				t.Fatalf("put: %+v %v", r, err)
			}
			if r, err := sv.Merge(ctx, at("k"), "add", doc(2)); errOf(r, err) != nil {
				t.Fatalf("merge: %+v %v", r, err)
			}
			r, err := sv.Get(ctx, at("k"))
			if errOf(r, err) != nil || r.Outcome != store.Found || !strings.Contains(string(r.Doc.JSON), `"n":3`) {
				t.Fatalf("get after the merge: %+v %v", r, err)
			}
			if r, err := sv.Delete(ctx, at("k")); errOf(r, err) != nil || r.Outcome != store.Deleted {
				t.Fatalf("delete: %+v %v", r, err)
			}
			if r, err := sv.Get(ctx, at("k")); errOf(r, err) != nil || r.Outcome != store.Absent {
				t.Fatalf("get after the delete: %+v %v", r, err)
			}
		})

		type removal struct {
			privilege string
			read      bool // Get fails (and Merge), else Put (and Merge, Delete)
			action    string
		}
		cases := []removal{
			{"read", true, "indices:data/read/mget"},
			{"write", false, "indices:data/write/bulk"},
			{"view_index_metadata", false, "indices:admin/get"},
		}
		if s.OpenSearch() {
			cases = []removal{
				{"indices:data/read/mget", true, "indices:data/read/mget"},
				{"indices:data/write/bulk", false, "indices:data/write/bulk"},
				{"read", true, "indices:data/read/mget[shard]"},
				{"write", false, "indices:data/write/bulk[s]"},
				{"indices:admin/get", false, "indices:admin/get"},
			}
		}
		for _, c := range cases {
			t.Run("without "+strings.ReplaceAll(c.privilege, "/", "_"), func(t *testing.T) {
				acct.Set(t, role.Without(c.privilege))
				t.Cleanup(func() { acct.Set(t, role) })
				sv, ctx := svc(t), ctxOf(t)
				// Both engines apply a changed role to the next request; should a cache lag
				// behind on a loaded machine, the refusal is waited for (bounded).
				var failed, other, mergeErr error
				for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
					getErr := errOf(sv.Get(ctx, at("seed")))
					putErr := errOf(sv.Put(ctx, at("p"), doc(1)))
					mergeErr = errOf(sv.Merge(ctx, at("seed"), "add", doc(1)))
					failed, other = putErr, getErr
					if c.read {
						failed, other = getErr, putErr
					}
					if (store.KindOf(failed) == store.KindPermissionDenied && store.KindOf(mergeErr) == store.KindPermissionDenied) || time.Now().After(deadline) {
						break
					}
				}
				for what, err := range map[string]error{"the operation": failed, "merge": mergeErr} {
					if store.KindOf(err) != store.KindPermissionDenied || store.KindOf(err).Retryable() ||
						!strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), c.action) {
						t.Fatalf("%s without %s: %v (kind %v), want permission denied naming %s", what, c.privilege, err, store.KindOf(err), c.action)
					}
				}
				if other != nil {
					t.Fatalf("without %s, the operation that does not need it failed: %v", c.privilege, other)
				}
			})
		}
	})
}
