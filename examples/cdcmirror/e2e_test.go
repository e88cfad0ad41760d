package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// The end-to-end tests run cdcmirror's command function -- what the binary runs -- with a
// generated configuration against the real servers, once per search engine (subtests
// elasticsearch and opensearch, each gated on its server): a snapshot, streamed inserts,
// updates and deletes, a graceful stop, and a restart that resumes from the state file.

const (
	initialRows = 300
	waitBound   = 90 * time.Second
)

// row is what the tests compare between table and index: text, an integer, an exact decimal
// (as a rational, so "12.5" and "12.50" agree) and, where the table has one, an unsigned
// 64-bit integer.
type row struct {
	name  string
	qty   int64
	price *big.Rat
	views *uint64 // nil: the table has no unsigned column (PostgreSQL has no such type)
}

// database is one source server under test.
type database interface {
	exec(t *testing.T, stmts ...string)
	rows(t *testing.T) map[int64]row
}

// e2e is one end-to-end scenario: the table's DDL and change statements per source type.
type e2e struct {
	kind   string // postgres | mysql
	table  string
	db     database
	source string // the source: section of the configuration
	// insert returns statements inserting rows [from, to].
	insert func(from, to int) []string
	// unsigned: the table has the BIGINT UNSIGNED column views, filled by viewsOf.
	unsigned bool
}

// viewsOf is row id's views value: above 2^63 and distinct per id, so that neither a signed
// long nor a double (which rounds them all to 2^64) could hold the values.
func viewsOf(id int) uint64 { return math.MaxUint64 - uint64(id) }

