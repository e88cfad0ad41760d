package sink

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// toastConfig is a sink configuration for the unchanged-value tests: the h2toast part of the
// index names, and mapping options the Elasticsearch test build can hold.
func (s *server) toastConfig(part string) Config {
	cfg := s.config("h2toast-" + part)
	if s.Engine == estest.Elasticsearch {
		cfg.Mapping = MappingConfig{Decimal: "keyword", Uint64: "keyword"}
	}
	return cfg
}

// On the real engines: a value filled from the stored document is its JSON byte for byte (a
// filtered _source would have turned the number into a double), and an _mget through a write
// alias another claim rotated away, or of a deleted index, is the fence's refusal.
func TestSinkUnchangedFromIndex(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		st := statestore.NewMemory()
		a := s.sink(t, s.toastConfig("idx"), st, nil)
		sch := toastSchema("t")
		const doc = `{"n":12345678901234567890.123,"e":1e-5,"s":"x\u2028y"}`
		write(t, a, []cdc.Event{ev(cdc.Insert, sch, 1, nil, []cdc.Value{int64(1), int64(1), "big", cdc.RawJSON(doc), cdc.Base64("AP8=")})})
		if dead := write(t, a, []cdc.Event{ev(cdc.Update, sch, 2, nil, []cdc.Value{int64(1), int64(2), unchanged, unchanged, unchanged})}); len(dead) != 0 {
			t.Fatalf("dead letters %v", dead)
		}
		idx := indexOf(t, a, "t")
		got := s.GetDoc(t, idx, "1")
		want, err := AppendDocument(nil, sch, []cdc.Value{int64(1), int64(2), "big", cdc.RawJSON(doc), cdc.Base64("AP8=")})
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 2 || !bytes.Equal(got.Source, want) {
			t.Fatalf("stored version %d, _source\n %s\nwant\n %s", got.Version, got.Source, want)
		}

		// A copy of the deployment claims the index: a's alias is gone.
		b := s.sink(t, s.toastConfig("idx"), st, nil)
		write(t, b, []cdc.Event{ev(cdc.Insert, sch, 3, nil, toastRow(2, 2, "two"))})
		upd := []cdc.Event{ev(cdc.Update, sch, 4, nil, []cdc.Value{int64(1), int64(4), unchanged, unchanged, unchanged})}
		dead, err := a.Write(context.Background(), upd)
		var bp *cdc.BackpressureError
		if len(dead) != 0 || !errors.Is(err, esfence.Fenced) || errors.As(err, &bp) {
			t.Fatalf("through the rotated alias: dead %v, err %v; want a fenced refusal", dead, err)
		}
		s.OK(t, esapi.IndicesDeleteRequest{Index: []string{idx}})
		if _, err := b.Write(context.Background(), upd); !errors.Is(err, esfence.DestinationMissing) {
			t.Fatalf("after the index was deleted: %v, want destination_missing", err)
		}
	})
}

// unchangedCounter sums what the sink reports about unchanged values.
type unchangedCounter struct {
	noObserver
	mu  sync.Mutex
	sum UnchangedStats
}

func (c *unchangedCounter) UnchangedFilled(s UnchangedStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum.Rows += s.Rows
	c.sum.FromBatch += s.FromBatch
	c.sum.FromIndex += s.FromIndex
	c.sum.Superseded += s.Superseded
	c.sum.DeadLettered += s.DeadLettered
	c.sum.Requests += s.Requests
}

