package smoke

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The same checks run against Elasticsearch 8.19 and OpenSearch 2.19 (both from their Maven
// Central integ-test-zips, see scripts/testenv). Where the engines differ, the check asserts what
// each one really does, so a changed behaviour after an upgrade shows up here first.

func TestSmokeElasticsearch(t *testing.T) {
	url := testenv.Require(t, testenv.ElasticsearchURL)
	t.Parallel()
	runSearchSmoke(t, newSearchServer(t, url, estest.Elasticsearch))
}

func TestSmokeOpenSearch(t *testing.T) {
	url := testenv.Require(t, testenv.OpenSearchURL)
	t.Parallel()
	runSearchSmoke(t, newSearchServer(t, url, estest.OpenSearch))
}

func runSearchSmoke(t *testing.T, s *searchServer) {
	t.Run("product_check", s.checkProductCheck)
	t.Run("create_index_meta_alias", s.checkCreateIndexMetaAlias)
	t.Run("bulk_external_version_require_alias", s.checkBulkExternalRequireAlias)
	t.Run("alias_swap_must_exist", s.checkAliasSwap)
	t.Run("auto_create_index_rule", s.checkAutoCreateIndex)
	t.Run("refresh_wait_for", s.checkRefreshWaitFor)
	t.Run("mget", s.checkMget)
	t.Run("if_seq_no_if_primary_term", s.checkOptimisticConcurrency)
	t.Run("cluster_uuid", s.checkClusterUUID)
	t.Run("scaled_float", s.checkScaledFloat)
	t.Run("gc_deletes_per_index", s.checkGCDeletes)
}

// aliasTargets returns the indices an alias points to (none when it does not exist).
func (s *searchServer) aliasTargets(t *testing.T, alias string) []string {
	t.Helper()
	r := s.Do(t, esapi.IndicesGetAliasRequest{Name: []string{alias}})
	if r.Status == http.StatusNotFound {
		return nil
	}
	if r.Status != http.StatusOK {
		t.Fatalf("GET _alias/%s: status %d: %s", alias, r.Status, r.Body)
	}
	var m map[string]any
	r.Decode(t, &m)
	var out []string
	for idx := range m {
		out = append(out, idx)
	}
	return out
}

// The library dispatches on the client's product check; pin both how it fails on OpenSearch and
// the header-forging workaround, so the library knows what it must do.
func (s *searchServer) checkProductCheck(t *testing.T) {
	health := func(cfg elasticsearch.Config) (int, error) {
		cfg.Addresses = []string{s.URL}
		es, err := elasticsearch.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
		defer cancel()
		res, err := es.Cluster.Health(es.Cluster.Health.WithContext(ctx))
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		return res.StatusCode, nil
	}

	status, err := health(elasticsearch.Config{})
	if s.Engine != estest.OpenSearch {
		if err != nil || status != http.StatusOK {
			t.Fatalf("elasticsearch.Client against Elasticsearch: status %d, err %v", status, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "not Elasticsearch") {
		t.Fatalf("elasticsearch.Client against OpenSearch: status %d, err %v; want the product-check error", status, err)
	}
	status, err = health(elasticsearch.Config{Transport: productHeaderTransport{http.DefaultTransport}})
	if err != nil || status != http.StatusOK {
		t.Fatalf("elasticsearch.Client with forged product header against OpenSearch: status %d, err %v", status, err)
	}
}

// productHeaderTransport marks every answer as coming from Elasticsearch, which is all the
// go-elasticsearch product check looks at.
type productHeaderTransport struct{ next http.RoundTripper }

func (p productHeaderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := p.next.RoundTrip(req)
	if err == nil {
		res.Header.Set("X-Elastic-Product", "Elasticsearch")
	}
	return res, err
}

// One create request carries the mapping _meta and the alias, so an index is never visible
// without both.
func (s *searchServer) checkCreateIndexMetaAlias(t *testing.T) {
	idx, alias := s.name("meta-v1"), s.name("meta")
	meta := map[string]any{"tributary": map[string]any{"schema": "orders", "version": float64(7)}}
	s.CreateIndex(t, idx, map[string]any{
		"mappings": map[string]any{"_meta": meta, "properties": map[string]any{"k": map[string]any{"type": "keyword"}}},
		"aliases":  map[string]any{alias: map[string]any{}},
	})

	var mappings map[string]struct {
		Mappings struct {
			Meta map[string]any `json:"_meta"`
		} `json:"mappings"`
	}
	s.OK(t, esapi.IndicesGetMappingRequest{Index: []string{alias}}).Decode(t, &mappings)
	got, found := mappings[idx]
	if !found || !reflect.DeepEqual(got.Mappings.Meta, meta) {
		t.Fatalf("mapping via alias: %+v, want _meta %v under %s", mappings, meta, idx)
	}
	if targets := s.aliasTargets(t, alias); !reflect.DeepEqual(targets, []string{idx}) {
		t.Fatalf("alias %s points to %v, want [%s]", alias, targets, idx)
	}
}

// Writes go through the alias with external versions; the server keeps the highest version and
// reports stale ones per item.
func (s *searchServer) checkBulkExternalRequireAlias(t *testing.T) {
	idx, alias := s.name("ext-v1"), s.name("ext")
	s.CreateIndex(t, idx, map[string]any{"aliases": map[string]any{alias: map[string]any{}}})
	viaAlias := esapi.BulkRequest{RequireAlias: estest.Ptr(true)}
	action := func(op, index, id string, version int) map[string]any {
		return map[string]any{op: map[string]any{"_index": index, "_id": id, "version": version, "version_type": "external"}}
	}

	_, items := s.Bulk(t, viaAlias, action("index", alias, "d1", 5), map[string]any{"k": "v5"})
	if it := items[0]; it.Status != http.StatusCreated || it.Version != 5 || it.Index != idx {
		t.Fatalf("index v5 through alias: %+v (error %+v)", it, it.Error)
	}

	errs, items := s.Bulk(t, viaAlias, action("index", alias, "d1", 3), map[string]any{"k": "v3"})
	if !errs {
		t.Fatalf("stale external version: errors=false")
	}
	estest.WantItemError(t, "index v3 after v5", items[0], http.StatusConflict, "version_conflict_engine_exception", "current version [5]")
	if doc := s.GetDoc(t, idx, "d1"); doc.Version != 5 || string(doc.Source) != `{"k":"v5"}` {
		t.Fatalf("after stale write: version %d source %s, want 5 {\"k\":\"v5\"}", doc.Version, doc.Source)
	}

	// A missing alias, and a concrete index name, are both refused per item: require_alias
	// accepts only an alias.
	missing := s.name("ext-no-alias")
	_, items = s.Bulk(t, viaAlias,
		action("index", missing, "d1", 1), map[string]any{"k": "x"},
		action("index", idx, "d2", 1), map[string]any{"k": "x"})
	estest.WantItemError(t, "index into missing alias", items[0], http.StatusNotFound, "index_not_found_exception",
		"[require_alias] request flag is [true] and ["+missing+"] is not an alias")
	estest.WantItemError(t, "index into concrete index", items[1], http.StatusNotFound, "index_not_found_exception",
		"[require_alias] request flag is [true] and ["+idx+"] is not an alias")
	if s.IndexExists(t, missing) {
		t.Fatalf("refused require_alias write still created index %s", missing)
	}

	// Trap for the library: require_alias does not apply to delete actions. An externally
	// versioned delete to a missing name auto-creates that index (to keep the tombstone), answers
	// 404 "not_found" without an error, and the bulk reports errors=false. Only an
	// action.auto_create_index rule stops it (see auto_create_index_rule).
	ghost := s.name("ext-ghost")
	errs, items = s.Bulk(t, viaAlias, action("delete", ghost, "d1", 3))
	if it := items[0]; errs || it.Status != http.StatusNotFound || it.Result != "not_found" || it.Error != nil {
		t.Fatalf("external delete to missing name under require_alias: errors=%v item %+v (error %+v)", errs, it, it.Error)
	}
	if !s.IndexExists(t, ghost) {
		t.Fatalf("external delete to missing %s did not auto-create it; the require_alias trap is gone", ghost)
	}
}

// One _aliases request moves a name atomically; must_exist decides whether a missing alias fails
// the whole request.
func (s *searchServer) checkAliasSwap(t *testing.T) {
	idx, oldAlias, newAlias := s.name("swap-v1"), s.name("swap-old"), s.name("swap-new")
	s.CreateIndex(t, idx, map[string]any{"aliases": map[string]any{oldAlias: map[string]any{}}})
	actions := func(a ...map[string]any) esapi.IndicesUpdateAliasesRequest {
		return esapi.IndicesUpdateAliasesRequest{Body: estest.JSONBody(t, map[string]any{"actions": a})}
	}
	remove := func(alias string, mustExist bool) map[string]any {
		return map[string]any{"remove": map[string]any{"index": idx, "alias": alias, "must_exist": mustExist}}
	}
	add := func(alias string) map[string]any {
		return map[string]any{"add": map[string]any{"index": idx, "alias": alias}}
	}

	s.OK(t, actions(remove(oldAlias, true), add(newAlias)))
	if targets := s.aliasTargets(t, oldAlias); targets != nil {
		t.Fatalf("old alias still points to %v", targets)
	}
	if targets := s.aliasTargets(t, newAlias); !reflect.DeepEqual(targets, []string{idx}) {
		t.Fatalf("new alias points to %v, want [%s]", targets, idx)
	}

	// must_exist:true on a missing alias fails the request as a whole: the add beside it is
	// not applied either.
	gone, sideAdd := s.name("swap-gone"), s.name("swap-side1")
	searchWantError(t, "remove missing alias, must_exist:true", s.Do(t, actions(remove(gone, true), add(sideAdd))),
		http.StatusNotFound, "aliases_not_found_exception")
	if targets := s.aliasTargets(t, sideAdd); targets != nil {
		t.Fatalf("add beside a failed must_exist remove was applied: %v", targets)
	}

	// must_exist:false on a missing alias (recipe open question 8): the engines disagree.
	alone := s.Do(t, actions(remove(gone, false)))
	sideAdd = s.name("swap-side2")
	mixed := s.Do(t, actions(remove(gone, false), add(sideAdd)))
	if s.Engine == estest.OpenSearch {
		// OpenSearch 2.19: a plain acknowledgement, alone or with other actions.
		if alone.Status != http.StatusOK || mixed.Status != http.StatusOK {
			t.Fatalf("must_exist:false on OpenSearch: alone %d %s, mixed %d %s", alone.Status, alone.Body, mixed.Status, mixed.Body)
		}
	} else {
		// Elasticsearch 8.19: when every action fails the request is a 404 like without
		// must_exist; beside a successful action it is a 200 with errors:true and a per-action
		// 404 in action_results, and the other action is applied.
		searchWantError(t, "must_exist:false alone on Elasticsearch", alone, http.StatusNotFound, "aliases_not_found_exception")
		var ans struct {
			Acknowledged  bool `json:"acknowledged"`
			Errors        bool `json:"errors"`
			ActionResults []struct {
				Status int               `json:"status"`
				Error  *estest.ItemError `json:"error"`
			} `json:"action_results"`
		}
		if mixed.Status != http.StatusOK {
			t.Fatalf("must_exist:false beside add on Elasticsearch: status %d: %s", mixed.Status, mixed.Body)
		}
		mixed.Decode(t, &ans)
		if !ans.Acknowledged || !ans.Errors || len(ans.ActionResults) != 2 ||
			ans.ActionResults[0].Status != http.StatusNotFound || ans.ActionResults[0].Error == nil ||
			ans.ActionResults[0].Error.Type != "aliases_not_found_exception" || ans.ActionResults[1].Status != http.StatusOK {
			t.Fatalf("must_exist:false beside add on Elasticsearch: %s", mixed.Body)
		}
	}
	if targets := s.aliasTargets(t, sideAdd); !reflect.DeepEqual(targets, []string{idx}) {
		t.Fatalf("add beside must_exist:false remove: alias points to %v, want [%s]", targets, idx)
	}
}

// The cluster-wide rule "-df-w-*,+*" keeps externally versioned deletes from creating indices
// whose names start with df-w-, while every other name still auto-creates.
func (s *searchServer) checkAutoCreateIndex(t *testing.T) {
	s.EnforceAutoCreateRule(t) // also holds the cluster settings: other test processes rely on them

	forbidden, allowed := "df-w-"+s.name("auto"), s.name("auto-allowed")
	errs, items := s.Bulk(t, esapi.BulkRequest{},
		map[string]any{"delete": map[string]any{"_index": forbidden, "_id": "d1", "version": 9, "version_type": "external"}},
		map[string]any{"index": map[string]any{"_index": allowed, "_id": "d1"}}, map[string]any{"k": "x"})
	if !errs {
		t.Fatalf("bulk with a refused delete: errors=false")
	}
	estest.WantItemError(t, "external delete into df-w-*", items[0], http.StatusNotFound, "index_not_found_exception",
		"[action.auto_create_index] contains [-df-w-*] which forbids automatic creation of the index")
	if s.IndexExists(t, forbidden) {
		t.Fatalf("refused delete still created %s", forbidden)
	}
	if it := items[1]; it.Status != http.StatusCreated || it.Index != allowed {
		t.Fatalf("index into allowed missing %s: %+v (error %+v)", allowed, it, it.Error)
	}
	if !s.IndexExists(t, allowed) {
		t.Fatalf("allowed name %s was not auto-created", allowed)
	}
}

// A write with refresh=wait_for returns only once the document is visible to search. The index
// starts with refreshes off so the "not yet visible" half is deterministic.
func (s *searchServer) checkRefreshWaitFor(t *testing.T) {
	idx := s.name("refresh")
	s.CreateIndex(t, idx, map[string]any{"settings": map[string]any{"refresh_interval": "-1"}})
	hits := func() int {
		t.Helper()
		var ans struct {
			Hits struct {
				Total struct {
					Value int `json:"value"`
				} `json:"total"`
			} `json:"hits"`
		}
		s.OK(t, esapi.SearchRequest{Index: []string{idx}, Body: estest.JSONBody(t, map[string]any{
			"query": map[string]any{"term": map[string]any{"k": "x"}},
		})}).Decode(t, &ans)
		return ans.Hits.Total.Value
	}
	doc := func(id string) []any {
		return []any{map[string]any{"index": map[string]any{"_index": idx, "_id": id}}, map[string]any{"k": "x"}}
	}

	if _, items := s.Bulk(t, esapi.BulkRequest{Refresh: "false"}, doc("d1")...); items[0].Status != http.StatusCreated {
		t.Fatalf("plain write: %+v", items[0])
	}
	if n := hits(); n != 0 {
		t.Fatalf("with refreshes off a plain write is already searchable (%d hits); the wait_for half proves nothing", n)
	}
	// wait_for waits for a refresh instead of forcing one, so refreshes must run again.
	s.OK(t, esapi.IndicesPutSettingsRequest{Index: []string{idx}, Body: estest.JSONBody(t, map[string]any{"index": map[string]any{"refresh_interval": "1s"}})})
	if _, items := s.Bulk(t, esapi.BulkRequest{Refresh: "wait_for"}, doc("d2")...); items[0].Status != http.StatusCreated {
		t.Fatalf("wait_for write: %+v", items[0])
	}
	if n := hits(); n != 2 {
		t.Fatalf("right after a refresh=wait_for write: %d hits, want 2", n)
	}
}

func (s *searchServer) checkMget(t *testing.T) {
	idx := s.name("mget")
	s.CreateIndex(t, idx, nil)
	s.Bulk(t, esapi.BulkRequest{},
		map[string]any{"index": map[string]any{"_index": idx, "_id": "a"}}, map[string]any{"k": "A"},
		map[string]any{"index": map[string]any{"_index": idx, "_id": "c"}}, map[string]any{"k": "C"})
	var ans struct {
		Docs []struct {
			ID     string          `json:"_id"`
			Found  bool            `json:"found"`
			Source json.RawMessage `json:"_source"`
		} `json:"docs"`
	}
	s.OK(t, esapi.MgetRequest{Index: idx, Body: estest.JSONBody(t, map[string]any{"ids": []string{"a", "b", "c"}})}).Decode(t, &ans)
	type row struct {
		id     string
		found  bool
		source string
	}
	var got []row
	for _, d := range ans.Docs {
		got = append(got, row{d.ID, d.Found, string(d.Source)})
	}
	want := []row{{"a", true, `{"k":"A"}`}, {"b", false, ""}, {"c", true, `{"k":"C"}`}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mget: %+v, want %+v", got, want)
	}
}

// Compare-and-set on (seq_no, primary_term), both on the single-document API and per bulk item.
func (s *searchServer) checkOptimisticConcurrency(t *testing.T) {
	idx := s.name("occ")
	s.CreateIndex(t, idx, nil)
	var first, second struct {
		SeqNo       int `json:"_seq_no"`
		PrimaryTerm int `json:"_primary_term"`
	}
	s.OK(t, esapi.IndexRequest{Index: idx, DocumentID: "d1", Body: estest.JSONBody(t, map[string]any{"n": 1})}).Decode(t, &first)
	s.OK(t, esapi.IndexRequest{Index: idx, DocumentID: "d1", Body: estest.JSONBody(t, map[string]any{"n": 2}),
		IfSeqNo: &first.SeqNo, IfPrimaryTerm: &first.PrimaryTerm}).Decode(t, &second)
	if second.SeqNo <= first.SeqNo {
		t.Fatalf("conditional write did not advance seq_no: %d then %d", first.SeqNo, second.SeqNo)
	}
	stale := s.Do(t, esapi.IndexRequest{Index: idx, DocumentID: "d1", Body: estest.JSONBody(t, map[string]any{"n": 3}),
		IfSeqNo: &first.SeqNo, IfPrimaryTerm: &first.PrimaryTerm})
	searchWantError(t, "write with stale seq_no", stale, http.StatusConflict, "version_conflict_engine_exception")

	_, items := s.Bulk(t, esapi.BulkRequest{},
		map[string]any{"index": map[string]any{"_index": idx, "_id": "d1", "if_seq_no": first.SeqNo, "if_primary_term": first.PrimaryTerm}},
		map[string]any{"n": 4},
		map[string]any{"index": map[string]any{"_index": idx, "_id": "d1", "if_seq_no": second.SeqNo, "if_primary_term": second.PrimaryTerm}},
		map[string]any{"n": 5})
	estest.WantItemError(t, "bulk item with stale seq_no", items[0], http.StatusConflict, "version_conflict_engine_exception", "required seqNo")
	if items[1].Status != http.StatusOK || items[1].SeqNo <= int64(second.SeqNo) {
		t.Fatalf("bulk item with current seq_no: %+v (error %+v)", items[1], items[1].Error)
	}
	if doc := s.GetDoc(t, idx, "d1"); string(doc.Source) != `{"n":5}` {
		t.Fatalf("final document %s, want {\"n\":5}", doc.Source)
	}
}

// The cluster UUID identifies a cluster across restarts of a client. GET / is missing on the
// Elasticsearch integ-test-zip (its handler lives in module rest-root, which that zip lacks), so
// the cluster state is the portable source.
func (s *searchServer) checkClusterUUID(t *testing.T) {
	var state struct {
		Metadata struct {
			ClusterUUID string `json:"cluster_uuid"`
		} `json:"metadata"`
	}
	s.OK(t, esapi.ClusterStateRequest{Metric: []string{"metadata"}, FilterPath: []string{"metadata.cluster_uuid"}}).Decode(t, &state)
	uuid := state.Metadata.ClusterUUID
	if uuid == "" || uuid == "_na_" {
		t.Fatalf("cluster state gives cluster_uuid %q", uuid)
	}

	root := s.Do(t, esapi.InfoRequest{})
	if s.Engine != estest.OpenSearch {
		// Only DELETE is routed for "/" here; the answer names the allowed method.
		if root.Status != http.StatusMethodNotAllowed || !strings.Contains(string(root.Body), "allowed: [DELETE]") {
			t.Fatalf("GET / on the Elasticsearch integ-test-zip: status %d %s, want 405 (no rest-root module)", root.Status, root.Body)
		}
		return
	}
	var info struct {
		ClusterUUID string `json:"cluster_uuid"`
		Version     struct {
			Distribution string `json:"distribution"`
		} `json:"version"`
	}
	if root.Status != http.StatusOK {
		t.Fatalf("GET / on OpenSearch: status %d: %s", root.Status, root.Body)
	}
	root.Decode(t, &info)
	if info.ClusterUUID != uuid || info.Version.Distribution != "opensearch" {
		t.Fatalf("GET / on OpenSearch: %s; want cluster_uuid %s", root.Body, uuid)
	}
}

// scaled_float lives in module mapper-extras. The OpenSearch script installs it from Maven
// Central; Elasticsearch 8 publishes no artifact for it there, so on Elasticsearch the exact
// refusal is pinned instead.
func (s *searchServer) checkScaledFloat(t *testing.T) {
	idx := s.name("scaled")
	body := estest.JSONBody(t, map[string]any{
		"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0},
		"mappings": map[string]any{"properties": map[string]any{"price": map[string]any{"type": "scaled_float", "scaling_factor": 100}}},
	})
	r := s.Do(t, esapi.IndicesCreateRequest{Index: idx, Body: body})
	if s.Engine != estest.OpenSearch {
		e := searchWantError(t, "scaled_float mapping on Elasticsearch", r, http.StatusBadRequest, "mapper_parsing_exception")
		const want = "The mapper type [scaled_float] declared on field [price] does not exist."
		if e.CausedBy == nil || !strings.HasPrefix(e.CausedBy.Reason, want) {
			t.Fatalf("scaled_float refusal: %s; want caused_by reason starting %q", r.Body, want)
		}
		if s.IndexExists(t, idx) {
			t.Fatalf("refused mapping still created %s", idx)
		}
		return
	}
	if r.Status != http.StatusOK {
		t.Fatalf("scaled_float mapping on OpenSearch: status %d: %s", r.Status, r.Body)
	}
	if _, items := s.Bulk(t, esapi.BulkRequest{Refresh: "true"},
		map[string]any{"index": map[string]any{"_index": idx, "_id": "p1"}}, map[string]any{"price": 12.345}); items[0].Status != http.StatusCreated {
		t.Fatalf("index scaled_float doc: %+v (error %+v)", items[0], items[0].Error)
	}
	// _source keeps the value as sent; doc values hold it scaled to two decimals.
	if doc := s.GetDoc(t, idx, "p1"); string(doc.Source) != `{"price":12.345}` {
		t.Fatalf("scaled_float _source %s", doc.Source)
	}
	var ans struct {
		Hits struct {
			Hits []struct {
				Fields map[string][]float64 `json:"fields"`
			} `json:"hits"`
		} `json:"hits"`
	}
	s.OK(t, esapi.SearchRequest{Index: []string{idx}, Body: estest.JSONBody(t, map[string]any{
		"docvalue_fields": []string{"price"},
		"query":           map[string]any{"range": map[string]any{"price": map[string]any{"gte": 12.34, "lte": 12.35}}},
	})}).Decode(t, &ans)
	if len(ans.Hits.Hits) != 1 || !reflect.DeepEqual(ans.Hits.Hits[0].Fields["price"], []float64{12.35}) {
		t.Fatalf("scaled_float doc values: %+v, want one hit with price [12.35]", ans.Hits.Hits)
	}
}

// index.gc_deletes (how long delete tombstones keep their version for external versioning) can be
// set at creation and changed later, per index.
func (s *searchServer) checkGCDeletes(t *testing.T) {
	idx := s.name("gc")
	s.CreateIndex(t, idx, map[string]any{"settings": map[string]any{"index.gc_deletes": "1h"}})
	read := func() string {
		t.Helper()
		var ans map[string]struct {
			Settings map[string]string `json:"settings"`
		}
		s.OK(t, esapi.IndicesGetSettingsRequest{Index: []string{idx}, Name: []string{"index.gc_deletes"}, FlatSettings: estest.Ptr(true)}).Decode(t, &ans)
		return ans[idx].Settings["index.gc_deletes"]
	}
	if got := read(); got != "1h" {
		t.Fatalf("gc_deletes at creation: %q", got)
	}
	s.OK(t, esapi.IndicesPutSettingsRequest{Index: []string{idx}, Body: estest.JSONBody(t, map[string]any{"index.gc_deletes": "2h"})})
	if got := read(); got != "2h" {
		t.Fatalf("gc_deletes after update: %q", got)
	}
}
