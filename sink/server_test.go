package sink

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// callTimeout bounds each request a test helper sends.
const callTimeout = 30 * time.Second

// server is one real Elasticsearch or OpenSearch node.
type server struct {
	engine string
	url    string
	tp     *elastictransport.Client
	prefix string // every index a test makes starts with it
}

// engines runs fn once per engine as subtests named by engine. Not parallel: the tests may
// set the cluster-wide action.auto_create_index (and put it back).
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
			s := &server{engine: e.name, url: raw, tp: tp, prefix: "snk-" + randomHex(t, 5)}
			t.Cleanup(func() { s.do(t, esapi.IndicesDeleteRequest{Index: []string{s.prefix + "*"}}) })
			s.enforce(t)
			fn(t, s)
		})
	}
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

type result struct {
	status int
	body   []byte
}

func (s *server) do(t testing.TB, req esapi.Request) result {
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

func (s *server) ok(t testing.TB, req esapi.Request) result {
	t.Helper()
	r := s.do(t, req)
	if r.status < 200 || r.status > 299 {
		t.Fatalf("%T: status %d: %s", req, r.status, r.body)
	}
	return r
}

func jsonBody(t testing.TB, v any) io.Reader {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

const autoCreateSetting = "action.auto_create_index"

// enforce makes the cluster forbid auto-creating df-w-* (the deployment requirement) for the
// test and puts the previous persistent value back afterwards.
func (s *server) enforce(t testing.TB) {
	t.Helper()
	var cur struct {
		Persistent map[string]any `json:"persistent"`
		Transient  map[string]any `json:"transient"`
	}
	if err := json.Unmarshal(s.ok(t, esapi.ClusterGetSettingsRequest{FlatSettings: ptr(true)}).body, &cur); err != nil {
		t.Fatal(err)
	}
	if v, set := cur.Transient[autoCreateSetting]; set {
		t.Fatalf("a transient %s (%v) is set on the shared server; the tests do not override it", autoCreateSetting, v)
	}
	if prev := cur.Persistent[autoCreateSetting]; prev != "-df-w-*,+*" {
		s.ok(t, esapi.ClusterPutSettingsRequest{Body: jsonBody(t, map[string]any{"persistent": map[string]any{autoCreateSetting: "-df-w-*,+*"}})})
		t.Cleanup(func() {
			s.ok(t, esapi.ClusterPutSettingsRequest{Body: jsonBody(t, map[string]any{"persistent": map[string]any{autoCreateSetting: prev}})})
		})
	}
}

func ptr[T any](v T) *T { return &v }

// config is a sink configuration for this server and test.
func (s *server) config(part string) Config {
	return Config{ID: "es-test", URL: s.url, Index: s.prefix + "-" + part + "-{table}", Auth: Auth{Type: AuthNone},
		Shards: 1, Replicas: ptr(0)}
}

// sink builds a sink writing through the state store (a new memory store when nil).
func (s *server) sink(t testing.TB, cfg Config, st statestore.Store, tp esapi.Transport) *Sink {
	t.Helper()
	return s.sinkOpts(t, cfg, Options{State: st, Transport: tp})
}

// sinkOpts builds a sink with options (pipeline and retry backoff filled in).
func (s *server) sinkOpts(t testing.TB, cfg Config, o Options) *Sink {
	t.Helper()
	if o.State == nil {
		o.State = statestore.NewMemory()
	}
	o.Pipeline, o.ItemRetryBackoff = "orders-to-es", time.Millisecond
	k, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func (s *server) refresh(t testing.TB, index string) {
	t.Helper()
	s.ok(t, esapi.IndicesRefreshRequest{Index: []string{index}})
}

// docs reads documents by _id in real time (no refresh needed): _source or nil when absent,
// and the stored version.
func (s *server) docs(t testing.TB, index string, ids []string) (map[string]map[string]any, map[string]int64) {
	t.Helper()
	d, v, err := s.docsMaybe(t, index, ids)
	if err != nil {
		t.Fatal(err)
	}
	return d, v
}

// docsMaybe is docs that reports a document error (a shard still starting) instead of failing.
func (s *server) docsMaybe(t testing.TB, index string, ids []string) (map[string]map[string]any, map[string]int64, error) {
	t.Helper()
	var ans struct {
		Docs []struct {
			ID      string         `json:"_id"`
			Found   bool           `json:"found"`
			Version int64          `json:"_version"`
			Source  map[string]any `json:"_source"`
			Error   any            `json:"error"`
		} `json:"docs"`
	}
	r := s.ok(t, esapi.MgetRequest{Index: index, Body: jsonBody(t, map[string]any{"ids": ids}), Realtime: ptr(true)})
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&ans); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	vers := map[string]int64{}
	for _, d := range ans.Docs {
		if d.Error != nil {
			return nil, nil, fmt.Errorf("mget %s: %v", d.ID, d.Error)
		}
		if d.Found {
			out[d.ID] = d.Source
			vers[d.ID] = d.Version
		}
	}
	return out, vers, nil
}

// count is the number of documents in index after a refresh.
func (s *server) count(t testing.TB, index string) int {
	t.Helper()
	s.refresh(t, index)
	var ans struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(s.ok(t, esapi.CountRequest{Index: []string{index}}).body, &ans); err != nil {
		t.Fatal(err)
	}
	return ans.Count
}

// pos is a test position: the version is the number.
type pos int64

func (p pos) Version() int64 { return int64(p) }
func (p pos) String() string { return "pos " + strconv.FormatInt(int64(p), 10) }

// ordersSchema is a small table: id (PK), name, qty, ok, at.
func ordersSchema(table string) *cdc.TableSchema {
	return &cdc.TableSchema{
		ID: cdc.TableID{Connector: "postgres", Source: "shop", Database: "shop", Schema: "public", Table: table},
		Columns: []cdc.Column{
			{Name: "id", Kind: cdc.KindInt, Bits: 64, SourceType: "bigint"},
			{Name: "name", Kind: cdc.KindText, SourceType: "text", Nullable: true},
			{Name: "qty", Kind: cdc.KindInt, Bits: 32, SourceType: "integer", Nullable: true},
			{Name: "ok", Kind: cdc.KindBool, SourceType: "boolean", Nullable: true},
		},
		PrimaryKey: []int{0},
	}
}

func ev(op cdc.Op, sch *cdc.TableSchema, version int64, before, after []cdc.Value) cdc.Event {
	return cdc.Event{Op: op, Table: sch.ID, Schema: sch, Before: before, After: after, Position: pos(version)}
}

func row(id int64, name string, qty int64) []cdc.Value {
	return []cdc.Value{id, name, qty, qty%2 == 0}
}

// write calls Write and fails the test on an error.
func write(t testing.TB, k *Sink, batch []cdc.Event) []cdc.DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*callTimeout)
	defer cancel()
	dead, err := k.Write(ctx, batch)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return dead
}

// indexOf is the concrete index the sink writes a table to.
func indexOf(t testing.TB, k *Sink, table string) string {
	t.Helper()
	n, err := IndexName(k.cfg.Index, ordersSchema(table).ID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// benchEnv is testenv.Require for benchmarks.
func benchEnv(b *testing.B, name string) string { return testenv.Require(b, name) }

func newBenchTransport(b *testing.B, raw string) *elastictransport.Client {
	u, err := url.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	tp, err := elastictransport.New(elastictransport.Config{URLs: []*url.URL{u}, DisableRetry: true})
	if err != nil {
		b.Fatal(err)
	}
	return tp
}

func enforceBench(b *testing.B, s *server) { s.enforce(b) }

var _ = http.StatusOK

func esapiExists(index string) esapi.Request {
	return esapi.IndicesExistsRequest{Index: []string{index}}
}