// TestSinkUnchangedToastPipeline: a real PostgreSQL table with the default replica identity
// and TOASTed text, jsonb and bytea columns (random content, about 10 KB each, so stored out of
// line), snapshotted, then updated without touching them -- several times per transaction,
// after an update that did change them, across a key change, alone in a later transaction. The
// source leaves those values out (cdc.Unchanged), and every document must still equal its
// table row field by field.
func TestSinkUnchangedToastPipeline(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		sfx := estest.RandomHex(t, 5)
		table := "h2toast_" + sfx
		pgExec(t, dsn, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, n integer, note text, big text, doc jsonb, raw bytea)`)
		// 320 md5 digests: 10240 characters of hex, 5120 random bytes.
		const big = `(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 320))`
		pgExec(t, dsn, `INSERT INTO `+table+` SELECT g, g, 'note', `+big+`, jsonb_build_object('k', `+big+`, 'n', 12345678901234567890.5), decode(`+big+`, 'hex')
			FROM generate_series(1, 6) g`,
			`INSERT INTO `+table+` VALUES (7, 7, 'small', 'small', '{"a":1}', '\x00')`)
		src := pgSource(t, dsn, table, table)
		obs := &unchangedCounter{}
		st := statestore.NewMemory()
		k := &pipelineSink{Sink: s.sinkOpts(t, s.toastConfig("pg"), st, Options{Observer: obs}), dlqForTest: &memDLQ{}}
		r, err := cdc.NewRunner("h2toast", src, k.Sink, st, k.dlqForTest, &cdc.RunnerOptions{BatchMaxWait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		}()
		idx, err := IndexName(k.cfg.Index, cdc.TableID{Database: "postgres", Schema: "public", Table: table})
		if err != nil {
			t.Fatal(err)
		}
		converge := func(what string) {
			t.Helper()
			var diff string
			for i := 0; ; i++ {
				select {
				case err := <-done:
					t.Fatalf("%s: the runner stopped: %v", what, err)
				default:
				}
				if diff = toastDiff(t, s, dsn, table, idx); diff == "" {
					return
				}
				if i > 600 {
					t.Fatalf("%s: the index did not converge: %s", what, diff)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		converge("snapshot")

		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		tx := func(stmts ...string) {
			t.Helper()
			var b pgx.Batch
			for _, q := range stmts {
				b.Queue(strings.ReplaceAll(q, "$t", table))
			}
			cctx, ccancel := context.WithTimeout(context.Background(), estest.CallTimeout)
			defer ccancel()
			if err := pgx.BeginTxFunc(cctx, conn, pgx.TxOptions{}, func(tx pgx.Tx) error {
				return tx.SendBatch(cctx, &b).Close()
			}); err != nil {
				t.Fatal(err)
			}
		}
		// Alone in its transaction: filled from the index.
		tx(`UPDATE $t SET n = n + 10 WHERE id = 1`)
		converge("a lone update")
		tx( // several per transaction, the same row more than once
			`UPDATE $t SET n = n + 1 WHERE id = 1`,
			`UPDATE $t SET note = 'two' WHERE id = 2`,
			`UPDATE $t SET n = n + 1 WHERE id = 1`,
			`UPDATE $t SET note = 'one' WHERE id = 1`,
			// after an update that changed the TOASTed values
			`UPDATE $t SET big = `+big+`, raw = decode(`+big+`, 'hex') WHERE id = 3`,
			`UPDATE $t SET n = 33 WHERE id = 3`,
			`UPDATE $t SET doc = jsonb_build_object('k', `+big+`) WHERE id = 4`,
			`UPDATE $t SET n = 44 WHERE id = 4`,
			// across a key change
			`UPDATE $t SET id = 50 WHERE id = 5`,
			`UPDATE $t SET n = 55 WHERE id = 50`)
		tx(`UPDATE $t SET n = 66 WHERE id = 6`, `UPDATE $t SET note = NULL WHERE id = 7`)
		converge("updates that leave TOASTed values alone")
		tx(`UPDATE $t SET id = 60 WHERE id = 6`)
		tx(`UPDATE $t SET n = 600 WHERE id = 60`, `UPDATE $t SET n = 11 WHERE id = 1`)
		converge("a key change, then an update in the next transaction")

		k.dlqForTest.mu.Lock()
		for _, d := range k.dlqForTest.recs {
			t.Errorf("dead letter: %s", d.Reason)
		}
		k.dlqForTest.mu.Unlock()
		obs.mu.Lock()
		sum := obs.sum
		obs.mu.Unlock()
		t.Logf("%s: unchanged values %+v", s.Engine, sum)
		if sum.FromIndex == 0 || sum.Requests == 0 || sum.DeadLettered != 0 {
			t.Fatalf("the index supplied no unchanged values (%+v): the test did not exercise the _mget", sum)
		}
	})
}

// toastDiff compares every row of the table with its document, field by field, and describes
// the first difference (by id and column, sizes only); "" when they all agree and the index
// holds no other document.
func toastDiff(t *testing.T, s *server, dsn, table, idx string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT id, n, note, big, doc::text, raw FROM `+table+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type pgRow struct {
		id        int64
		n         *int32
		note, big *string
		doc       *string
		raw       []byte
	}
	var want []pgRow
	for rows.Next() {
		var r pgRow
		if err := rows.Scan(&r.id, &r.n, &r.note, &r.big, &r.doc, &r.raw); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !s.IndexExists(t, idx) {
		return "no index yet"
	}
	s.refresh(t, idx)
	if n := s.count(t, idx); n != len(want) {
		return fmt.Sprintf("%d documents for %d rows", n, len(want))
	}
	ids := make([]string, len(want))
	for i, r := range want {
		ids[i] = fmt.Sprint(r.id)
	}
	docs, _, err := s.docsMaybe(t, idx, ids)
	if err != nil {
		return err.Error()
	}
	for _, r := range want {
		d := docs[fmt.Sprint(r.id)]
		if d == nil {
			return fmt.Sprintf("row %d: no document", r.id)
		}
		var n any
		if r.n != nil {
			n = json.Number(fmt.Sprint(*r.n))
		}
		var rawWant any
		if r.raw != nil {
			rawWant = base64.StdEncoding.EncodeToString(r.raw)
		}
		fields := []struct {
			name      string
			got, want any
		}{
			{"id", d["id"], json.Number(fmt.Sprint(r.id))},
			{"n", d["n"], n},
			{"note", d["note"], strOrNil(r.note)},
			{"big", d["big"], strOrNil(r.big)},
			{"doc", d["doc"], jsonOrNil(t, r.doc)},
			{"raw", d["raw"], rawWant},
		}
		for _, f := range fields {
			if !reflect.DeepEqual(f.got, f.want) {
				return fmt.Sprintf("row %d: column %s differs (%d vs %d bytes of JSON)", r.id, f.name, jsonLen(f.got), jsonLen(f.want))
			}
		}
		if len(d) != len(fields) {
			return fmt.Sprintf("row %d: %d fields", r.id, len(d))
		}
	}
	return ""
}

func strOrNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func jsonOrNil(t *testing.T, p *string) any {
	if p == nil {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(*p))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func jsonLen(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}
