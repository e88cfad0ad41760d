package esfence

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// callTimeout bounds each request a test sends, so a hung server fails the test instead of
// hanging the binary.
const callTimeout = 30 * time.Second

// server is one real Elasticsearch or OpenSearch node.
type server struct {
	engine string
	tp     *elastictransport.Client
	prefix string // every index a test run makes starts with it
	// version is the last external version written; each write takes the next, so a
	// write is never refused as stale and only fencing can refuse it.
	version int
}

// engines runs fn once per engine, as subtests named by engine. The tests are not parallel:
// several of them change the cluster-wide action.auto_create_index.
func engines(t *testing.T, fn func(t *testing.T, s *server)) {
	for _, e := range []struct{ name, env string }{
		{"elasticsearch", testenv.ElasticsearchURL},
		{"opensearch", testenv.OpenSearchURL},
	} {
		t.Run(e.name, func(t *testing.T) {
			raw := testenv.Require(t, e.env)
			// Claims depend on the cluster-wide auto-create rule, which other packages' tests
			// change: keep this process's view of it stable.
			testenv.HoldClusterSettings(t, raw)
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("bad url %q: %v", raw, err)
			}
			tp, err := elastictransport.New(elastictransport.Config{URLs: []*url.URL{u}, DisableRetry: true})
			if err != nil {
				t.Fatal(err)
			}
			s := &server{engine: e.name, tp: tp, prefix: "esf-" + randomHex(t, 5)}
			t.Cleanup(func() { s.do(t, esapi.IndicesDeleteRequest{Index: []string{s.prefix + "*"}}) })
			s.enforce(t)
			fn(t, s)
		})
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func (s *server) name(part string) string { return s.prefix + "-" + part }

type result struct {
	status int
	body   []byte
}

func (s *server) do(t *testing.T, req esapi.Request) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := req.Do(ctx, s.tp)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{res.StatusCode, b}
}

func (s *server) ok(t *testing.T, req esapi.Request) result {
	t.Helper()
	r := s.do(t, req)
	if r.status < 200 || r.status > 299 {
		t.Fatalf("%T: status %d: %s", req, r.status, r.body)
	}
	return r
}

func body(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

const setting = "action.auto_create_index"

// setAutoCreate sets the persistent action.auto_create_index (nil resets it to the default)
// and restores the previous persistent value when the test ends.
func (s *server) setAutoCreate(t *testing.T, value any) {
	t.Helper()
	var cur struct {
		Persistent map[string]any `json:"persistent"`
	}
	if err := json.Unmarshal(s.ok(t, esapi.ClusterGetSettingsRequest{FlatSettings: ptr(true)}).body, &cur); err != nil {
		t.Fatal(err)
	}
	previous := cur.Persistent[setting]
	s.putAutoCreate(t, "persistent", value)
	t.Cleanup(func() { s.putAutoCreate(t, "persistent", previous) })
}

func (s *server) putAutoCreate(t *testing.T, level string, value any) {
	t.Helper()
	s.ok(t, esapi.ClusterPutSettingsRequest{Body: body(t, map[string]any{level: map[string]any{setting: value}})})
}

// enforce makes sure the cluster forbids auto-creating df-w-* for the test, the way the
// deployment requirement asks, and puts the previous value back afterwards.
func (s *server) enforce(t *testing.T) {
	t.Helper()
	var cur struct {
		Persistent map[string]any `json:"persistent"`
		Transient  map[string]any `json:"transient"`
	}
	if err := json.Unmarshal(s.ok(t, esapi.ClusterGetSettingsRequest{FlatSettings: ptr(true)}).body, &cur); err != nil {
		t.Fatal(err)
	}
	if v, set := cur.Transient[setting]; set {
		t.Fatalf("a transient %s (%v) is set on the shared server; the tests do not override it", setting, v)
	}
	if cur.Persistent[setting] != "-df-w-*,+*" {
		s.setAutoCreate(t, "-df-w-*,+*")
	}
}

func (s *server) exists(t *testing.T, index string) bool {
	t.Helper()
	switch r := s.do(t, esapi.IndicesExistsRequest{Index: []string{index}}); r.status {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	default:
		t.Fatalf("HEAD %s: %d", index, r.status)
		return false
	}
}

// createPlain creates an index the way someone else would: no marker, no write alias.
func (s *server) createPlain(t *testing.T, index string, extra map[string]any) {
	t.Helper()
	b := map[string]any{"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0}}
	for k, v := range extra {
		b[k] = v
	}
	s.ok(t, esapi.IndicesCreateRequest{Index: index, Body: body(t, b)})
}

// aliases returns the aliases of one index.
func (s *server) aliases(t *testing.T, index string) []string {
	t.Helper()
	var m map[string]struct {
		Aliases map[string]any `json:"aliases"`
	}
	if err := json.Unmarshal(s.ok(t, esapi.IndicesGetAliasRequest{Index: []string{index}}).body, &m); err != nil {
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
	if err := json.Unmarshal(s.ok(t, esapi.IndicesGetMappingRequest{Index: []string{index}}).body, &m); err != nil {
		t.Fatal(err)
	}
	return m[index].Mappings.Meta
}

func (s *server) mappings(t *testing.T, index string) json.RawMessage {
	t.Helper()
	var m map[string]struct {
		Mappings json.RawMessage `json:"mappings"`
	}
	if err := json.Unmarshal(s.ok(t, esapi.IndicesGetMappingRequest{Index: []string{index}}).body, &m); err != nil {
		t.Fatal(err)
	}
	return m[index].Mappings
}

// item is one _bulk answer item.
type item struct {
	Index  string `json:"_index"`
	Status int    `json:"status"`
	Result string `json:"result"`
	Error  *struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	} `json:"error"`
}

// write sends one bulk action the way the sink does: through alias, require_alias=true,
// externally versioned. op is "index" or "delete".
func (s *server) write(t *testing.T, alias, op, id string) item {
	t.Helper()
	s.version++
	version := s.version
	var buf bytes.Buffer
	action, _ := json.Marshal(map[string]any{op: map[string]any{"_index": alias, "_id": id, "version": version, "version_type": "external"}})
	buf.Write(action)
	buf.WriteByte('\n')
	if op == "index" {
		buf.WriteString(`{"k":"v"}` + "\n")
	}
	var ans struct {
		Items []map[string]item `json:"items"`
	}
	r := s.ok(t, esapi.BulkRequest{Body: &buf, RequireAlias: ptr(true)})
	if err := json.Unmarshal(r.body, &ans); err != nil || len(ans.Items) != 1 {
		t.Fatalf("bulk answer %s: %v", r.body, err)
	}
	return ans.Items[0][op]
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
	it := s.write(t, alias, "index", "d2")
	if it.Error == nil || it.Status != http.StatusNotFound || it.Error.Type != "index_not_found_exception" ||
		!strings.Contains(it.Error.Reason, "require_alias") {
		t.Fatalf("index through the old alias %s was not rejected by require_alias: %+v (error %+v)", alias, it, it.Error)
	}
	it = s.write(t, alias, "delete", "d2")
	if it.Error == nil || it.Status != http.StatusNotFound || it.Error.Type != "index_not_found_exception" ||
		!strings.Contains(it.Error.Reason, "forbids automatic creation") {
		t.Fatalf("delete through the old alias %s was not rejected by the auto-create rule: %+v (error %+v)", alias, it, it.Error)
	}
	if s.exists(t, alias) {
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
	f, err := New(s.tp, st, &Options{Timeout: callTimeout})
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
