package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// server is one real Elasticsearch or OpenSearch node.
type server struct {
	*estest.Node
	prefix string // every index a test run makes starts with it
	// version is the last external version written; each write takes the next, so a
	// write is never refused as stale and only fencing can refuse it.
	version int
	// stores makes the test's state stores (newStore, copyStore); zero: memory stores.
	stores storeKind
}

// engines runs fn once per engine, as subtests named by engine. The tests are not parallel:
// several of them change the cluster-wide action.auto_create_index.
func engines(t *testing.T, fn func(t *testing.T, s *server)) {
	estest.EachEngine(t, func(t *testing.T, n *estest.Node) {
		s := &server{Node: n, prefix: estest.UniqueName(t, "esf")}
		s.DeleteAtCleanup(t, s.prefix+"*")
		// Claims depend on the cluster-wide auto-create rule, which other packages' tests
		// change: this also keeps this process's view of it stable.
		s.EnforceAutoCreateRule(t)
		fn(t, s)
	})
}

func (s *server) name(part string) string { return s.prefix + "-" + part }

const setting = estest.AutoCreateSetting

// setAutoCreate sets the persistent action.auto_create_index (nil resets it to the default)
// and restores the previous persistent value when the test ends.
func (s *server) setAutoCreate(t *testing.T, value any) {
	t.Helper()
	var cur struct {
		Persistent map[string]any `json:"persistent"`
	}
	if err := json.Unmarshal(s.OK(t, esapi.ClusterGetSettingsRequest{FlatSettings: ptr(true)}).Body, &cur); err != nil {
		t.Fatal(err)
	}
	previous := cur.Persistent[setting]
	s.putAutoCreate(t, "persistent", value)
	t.Cleanup(func() { s.putAutoCreate(t, "persistent", previous) })
}

func (s *server) putAutoCreate(t *testing.T, level string, value any) {
	t.Helper()
	s.OK(t, esapi.ClusterPutSettingsRequest{Body: estest.JSONBody(t, map[string]any{level: map[string]any{setting: value}})})
}

// aliases returns the aliases of one index.
func (s *server) aliases(t *testing.T, index string) []string {
	t.Helper()
	var m map[string]struct {
		Aliases map[string]any `json:"aliases"`
	}
	if err := json.Unmarshal(s.OK(t, esapi.IndicesGetAliasRequest{Index: []string{index}}).Body, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for a := range m[index].Aliases {
		out = append(out, a)
	}
	return out
}

// meta returns an index's mappings._meta as raw JSON values.
func (s *server) meta(t *testing.T, index string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]struct {
		Mappings struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"mappings"`
	}
	if err := json.Unmarshal(s.OK(t, esapi.IndicesGetMappingRequest{Index: []string{index}}).Body, &m); err != nil {
		t.Fatal(err)
	}
	return m[index].Mappings.Meta
}

func (s *server) mappings(t *testing.T, index string) json.RawMessage {
	t.Helper()
	var m map[string]struct {
		Mappings json.RawMessage `json:"mappings"`
	}
	if err := json.Unmarshal(s.OK(t, esapi.IndicesGetMappingRequest{Index: []string{index}}).Body, &m); err != nil {
		t.Fatal(err)
	}
	return m[index].Mappings
}

// write sends one bulk action the way the sink does: through alias, require_alias=true,
// externally versioned. op is "index" or "delete".
func (s *server) write(t *testing.T, alias, op, id string) estest.BulkItem {
	t.Helper()
	s.version++
	lines := []any{map[string]any{op: map[string]any{"_index": alias, "_id": id, "version": s.version, "version_type": "external"}}}
	if op == "index" {
		lines = append(lines, map[string]any{"k": "v"})
	}
	_, items := s.Bulk(t, esapi.BulkRequest{RequireAlias: ptr(true)}, lines...)
	if len(items) != 1 {
		t.Fatalf("bulk answer with %d items, want 1", len(items))
	}
	return items[0]
}

// wantWrites asserts that index and delete actions through alias reach index.
func (s *server) wantWrites(t *testing.T, alias, index string) {
	t.Helper()
	if it := s.write(t, alias, "index", "d1"); it.Error != nil || it.Index != index {
		t.Fatalf("index through %s: %+v (error %+v)", alias, it, it.Error)
	}
	if it := s.write(t, alias, "delete", "d1"); it.Error != nil || it.Index != index || it.Result != "deleted" {
		t.Fatalf("delete through %s: %+v (error %+v)", alias, it, it.Error)
	}
}

// wantFencedWrites asserts that the cluster rejects index and delete actions through a
// rotated-away alias, and that the delete auto-created nothing.
func (s *server) wantFencedWrites(t *testing.T, alias string) {
	t.Helper()
	estest.WantItemError(t, "index through the old alias "+alias+" (require_alias must reject it)",
		s.write(t, alias, "index", "d2"), http.StatusNotFound, "index_not_found_exception", "require_alias")
	estest.WantItemError(t, "delete through the old alias "+alias+" (the auto-create rule must reject it)",
		s.write(t, alias, "delete", "d2"), http.StatusNotFound, "index_not_found_exception", "forbids automatic creation")
	if s.IndexExists(t, alias) {
		t.Fatalf("the delete auto-created %s", alias)
	}
}

// dest is a destination for index part of this run.
func (s *server) dest(part string) Destination {
	return Destination{
		Pipeline: "orders-to-es",
		Sink:     "es-orders",
		Table:    cdc.TableID{Connector: "postgres", Source: "shop", Database: "shop", Schema: "public", Table: "orders"},
		Index:    s.name(part),
		Encoding: "doc-v1",
		Mapping:  json.RawMessage(`{"dynamic":"strict","_meta":{"team":"search"},"properties":{"k":{"type":"keyword"}}}`),
		Settings: json.RawMessage(`{"number_of_shards":1,"number_of_replicas":0}`),
	}
}

func (s *server) fence(t *testing.T, st statestore.Store) *Fence {
	t.Helper()
	f, err := New(s.Transport, st, &Options{Timeout: estest.CallTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func ensure(t *testing.T, f *Fence, d Destination) *Claim {
	t.Helper()
	c, err := f.Ensure(context.Background(), d)
	if err != nil {
		t.Fatalf("Ensure %s: %v", d.Index, err)
	}
	return c
}

func reclaim(t *testing.T, f *Fence, c *Claim) *Claim {
	t.Helper()
	n, err := f.Reclaim(context.Background(), c)
	if err != nil {
		t.Fatalf("Reclaim %s: %v", c.Index(), err)
	}
	return n
}

// wantRefusal asserts a refusal of the class, for the destination, with nothing secret in it.
func wantRefusal(t *testing.T, err error, class Class, d Destination) *ConflictError {
	t.Helper()
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a %s refusal", err, class)
	}
	if !errors.Is(err, class) || !errors.Is(err, ErrDestinationConflict) || ce.Class != class {
		t.Fatalf("got %v (class %s), want class %s", err, ce.Class, class)
	}
	if ce.Index != d.Index || ce.Table != d.Table {
		t.Fatalf("refusal names index %q table %v, want %q %v", ce.Index, ce.Table, d.Index, d.Table)
	}
	if !strings.HasPrefix(err.Error(), Incident+" ("+string(class)+")") {
		t.Fatalf("refusal text %q does not start with the incident and class", err.Error())
	}
	return ce
}

var errCrash = errors.New("simulated crash")
