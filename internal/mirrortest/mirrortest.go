// Package mirrortest is the test plumbing the end-to-end tests of package mirror and of
// examples/cdcmirror share: a test table on each source server (PostgreSQL, MariaDB) with the
// statements that fill and change it, the row-by-row comparison of table and index, the
// search engines with the sink mapping options their test servers support, and bounded
// polling. Nothing here is used outside tests.
package mirrortest

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// WaitBound bounds every wait of the end-to-end tests: generous, since CI shares two cores
// with six servers; polls end as soon as their condition holds.
const WaitBound = 90 * time.Second

// Row is what the tests compare between table and index: text, an integer, an exact decimal
// (as a rational, so "12.5" and "12.50" agree) and, where the table has one, an unsigned
// 64-bit integer.
type Row struct {
	Name  string
	Qty   int64
	Price *big.Rat
	Views *uint64 // nil: the table has no unsigned column (PostgreSQL has no such type)
}

// Table is one test table on a source server.
type Table interface {
	// Name is the table's name (lower case, so that it is also its index's suffix).
	Name() string
	// Exec runs the statements in one transaction.
	Exec(t testing.TB, stmts ...string)
	// Rows reads the whole table.
	Rows(t testing.TB) map[int64]Row
	// Insert returns statements inserting rows [from, to].
	Insert(from, to int) []string
	// Unsigned: the table has the BIGINT UNSIGNED column views (ViewsOf).
	Unsigned() bool
}

// ViewsOf is row id's views value: above 2^63 and distinct per id, so that neither a signed
// long nor a double (which rounds them all to 2^64) could hold the values.
func ViewsOf(id int) uint64 { return math.MaxUint64 - uint64(id) }

// Changes returns statements that insert rows [from, to], update and delete some of the
// rows 1..80: a stream of every operation.
func Changes(tb Table, from, to int) []string {
	return append(tb.Insert(from, to),
		"UPDATE "+tb.Name()+" SET name = CONCAT(name, ' v2'), qty = qty + 1000 WHERE id <= 50",
		"UPDATE "+tb.Name()+" SET price = price * 2 WHERE id BETWEEN 40 AND 60",
		"DELETE FROM "+tb.Name()+" WHERE id BETWEEN 51 AND 80",
	)
}

// Postgres is a test table on the PostgreSQL server.
type Postgres struct{ DSN, Table string }

// NewPostgres creates the table name on the server at dsn and drops it when the test ends.
func NewPostgres(t testing.TB, dsn, name string) *Postgres {
	p := &Postgres{DSN: dsn, Table: name}
	p.Exec(t, `CREATE TABLE `+name+` (id bigint PRIMARY KEY, name text NOT NULL, qty integer NOT NULL,
		price numeric(10,2) NOT NULL, active boolean, created_at timestamptz DEFAULT now(), doc jsonb)`)
	t.Cleanup(func() { p.Exec(t, "DROP TABLE IF EXISTS "+name) })
	return p
}

func (p *Postgres) Name() string   { return p.Table }
func (p *Postgres) Unsigned() bool { return false }

func (p *Postgres) Insert(from, to int) []string {
	return []string{fmt.Sprintf(`INSERT INTO %s (id, name, qty, price, active, doc)
	SELECT i, 'item ' || i, i * 3, i + 0.25, i %% 2 = 0, jsonb_build_object('i', i) FROM generate_series(%d, %d) i`, p.Table, from, to)}
}

func (p *Postgres) Exec(t testing.TB, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN)
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