func TestEndToEndPostgres(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	forEachEngine(t, func(t *testing.T, eng searchEngine, url string) {
		table := "cdcmirror_e2e_" + randomSuffix(t)
		db := pgDatabase{dsn: dsn, table: table}
		db.exec(t, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, name text NOT NULL, qty integer NOT NULL,
		price numeric(10,2) NOT NULL, active boolean, created_at timestamptz DEFAULT now(), doc jsonb)`)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The slot and the publication the mirror created.
			if src, err := pgcdc.New(dsn, pgcdc.Options{Slot: table, Publication: table}); err != nil {
				t.Error(err)
			} else if err := src.Drop(ctx); err != nil {
				t.Errorf("dropping the slot: %v", err)
			}
			db.exec(t, "DROP TABLE IF EXISTS "+table)
		})
		runEndToEnd(t, eng, url, e2e{
			kind: "postgres", table: table, db: db,
			source: fmt.Sprintf(`source:
  type: postgres
  dsn: "${%s}"
  tables: [public.%s]
  slot: %s
  publication: %s
`, testenv.PostgresDSN, table, table, table),
			insert: func(from, to int) []string {
				return []string{fmt.Sprintf(`INSERT INTO %s (id, name, qty, price, active, doc)
				SELECT i, 'item ' || i, i * 3, i + 0.25, i %% 2 = 0, jsonb_build_object('i', i) FROM generate_series(%d, %d) i`, table, from, to)}
			},
		})
	})
}

func TestEndToEndMySQL(t *testing.T) {
	dsnText := testenv.Require(t, testenv.MySQLDSN)
	dsn, err := parseMySQLDSN(dsnText)
	if err != nil {
		t.Fatal(err)
	}
	forEachEngine(t, func(t *testing.T, eng searchEngine, url string) {
		table := "cdcmirror_e2e_" + randomSuffix(t)
		db := mysqlDatabase{dsn: dsn, table: table}
		db.exec(t, "CREATE TABLE "+table+` (id BIGINT PRIMARY KEY, name VARCHAR(100) NOT NULL, qty INT NOT NULL,
		price DECIMAL(10,2) NOT NULL, views BIGINT UNSIGNED NOT NULL, active BOOLEAN,
		created_at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3), doc JSON)`)
		t.Cleanup(func() { db.exec(t, "DROP TABLE IF EXISTS "+table) })
		serverID, err := strconv.ParseUint(randomSuffix(t), 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		runEndToEnd(t, eng, url, e2e{
			kind: "mysql", table: table, db: db, unsigned: true,
			source: fmt.Sprintf(`source:
  type: mysql
  dsn: "${%s}"
  tables: [%s]
  flavor: mariadb
  server_id: %d
`, testenv.MySQLDSN, table, 1<<24+serverID%(1<<29)),
			insert: func(from, to int) []string {
				var vals []string
				for i := from; i <= to; i++ {
					vals = append(vals, fmt.Sprintf(`(%d, 'item %d', %d, %d.25, %d, %t, JSON_OBJECT('i', %d))`, i, i, i*3, i, viewsOf(i), i%2 == 0, i))
				}
				return []string{"INSERT INTO " + table + " (id, name, qty, price, views, active, doc) VALUES " + strings.Join(vals, ", ")}
			},
		})
	})
}

func runEndToEnd(t *testing.T, eng searchEngine, url string, sc e2e) {
	es := &esNode{t: t, Node: estest.Connect(t, eng.name, url)}
	es.EnforceAutoCreateRule(t)
	// The index template is cdcmirror-e2e-{table}; the table's name is already lowercase.
	index := "cdcmirror-e2e-" + sc.table
	es.DeleteAtCleanup(t, index)

	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	dlqPath := filepath.Join(dir, "dlq.jsonl")
	cfgPath := filepath.Join(dir, "cdcmirror.yaml")
	const pipeline = "e2e"
	mapping := ""
	if eng.mapping != "" {
		mapping = "      mapping: " + eng.mapping + "\n"
	}
	cfg := "pipeline: " + pipeline + "\n" + sc.source + fmt.Sprintf(`sinks:
  - type: elasticsearch
    config:
      id: es-e2e
      url: "${%s}"
      index: "cdcmirror-e2e-{table}"
      id_separator: "|"
      auth: {type: none}
%s      number_of_shards: 1
      number_of_replicas: 0
state: %s
dlq: %s
runner:
  batch_max_events: 100
  batch_max_wait: 50ms
`, eng.urlVar, mapping, statePath, dlqPath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	sc.db.exec(t, sc.insert(1, initialRows)...)
	maxID := initialRows + 30

	// First run: the snapshot, then streamed changes.
	run := startMirror(t, cfgPath)
	es.waitConverged(run, index, sc.db, maxID, "snapshot")

	// The index got the mapping chosen for this engine, and its values are exact in the index
	// too, not only in _source: one term query hits one row's views, where a double would
	// have hit all of them.
	types := es.fieldTypes(index)
	if types["price"] != eng.decimalType {
		t.Errorf("price (DECIMAL(10,2)) is mapped as %q, want %q", types["price"], eng.decimalType)
	}
	if sc.unsigned {
		if types["views"] != eng.uint64Type {
			t.Errorf("views (BIGINT UNSIGNED) is mapped as %q, want %q", types["views"], eng.uint64Type)
		}
		v := strconv.FormatUint(viewsOf(7), 10)
		if n := es.count(index, map[string]any{"term": map[string]any{"views": v}}); n != 1 {
			t.Errorf("a term query for one row's views matched %d documents, want 1", n)
		}
	}

	sc.db.exec(t, append(sc.insert(initialRows+1, initialRows+20),
		"UPDATE "+sc.table+" SET name = CONCAT(name, ' v2'), qty = qty + 1000 WHERE id <= 50",
		"UPDATE "+sc.table+" SET price = price * 2 WHERE id BETWEEN 40 AND 60",
		"DELETE FROM "+sc.table+" WHERE id BETWEEN 51 AND 80",
	)...)
	es.waitConverged(run, index, sc.db, maxID, "stream")
	const changes = initialRows + 20 + 50 + 21 + 30
	m := run.waitMetrics(func(m map[string]float64) bool { return sum(m, "cdcmirror_events_total") >= changes })
	for _, name := range []string{"cdcmirror_bulk_requests_total", "cdcmirror_claims_total", "cdcmirror_batches_total",
		"cdcmirror_checkpoints_total", "cdcmirror_bulk_duration_seconds_count", "cdcmirror_batch_duration_seconds_count"} {
		if sum(m, name) < 1 {
			t.Errorf("%s did not move: %v", name, sum(m, name))
		}
	}
	if v := m[`cdcmirror_bulk_items_total{outcome="applied",pipeline="e2e"}`]; v < initialRows {
		t.Errorf("applied bulk items %v, want at least the %d snapshot rows", v, initialRows)
	}
	if v := sum(m, "cdcmirror_dead_letters_total"); v != 0 {
		t.Errorf("%v dead letters", v)
	}
	if v := sum(m, "cdcmirror_healthy"); v != 1 {
		t.Errorf("healthy gauge %v", v)
	}
	if code := run.healthz(); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	run.stop()

	// The graceful stop kept the checkpoint; nothing was dead-lettered.
	st, err := statestore.Open(statePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := st.LoadCheckpoint(context.Background(), pipeline)
	st.Close()
	if err != nil || cp == nil {
		t.Fatalf("no checkpoint after the stop (err %v)", err)
	}
	if fi, err := os.Stat(dlqPath); err != nil || fi.Size() != 0 {
		t.Fatalf("dead-letter file: %v, %v", fi, err)
	}

	// Second run: it resumes from the checkpoint (no second snapshot) and follows new changes.
	sc.db.exec(t, append(sc.insert(initialRows+21, initialRows+30),
		"DELETE FROM "+sc.table+" WHERE id = 1",
		"UPDATE "+sc.table+" SET name = CONCAT(name, ' v3') WHERE id = 2")...)
	run = startMirror(t, cfgPath)
	es.waitConverged(run, index, sc.db, maxID, "restart")
	m = run.waitMetrics(func(m map[string]float64) bool { return sum(m, "cdcmirror_events_total") >= 12 })
	if v := sum(m, "cdcmirror_events_total"); v >= initialRows {
		t.Errorf("the restarted mirror handled %v events: it read the table again instead of resuming", v)
	}
	run.stop()
}

// mirrorRun is one run of the command function.
type mirrorRun struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error
	addr   string
	log    *syncBuffer
}

func startMirror(t *testing.T, cfgPath string) *mirrorRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &mirrorRun{t: t, cancel: cancel, done: make(chan error, 1), log: &syncBuffer{}}
	addrs := make(chan net.Addr, 1)
	go func() {
		r.done <- command(ctx, []string{"--config", cfgPath, "--metrics-addr", "127.0.0.1:0", "--progress", "auto"}, r.log,
			func(a net.Addr) { addrs <- a })
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cdcmirror log:\n%s", r.log.String())
		}
	})
	t.Cleanup(r.stopQuietly)
	select {
	case a := <-addrs:
		r.addr = a.String()
	case err := <-r.done:
		r.done = nil
		t.Fatalf("cdcmirror ended before listening: %v", err)
	case <-time.After(waitBound):
		t.Fatal("cdcmirror did not start listening")
	}
	// /healthz turns 200 once the runner runs.
	r.waitFor("/healthz", func() string {
		if code := r.healthz(); code != 200 {
			return "status " + strconv.Itoa(code)
		}
		return ""
	})
	return r
}

// stop ends the run as a signal would and wants a clean exit.
func (r *mirrorRun) stop() {
	r.t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Fatalf("cdcmirror did not stop cleanly: %v", err)
		}
		r.done = nil
	case <-time.After(waitBound):
		r.t.Fatal("cdcmirror did not stop")
	}
}

func (r *mirrorRun) stopQuietly() {
	r.cancel()
	if r.done != nil {
		select {
		case <-r.done:
		case <-time.After(waitBound):
		}
		r.done = nil
	}
}

// waitFor polls check until it reports nothing left to wait for (""), failing with its last
// answer when the run ends or the bound passes.
func (r *mirrorRun) waitFor(what string, check func() string) {
	r.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		why := check()
		if why == "" {
			return
		}
		select {
		case err := <-r.done:
			r.done = nil
			r.t.Fatalf("%s: cdcmirror ended: %v (last: %s)", what, err, why)
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not reached within %v: %s", what, waitBound, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *mirrorRun) healthz() int {
	res, err := http.Get("http://" + r.addr + "/healthz")
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

func (r *mirrorRun) waitMetrics(ok func(map[string]float64) bool) map[string]float64 {
	r.t.Helper()
	var m map[string]float64
	r.waitFor("metrics", func() string {
		m = scrape(r.t, nil, "http://"+r.addr+"/metrics")
		if !ok(m) {
			return fmt.Sprintf("%v events counted", sum(m, "cdcmirror_events_total"))
		}
		return ""
	})
	return m
}

// diff describes the first difference between table and index, or "".
func diff(rows map[int64]row, docs map[int64]map[string]any) string {
	for id, r := range rows {
		d, ok := docs[id]
		if !ok {
			return fmt.Sprintf("row %d has no document", id)
		}
		if d["name"] != r.name {
			return fmt.Sprintf("document %d: name differs", id)
		}
		if q, err := strconv.ParseInt(fmt.Sprint(d["qty"]), 10, 64); err != nil || q != r.qty {
			return fmt.Sprintf("document %d: qty differs", id)
		}
		p, ok := new(big.Rat).SetString(fmt.Sprint(d["price"]))
		if !ok || p.Cmp(r.price) != 0 {
			return fmt.Sprintf("document %d: price differs", id)
		}
		if r.views != nil && fmt.Sprint(d["views"]) != strconv.FormatUint(*r.views, 10) {
			return fmt.Sprintf("document %d: views differs", id)
		}
	}
	for id := range docs {
		if _, ok := rows[id]; !ok {
			return fmt.Sprintf("document %d has no row", id)
		}
	}
	return ""
}

// pgDatabase is the PostgreSQL test server.
type pgDatabase struct{ dsn, table string }

func (p pgDatabase) exec(t *testing.T, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// One transaction, so that the stream sees the statements together, as an application's
	// would.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func (p pgDatabase) rows(t *testing.T) map[int64]row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rs, err := conn.Query(ctx, "SELECT id, name, qty, price::text FROM "+p.table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]row{}
	for rs.Next() {
		var id int64
		var r row
		var price string
		if err := rs.Scan(&id, &r.name, &r.qty, &price); err != nil {
			t.Fatal(err)
		}
		r.price, _ = new(big.Rat).SetString(price)
		out[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mysqlDatabase is the MariaDB test server.
type mysqlDatabase struct {
	dsn   mysqlDSN
	table string
}

func (m mysqlDatabase) conn(t *testing.T) *client.Conn {
	t.Helper()
	c, err := client.ConnectWithContext(context.Background(), m.dsn.addr, m.dsn.user, m.dsn.password, m.dsn.db, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (m mysqlDatabase) exec(t *testing.T, stmts ...string) {
	t.Helper()
	c := m.conn(t)
	defer c.Close()
	if _, err := c.Execute("BEGIN"); err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := c.Execute(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if _, err := c.Execute("COMMIT"); err != nil {
		t.Fatal(err)
	}
}

func (m mysqlDatabase) rows(t *testing.T) map[int64]row {
	t.Helper()
	c := m.conn(t)
	defer c.Close()
	res, err := c.Execute("SELECT id, name, qty, CAST(price AS CHAR), views FROM " + m.table)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	out := map[int64]row{}
	for i := range res.RowNumber() {
		id, _ := res.GetInt(i, 0)
		name, _ := res.GetString(i, 1)
		qty, _ := res.GetInt(i, 2)
		price, _ := res.GetString(i, 3)
		p, _ := new(big.Rat).SetString(price)
		views, _ := res.GetUint(i, 4)
		out[id] = row{name: name, qty: qty, price: p, views: &views}
	}
	return out
}

// syncBuffer is a log sink shared by the command's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// randomSuffix is eight random hex digits: a table name part no other run uses, and a
// server id.
func randomSuffix(t *testing.T) string { return estest.RandomHex(t, 4) }

// ---- The search engines --------------------------------------------------------------
//
// Everything below talks to Elasticsearch or OpenSearch; the rest of the file does not.

// searchEngine is one engine the end-to-end tests mirror into, with the sink's mapping
// options that its test server supports.
type searchEngine struct {
	name    string // the subtest's name
	urlVar  string // the environment variable holding the node's URL
	mapping string // the sink's mapping: option (flow YAML), "" for the defaults
	// decimalType and uint64Type are the field types the index must give a DECIMAL(10,2)
	// and a BIGINT UNSIGNED column under that option.
	decimalType, uint64Type string
}

var searchEngines = []searchEngine{
	// The Elasticsearch that scripts/testenv runs is the integration-test distribution: no
	// modules and no x-pack, so neither scaled_float (the mapper-extras module) nor
	// unsigned_long (x-pack) exists, and an index mapped with either cannot be created
	// (sink's TestMappingServerMissingTypes pins the error). keyword keeps both exact.
	{name: estest.Elasticsearch, urlVar: testenv.ElasticsearchURL, mapping: "{decimal: keyword, uint64: keyword}",
		decimalType: "keyword", uint64Type: "keyword"},
	// OpenSearch 2.19 has both: scaled_float from the mapper-extras module that
	// scripts/testenv installs, unsigned_long built in (since 2.8; exact in term and range
	// queries and sorting, which the term query in runEndToEnd relies on). So it runs on the
	// sink's defaults, numeric and exact, as a production OpenSearch would.
	{name: estest.OpenSearch, urlVar: testenv.OpenSearchURL,
		decimalType: "scaled_float", uint64Type: "unsigned_long"},
}

// forEachEngine runs fn as one subtest per search engine, named by engine, each skipped when
// its server's variable is unset. The subtests run one after the other: each is a whole
// pipeline (source server, mirror, search node), and side by side they would only compete
// for the shared machine.
func forEachEngine(t *testing.T, fn func(t *testing.T, eng searchEngine, url string)) {
	for _, eng := range searchEngines {
		t.Run(eng.name, func(t *testing.T) {
			fn(t, eng, testenv.Require(t, eng.urlVar))
		})
	}
}

// esNode talks to the Elasticsearch or OpenSearch test node on behalf of test t.
type esNode struct {
	t *testing.T
	*estest.Node
}

// docs reads documents 1..maxID in real time: _source by _id. An index not there yet is an
// error to wait on, not a failure.
func (e *esNode) docs(index string, maxID int) (map[int64]map[string]any, error) {
	ids := make([]string, maxID)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	docs, err := e.Mget(e.t, index, ids)
	if err != nil {
		return nil, err
	}
	out := map[int64]map[string]any{}
	for _, d := range docs {
		if !d.Found {
			continue
		}
		id, _ := strconv.ParseInt(d.ID, 10, 64)
		if out[id], err = d.Object(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitConverged waits until the index holds exactly the table's rows, document by document.
func (e *esNode) waitConverged(r *mirrorRun, index string, db database, maxID int, what string) {
	e.t.Helper()
	r.waitFor(what+" convergence", func() string {
		docs, err := e.docs(index, maxID)
		if err != nil {
			return err.Error()
		}
		return diff(db.rows(e.t), docs)
	})
}

// fieldTypes reads the index's mapping: the type of each top-level field.
func (e *esNode) fieldTypes(index string) map[string]string {
	e.t.Helper()
	r := e.OK(e.t, esapi.IndicesGetMappingRequest{Index: []string{index}})
	// Keyed by the concrete index, which the fence names; the test reads through its name.
	var ans map[string]struct {
		Mappings struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"mappings"`
	}
	r.Decode(e.t, &ans)
	if len(ans) != 1 {
		e.t.Fatalf("_mapping of %s answered for %d indices", index, len(ans))
	}
	out := map[string]string{}
	for _, m := range ans {
		for name, p := range m.Mappings.Properties {
			out[name] = p.Type
		}
	}
	return out
}

// count refreshes the index and counts the documents matching query.
func (e *esNode) count(index string, query map[string]any) int64 {
	e.t.Helper()
	e.OK(e.t, esapi.IndicesRefreshRequest{Index: []string{index}})
	var ans struct {
		Count int64 `json:"count"`
	}
	e.OK(e.t, esapi.CountRequest{Index: []string{index}, Body: estest.JSONBody(e.t, map[string]any{"query": query})}).Decode(e.t, &ans)
	return ans.Count
}
