package searchtest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// The fake answers alike over HTTP and in-process, and plays what its users rely on:
// creation with aliases, versioned writes through an alias only under require_alias, an
// atomic alias rotation that fails when must_exist does not hold, per-call faults.
func TestClusterProtocol(t *testing.T) {
	c := searchtest.New(t, nil)
	ctx := context.Background()
	for name, tp := range map[string]esapi.Transport{"http": c.Client(t), "in-process": c} {
		t.Run(name, func(t *testing.T) {
			do := func(req esapi.Request) search.Answer {
				t.Helper()
				a, err := search.Do(ctx, tp, req)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			idx := "i-" + strings.ReplaceAll(name, "-", "")
			if a := do(esapi.IndicesCreateRequest{Index: idx, Body: strings.NewReader(`{"aliases":{"w1-` + idx + `":{}}}`)}); !a.OK() {
				t.Fatalf("create: %d %s", a.Status, a.Body)
			}
			yes := true
			bulk := func(target string, version int) string {
				a := do(esapi.BulkRequest{RequireAlias: &yes, Body: strings.NewReader(`{"index":{"_index":"` + target + `","_id":"1","version":` +
					strings.Repeat("1", version) + `,"version_type":"external"}}` + "\n{\"v\":1}\n")})
				return string(a.Body)
			}
			if got := bulk(idx, 1); !strings.Contains(got, `"status":404`) {
				t.Fatalf("require_alias through the index name: %s", got)
			}
			if got := bulk("w1-"+idx, 2); !strings.Contains(got, `"status":201`) {
				t.Fatalf("through the alias: %s", got)
			}
			if got := bulk("w1-"+idx, 1); !strings.Contains(got, `"status":409`) {
				t.Fatalf("a stale version: %s", got)
			}
			rotate := `{"actions":[{"remove":{"index":"` + idx + `","alias":"w1-` + idx + `","must_exist":true}},{"add":{"index":"` + idx + `","alias":"w2-` + idx + `"}}]}`
			if a := do(esapi.IndicesUpdateAliasesRequest{Body: strings.NewReader(rotate)}); !a.OK() {
				t.Fatalf("rotate: %d %s", a.Status, a.Body)
			}
			if a := do(esapi.IndicesUpdateAliasesRequest{Body: strings.NewReader(rotate)}); a.Status != http.StatusNotFound || a.Error().Type != "aliases_not_found_exception" {
				t.Fatalf("a second rotation: %d %s", a.Status, a.Body)
			}
			if ix := c.Index(idx); len(ix.Aliases) != 1 || !ix.Aliases["w2-"+idx] || ix.Docs["1"].Version != 11 {
				t.Fatalf("index %+v", ix)
			}
		})
	}
	calls := c.Count("_bulk")
	c.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		if r.Endpoint == "_bulk" && r.Call == calls+1 {
			return searchtest.ErrorAnswer(503, "injected")
		}
		return nil
	})
	if a, _ := search.Do(ctx, c, esapi.BulkRequest{Body: strings.NewReader("")}); a.Status != 503 {
		t.Fatalf("the injected call: %d", a.Status)
	}
	if a, _ := search.Do(ctx, c, esapi.BulkRequest{Body: strings.NewReader("")}); a.Status != 200 {
		t.Fatalf("the call after it: %d", a.Status)
	}
}
