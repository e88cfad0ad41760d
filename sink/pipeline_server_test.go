package sink

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// memDLQ keeps dead letters in memory.
type memDLQ struct {
	mu   sync.Mutex
	recs []cdc.DeadLetterRecord
}

func (d *memDLQ) WriteDeadLetters(_ context.Context, r []cdc.DeadLetterRecord) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recs = append(d.recs, r...)
	return nil
}

// waitRecords waits until at least n dead letters were written, within a generous bound (the
// runner writes them after the batch's documents are visible), and returns a copy of them.
func (d *memDLQ) waitRecords(t *testing.T, n int) []cdc.DeadLetterRecord {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d.mu.Lock()
		recs := slices.Clone(d.recs)
		d.mu.Unlock()
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters after 2 min, want %d", len(recs), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pgExec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestSinkPostgresPipeline runs a real PostgreSQL source through the cdc.Runner into the sink:
// a snapshot, then streamed inserts, updates (one changing the key) and deletes. The index must
// converge to the table, and a row read by the snapshot and the same values streamed later must
// give the same document.
func TestSinkPostgresPipeline(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		sfx := estest.RandomHex(t, 5)
		table := "snk_orders_" + sfx
		pgExec(t, dsn, `CREATE TABLE `+table+` (
			id bigint PRIMARY KEY, name text, qty integer, ok boolean, price numeric(12,2), ratio double precision,
			day date, at timestamp, ts timestamptz, doc jsonb, u uuid, raw bytea, tags text[])`,
			`ALTER TABLE `+table+` REPLICA IDENTITY FULL`)
		const values = `'héllo', 7, true, 1234567.89, 0.5, '2026-11-30', '2026-11-30 12:34:56.123456',
			'2026-11-30 12:34:56.123456+00', '{"a":[1,2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\xdeadbeef', '{x,y}'`
		pgExec(t, dsn, `INSERT INTO `+table+` VALUES (1, `+values+`), (2, 'two', 2, false, 2, 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`)
		src := pgSource(t, dsn, "snk_"+sfx, table)
		st := statestore.NewMemory()
		k, done, stop := runPipeline(t, s, src, st, "pg")
		defer stop()
		dlq := k.dlqForTest
		idx, err := IndexName(k.cfg.Index, cdc.TableID{Database: "postgres", Schema: "public", Table: table})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{"1", "2", "3", "4", "5"}
		wait := func(what string, ok func(map[string]map[string]any) bool) map[string]map[string]any {
			t.Helper()
			return waitDocs(t, s, done, idx, ids, what, ok)
		}
		wait("snapshot", func(d map[string]map[string]any) bool { return len(d) == 2 })
		pgExec(t, dsn,
			`INSERT INTO `+table+` VALUES (3, `+values+`)`,
			`UPDATE `+table+` SET name = 'two v2', qty = 22 WHERE id = 2`,
			`UPDATE `+table+` SET id = 4 WHERE id = 2`,
			`INSERT INTO `+table+` VALUES (5, 'five', 5, true, 5, 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
			`DELETE FROM `+table+` WHERE id = 5`)
		docs := wait("stream", func(d map[string]map[string]any) bool {
			return len(d) == 3 && d["4"] != nil && d["3"] != nil && d["2"] == nil && d["5"] == nil
		})
		if docs["4"]["name"] != "two v2" || jsonNum(docs["4"]["qty"]) != "22" {
			t.Fatalf("row 4 after the key change: %v", docs["4"])
		}
		// The same values from the snapshot (row 1) and from the stream (row 3).
		a, b := docs["1"], docs["3"]
		delete(a, "id")
		delete(b, "id")
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			t.Fatalf("snapshot and stream documents differ:\n snapshot %s\n stream   %s", ja, jb)
		}
		if a["name"] != "héllo" {
			t.Fatalf("text column: %v", a["name"])
		}
		dlq.mu.Lock()
		defer dlq.mu.Unlock()
		if len(dlq.recs) != 0 {
			t.Fatalf("dead letters: %v", dlq.recs[0].Reason)
		}
	})
}

// runPipeline runs src through a cdc.Runner into a new sink until stop is called.
func runPipeline(t *testing.T, s *server, src cdc.Source, st *statestore.Memory, part string) (*pipelineSink, <-chan error, func()) {
	cfg := s.config(part)
	if s.Engine == estest.Elasticsearch {
		// The Elasticsearch test build has neither scaled_float nor unsigned_long
		// (TestSinkUnsupportedFieldType).
		cfg.Mapping = MappingConfig{Decimal: "keyword", Uint64: "keyword"}
	}
	return runPipelineConfig(t, s, src, st, cfg)
}

// runPipelineConfig is runPipeline with the sink's configuration given.
func runPipelineConfig(t *testing.T, s *server, src cdc.Source, st *statestore.Memory, cfg Config) (*pipelineSink, <-chan error, func()) {
	k := &pipelineSink{Sink: s.sinkOpts(t, cfg, st, Options{}), dlqForTest: &memDLQ{}}
	r, err := cdc.NewRunner("orders-to-es", src, k.Sink, st, k.dlqForTest, &cdc.RunnerOptions{BatchMaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return k, done, func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}
}

type pipelineSink struct {
	*Sink
	dlqForTest *memDLQ
}

// waitDocs polls (real-time GET) until ok accepts the documents, the runner stops, or a
// generous bound passes.
func waitDocs(t *testing.T, s *server, done <-chan error, idx string, ids []string, what string, ok func(map[string]map[string]any) bool) map[string]map[string]any {
	t.Helper()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			t.Fatalf("%s: the runner stopped: %v", what, err)
		default:
		}
		if s.IndexExists(t, idx) {
			if docs, _, err := s.docsMaybe(t, idx, ids); err == nil && ok(docs) {
				return docs
			}
		}
		if i > 600 {
			t.Fatalf("%s: the index did not converge", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func jsonNum(v any) string {
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSinkUnsupportedFieldType: a generated mapping the engine cannot hold (scaled_float on
// Elasticsearch's OSS test build) fails index creation with a clear, fatal error -- never
// backpressure that would retry forever, never dead letters.
func TestSinkUnsupportedFieldType(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		k := s.sink(t, s.config("dec"), nil, nil)
		sch := ordersSchema("orders")
		sch.Columns = append(sch.Columns, cdc.Column{Name: "price", Kind: cdc.KindDecimal, Precision: 12, Scale: 2, SourceType: "numeric(12,2)"})
		dead, err := k.Write(context.Background(), []cdc.Event{ev(cdc.Insert, sch, 1, nil, append(row(1, "one", 1), "12.50"))})
		var bp *cdc.BackpressureError
		switch {
		case errors.As(err, &bp):
			t.Fatalf("backpressure for a mapping the cluster refuses: %v", err)
		case len(dead) != 0:
			t.Fatalf("dead letters for a mapping the cluster refuses: %v", dead)
		case err == nil:
			if s.Engine == estest.Elasticsearch {
				t.Log("this Elasticsearch has scaled_float")
			}
		case !strings.Contains(err.Error(), "scaled_float") || !strings.Contains(err.Error(), "creating the index"):
			t.Fatalf("unclear error: %v", err)
		default:
			t.Logf("%s: %v", s.Engine, err)
		}
	})
}

// pgSource is a real PostgreSQL source capturing tables through its own slot and publication
// (both named slot); the test's cleanup drops them and the tables.
func pgSource(t *testing.T, dsn, slot string, tables ...string) *pgcdc.Source {
	t.Helper()
	o := pgcdc.Options{Name: "shop", Slot: slot, Publication: slot, StatusInterval: 200 * time.Millisecond}
	for _, n := range tables {
		o.Tables = append(o.Tables, pgcdc.Table{Name: n})
	}
	src, err := pgcdc.New(dsn, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
		defer cancel()
		if err := src.Drop(ctx); err != nil {
			t.Errorf("drop slot: %v", err)
		}
		for _, n := range tables {
			pgExec(t, dsn, "DROP TABLE IF EXISTS "+n)
		}
	})
	return src
}
