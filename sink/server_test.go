package sink

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// server is one real Elasticsearch or OpenSearch node.
type server struct {
	*estest.Node
	prefix string // every index a test makes starts with it
}

// engines runs fn once per engine as subtests (or sub-benchmarks) named by engine. Not
// parallel: the tests may set the cluster-wide action.auto_create_index (and put it back).
func engines[T estest.Runner[T]](t T, fn func(t T, s *server)) {
	estest.EachEngine(t, func(t T, n *estest.Node) {
		s := &server{Node: n, prefix: estest.UniqueName(t, "snk")}
		s.DeleteAtCleanup(t, s.prefix+"*")
		// Claims depend on the cluster-wide auto-create rule, which other packages' tests
		// change: this also keeps this process's view of it stable.
		s.EnforceAutoCreateRule(t)
		fn(t, s)
	})
}

// config is a sink configuration for this server and test.
func (s *server) config(part string) Config {
	return Config{ID: "es-test", URL: s.URL, Index: s.prefix + "-" + part + "-{table}", Auth: Auth{Type: AuthNone},
		Shards: 1, Replicas: estest.Ptr(0)}
}

// sink builds a sink writing through the state store (a new memory store when nil).
func (s *server) sink(t testing.TB, cfg Config, st statestore.Store, tp esapi.Transport) *Sink {
	t.Helper()
	return s.sinkOpts(t, cfg, st, Options{Transport: tp})
}

// sinkOpts builds a sink with options (pipeline and retry backoff filled in).
func (s *server) sinkOpts(t testing.TB, cfg Config, st statestore.Store, o Options) *Sink {
	t.Helper()
	if st == nil {
		st = statestore.NewMemory()
	}
	o.ItemRetryBackoff = time.Millisecond
	k, err := New(cfg, "orders-to-es", st, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func (s *server) refresh(t testing.TB, index string) {
	t.Helper()
	s.OK(t, esapi.IndicesRefreshRequest{Index: []string{index}})
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

// docsMaybe is docs that reports a document error (a shard still starting) instead of failing;
// an answer other than 200 still fails the test.
func (s *server) docsMaybe(t testing.TB, index string, ids []string) (map[string]map[string]any, map[string]int64, error) {
	t.Helper()
	docs, err := s.Mget(t, index, ids)
	var status *estest.StatusError
	if errors.As(err, &status) {
		t.Fatal(err)
	}
	if err != nil {
		return nil, nil, err
	}
	out := map[string]map[string]any{}
	vers := map[string]int64{}
	for _, d := range docs {
		if !d.Found {
			continue
		}
		if out[d.ID], err = d.Object(); err != nil {
			t.Fatal(err)
		}
		vers[d.ID] = d.Version
	}
	return out, vers, nil
}

// count is the number of documents in index after a refresh.
func (s *server) count(t testing.TB, index string) int {
	t.Helper()
	s.refresh(t, index)
	ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
	defer cancel()
	n, err := s.Count(ctx, index)
	if err != nil {
		t.Fatal(err)
	}
	return n
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*estest.CallTimeout)
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