func (p *Postgres) Rows(t testing.TB) map[int64]Row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rs, err := conn.Query(ctx, "SELECT id, name, qty, price::text FROM "+p.Table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]Row{}
	for rs.Next() {
		var id int64
		var r Row
		var price string
		if err := rs.Scan(&id, &r.Name, &r.Qty, &price); err != nil {
			t.Fatal(err)
		}
		r.Price, _ = new(big.Rat).SetString(price)
		out[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// MySQL is a test table on the MariaDB server.
type MySQL struct {
	DSN   testenv.MySQL
	Table string
}

// NewMySQL creates the table name on the server dsn names and drops it when the test ends.
func NewMySQL(t testing.TB, dsn, name string) *MySQL {
	d, err := testenv.ParseMySQLDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	m := &MySQL{DSN: d, Table: name}
	m.Exec(t, "CREATE TABLE "+name+` (id BIGINT PRIMARY KEY, name VARCHAR(100) NOT NULL, qty INT NOT NULL,
		price DECIMAL(10,2) NOT NULL, views BIGINT UNSIGNED NOT NULL, active BOOLEAN,
		created_at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3), doc JSON)`)
	t.Cleanup(func() { m.Exec(t, "DROP TABLE IF EXISTS "+name) })
	return m
}

func (m *MySQL) Name() string   { return m.Table }
func (m *MySQL) Unsigned() bool { return true }

func (m *MySQL) Insert(from, to int) []string {
	var vals []string
	for i := from; i <= to; i++ {
		vals = append(vals, fmt.Sprintf(`(%d, 'item %d', %d, %d.25, %d, %t, JSON_OBJECT('i', %d))`, i, i, i*3, i, ViewsOf(i), i%2 == 0, i))
	}
	return []string{"INSERT INTO " + m.Table + " (id, name, qty, price, views, active, doc) VALUES " + strings.Join(vals, ", ")}
}

func (m *MySQL) conn(t testing.TB) *client.Conn {
	t.Helper()
	c, err := client.ConnectWithContext(context.Background(), m.DSN.Addr, m.DSN.User, m.DSN.Password, m.DSN.DB, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (m *MySQL) Exec(t testing.TB, stmts ...string) {
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

func (m *MySQL) Rows(t testing.TB) map[int64]Row {
	t.Helper()
	c := m.conn(t)
	defer c.Close()
	res, err := c.Execute("SELECT id, name, qty, CAST(price AS CHAR), views FROM " + m.Table)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	out := map[int64]Row{}
	for i := range res.RowNumber() {
		id, _ := res.GetInt(i, 0)
		name, _ := res.GetString(i, 1)
		qty, _ := res.GetInt(i, 2)
		price, _ := res.GetString(i, 3)
		p, _ := new(big.Rat).SetString(price)
		views, _ := res.GetUint(i, 4)
		out[id] = Row{Name: name, Qty: qty, Price: p, Views: &views}
	}
	return out
}

// ServerID is a MySQL replica id no other test run uses.
func ServerID(t testing.TB) uint32 {
	n, err := strconv.ParseUint(estest.RandomHex(t, 4), 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(1<<24 + n%(1<<29))
}

// Diff describes the first difference between table and index, or "".
func Diff(rows map[int64]Row, docs map[int64]map[string]any) string {
	for id, r := range rows {
		d, ok := docs[id]
		if !ok {
			return fmt.Sprintf("row %d has no document", id)
		}
		if d["name"] != r.Name {
			return fmt.Sprintf("document %d: name differs", id)
		}
		if q, err := strconv.ParseInt(fmt.Sprint(d["qty"]), 10, 64); err != nil || q != r.Qty {
			return fmt.Sprintf("document %d: qty differs", id)
		}
		p, ok := new(big.Rat).SetString(fmt.Sprint(d["price"]))
		if !ok || p.Cmp(r.Price) != 0 {
			return fmt.Sprintf("document %d: price differs", id)
		}
		if r.Views != nil && fmt.Sprint(d["views"]) != strconv.FormatUint(*r.Views, 10) {
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

// Engine is one engine the end-to-end tests mirror into, with the sink's mapping options
// that its test server supports.
type Engine struct {
	Name   string // the subtest's name
	URLVar string // the environment variable holding the node's URL
	// Mapping is the sink's mapping: option (flow YAML), "" for the defaults.
	Mapping string
	// DecimalType and Uint64Type are the field types the index must give a DECIMAL(10,2) and
	// a BIGINT UNSIGNED column under that option.
	DecimalType, Uint64Type string
}

// MappingYAML is the sink's mapping: line for the engine at the given indentation, or "".
func (e Engine) MappingYAML(indent string) string {
	if e.Mapping == "" {
		return ""
	}
	return indent + "mapping: " + e.Mapping + "\n"
}

// Engines are the search engines of the test environment.
var Engines = []Engine{
	// The Elasticsearch that scripts/testenv runs is the integration-test distribution: no
	// modules and no x-pack, so neither scaled_float (the mapper-extras module) nor
	// unsigned_long (x-pack) exists, and an index mapped with either cannot be created
	// (sink's TestMappingServerMissingTypes pins the error). keyword keeps both exact.
	{Name: estest.Elasticsearch, URLVar: testenv.ElasticsearchURL, Mapping: "{decimal: keyword, uint64: keyword}",
		DecimalType: "keyword", Uint64Type: "keyword"},
	// OpenSearch 2.19 has both: scaled_float from the mapper-extras module that
	// scripts/testenv installs, unsigned_long built in (since 2.8; exact in term and range
	// queries and sorting). So it runs on the sink's defaults, numeric and exact, as a
	// production OpenSearch would.
	{Name: estest.OpenSearch, URLVar: testenv.OpenSearchURL, DecimalType: "scaled_float", Uint64Type: "unsigned_long"},
}

// EachEngine runs fn as one subtest per engine, each skipped when its server's variable is
// unset. The subtests run one after the other: each is a whole pipeline, and side by side
// they would only compete for the shared machine.
func EachEngine(t *testing.T, fn func(t *testing.T, eng Engine, node *Node)) {
	for _, eng := range Engines {
		t.Run(eng.Name, func(t *testing.T) {
			url := testenv.Require(t, eng.URLVar)
			n := &Node{Node: estest.Connect(t, eng.Name, url)}
			n.EnforceAutoCreateRule(t)
			fn(t, eng, n)
		})
	}
}

// Node is the Elasticsearch or OpenSearch test node.
type Node struct {
	*estest.Node
}

// Docs reads documents 1..maxID in real time: _source by _id. An index not there yet is an
// error to wait on, not a failure.
func (n *Node) Docs(t testing.TB, index string, maxID int) (map[int64]map[string]any, error) {
	ids := make([]string, maxID)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	docs, err := n.Mget(t, index, ids)
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

// Converged is a WaitFor check: "" once the index holds exactly the table's rows, document
// by document.
func (n *Node) Converged(t testing.TB, index string, tb Table, maxID int) func() string {
	return func() string {
		docs, err := n.Docs(t, index, maxID)
		if err != nil {
			return err.Error()
		}
		return Diff(tb.Rows(t), docs)
	}
}

// FieldTypes reads the index's mapping: the type of each top-level field.
func (n *Node) FieldTypes(t testing.TB, index string) map[string]string {
	t.Helper()
	r := n.OK(t, esapi.IndicesGetMappingRequest{Index: []string{index}})
	var ans map[string]struct {
		Mappings struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"mappings"`
	}
	r.Decode(t, &ans)
	if len(ans) != 1 {
		t.Fatalf("_mapping of %s answered for %d indices", index, len(ans))
	}
	out := map[string]string{}
	for _, m := range ans {
		for name, p := range m.Mappings.Properties {
			out[name] = p.Type
		}
	}
	return out
}

// CountMatching refreshes the index and counts the documents matching query.
func (n *Node) CountMatching(t testing.TB, index string, query map[string]any) int64 {
	t.Helper()
	n.OK(t, esapi.IndicesRefreshRequest{Index: []string{index}})
	var ans struct {
		Count int64 `json:"count"`
	}
	n.OK(t, esapi.CountRequest{Index: []string{index}, Body: estest.JSONBody(t, map[string]any{"query": query})}).Decode(t, &ans)
	return ans.Count
}

// WaitFor polls check until it reports nothing left to wait for (""), failing with its last
// answer when ended reports an error (the mirror under test stopped; nil: it runs) or
// WaitBound passes.
func WaitFor(t testing.TB, what string, ended func() error, check func() string) {
	t.Helper()
	deadline := time.Now().Add(WaitBound)
	for {
		why := check()
		if why == "" {
			return
		}
		if ended != nil {
			if err := ended(); err != nil {
				t.Fatalf("%s: the mirror ended: %v (last: %s)", what, err, why)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v: %s", what, WaitBound, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
