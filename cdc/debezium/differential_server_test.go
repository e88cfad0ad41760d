package debezium_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/debezium"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/connecttest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The differential leg through the real Debezium connectors (issue 32): random tables drawn
// from the edge values of the package documentation's value table, random changes, the
// native source (pgcdc, mysqlcdc) and the Debezium source read side by side, and their
// documents compared field by field. A value the table calls exact must give the native
// document; a value it calls dead-lettered must give a Malformed event whose reason says why
// (and the row's document is then left out of the comparison); nothing else may differ.
// make check runs one case per source (TestDebeziumDifferential); make differential runs
// TRIBUTARY_DBZ_DIFF_CASES of them (TRIBUTARY_DBZ_DIFF_SEED repeats one).

// edgeVal is one literal of a column: loud, when set, is a substring of the dead letter's
// reason the Debezium path must give a row holding it; "" for a value that must be exact.
type edgeVal struct{ lit, loud string }

// edgeCol is a column of the pool: its SQL type and values; its first value is exact and not
// NULL (the end marker's).
type edgeCol struct {
	name, typ string
	vals      []edgeVal
}

func exact(lits ...string) []edgeVal {
	out := make([]edgeVal, len(lits))
	for i, l := range lits {
		out[i] = edgeVal{lit: l}
	}
	return out
}

func loud(reason string, lits ...string) []edgeVal {
	out := make([]edgeVal, len(lits))
	for i, l := range lits {
		out[i] = edgeVal{lit: l, loud: reason}
	}
	return out
}

const multiDim = "multi-dimensional"

// pgEdgeCols are PostgreSQL's columns under decimal.handling.mode=string and the adaptive
// time precision modes.
var pgEdgeCols = []edgeCol{
	{"nu", "numeric", exact("1.50", "'NaN'", "'Infinity'", "'-Infinity'", "-0.001", "123456789012345678901234567890.123456789", "0", "NULL")},
	{"nc", "numeric(10,2)", exact("1.5", "'NaN'", "-99999999.99", "0", "NULL")},
	{"d", "date", exact("'2024-02-29'", "'infinity'", "'-infinity'", "'0001-01-01 BC'", "'4713-01-01 BC'", "'5874897-12-31'", "'10000-01-01'", "NULL")},
	{"ts", "timestamp", append(exact("'2024-01-02 03:04:05.123456'", "'infinity'", "'-infinity'", "'4713-01-01 00:00:00 BC'", "'10000-01-01 00:00:00'", "NULL"),
		loud("overflowed", "'294276-12-31 23:59:59.999999'")...)},
	{"tz", "timestamptz", exact("'2024-01-02 03:04:05.654321+02'", "'infinity'", "'-infinity'", "'10000-01-01 00:00:00+00'", "'0001-01-01 00:00:00+00 BC'", "NULL")},
	{"t6", "time(6)", exact("'13:14:15.654321'", "'24:00:00'", "'00:00:00'", "NULL")},
	{"ts3", "timestamp(3)", exact("'1999-12-31 23:59:59.999'", "'infinity'", "NULL")},
	{"t0", "time(0)", exact("'23:59:59'", "NULL")},
	{"f8", "float8", exact("1.5", "'NaN'", "'Infinity'", "'-Infinity'", "'-0'", "NULL")},
	{"ia", "int[]", append(exact("'{1,2}'", "'{}'", "NULL"), loud(multiDim, "'{{1,2},{3,4}}'", "'{NULL,1}'")...)},
	{"ta", "text[]", append(exact(`'{"a","b"}'`, `'{NULL,"x"}'`, "NULL"), loud(multiDim, `'{{"a"},{"b"}}'`)...)},
	{"na", "numeric[]", append(exact("'{1.5,2}'"), loud("numeric array", "NULL", "'{NaN}'")...)},
	{"da", "date[]", append(exact("'{infinity,2024-01-01}'", "'{-infinity}'", "NULL"), loud(multiDim, "'{NULL}'")...)},
}

// myEdgeCols are MariaDB's columns under time.precision.mode=adaptive_time_microseconds,
// without Options.PlainDates.
var myEdgeCols = []edgeCol{
	{"t", "TIME", exact("'838:59:59'", "'-838:59:59'", "'24:00:00'", "'00:00:00'", "NULL")},
	{"t6", "TIME(6)", exact("'-838:59:59.000000'", "'-00:00:00.000001'", "'12:00:00.5'", "NULL")},
	{"dt6", "DATETIME(6)", append(exact("'2024-01-02 03:04:05.123456'", "'9999-12-31 23:59:59.999999'", "'1000-01-01 00:00:00'"),
		loud("zero dates", "NULL", "'0000-00-00 00:00:00'", "'2024-00-15 00:00:00'")...)},
	{"d", "DATE NOT NULL", append(exact("'2024-02-29'", "'9999-12-31'", "'1000-01-01'"), loud("zero dates", "'1970-01-01'", "'0000-00-00'")...)},
	{"ts", "TIMESTAMP(6) NULL", exact("'2038-01-19 03:14:07.999999'", "'2001-01-01 00:00:00'", "'0000-00-00 00:00:00'", "NULL")},
	{"de", "DECIMAL(65,30)", exact("-1.5", "0", "12345678901234567890123456789012345.123456789012345678901234567890", "NULL")},
	{"f", "DOUBLE", exact("1.5e300", "-0", "NULL")},
}

// pgPreciseConnect is pgEdgeCols for decimal.handling.mode=precise and
// time.precision.mode=connect: without the columns those settings refuse (unconstrained
// numeric, timestamp and time with microseconds), numeric(10,2) NOT NULL without NaN (a NaN
// there stops the connector's task: nothing arrives after it).
func pgPreciseConnect() []edgeCol {
	var out []edgeCol
	for _, c := range pgEdgeCols {
		switch c.name {
		case "nu", "na", "ts", "t6":
			continue
		case "nc":
			c = edgeCol{"nc", "numeric(10,2) NOT NULL", exact("1.5", "-99999999.99", "0")}
		}
		out = append(out, c)
	}
	return out
}

// myPlainDates is myEdgeCols for Options.PlainDates: no zero date is written, NULL and
// 1970-01-01 are exact.
func myPlainDates() []edgeCol {
	var out []edgeCol
	for _, c := range myEdgeCols {
		var vals []edgeVal
		for _, v := range c.vals {
			switch {
			case strings.Contains(v.lit, "-00"):
				continue
			case v.loud == "zero dates":
				v.loud = ""
			}
			vals = append(vals, v)
		}
		c.vals = vals
		out = append(out, c)
	}
	return out
}

// myConnect is myEdgeCols for time.precision.mode=connect: without the columns it refuses
// (TIME, DATETIME(6)).
func myConnect() []edgeCol {
	var out []edgeCol
	for _, c := range myEdgeCols {
		if c.name != "t" && c.name != "t6" && c.name != "dt6" {
			out = append(out, c)
		}
	}
	return out
}

// edgeCase is one drawn case: the table's columns and the writes.
type edgeCase struct {
	rng   *rand.Rand
	cols  []edgeCol
	rows  map[int][]int // live rows: key -> value index per column
	next  int
	louds int // writes whose row holds a loud value
	// noopSilent: the source writes no event for an update that changes nothing (MariaDB).
	noopSilent bool
}

func (c *edgeCase) ddl(table string) string {
	parts := []string{"id int PRIMARY KEY"}
	for _, col := range c.cols {
		parts = append(parts, col.name+" "+col.typ)
	}
	return fmt.Sprintf("CREATE TABLE %s (%s)", table, strings.Join(parts, ", "))
}

func (c *edgeCase) loudRow(row []int) bool {
	for i, v := range row {
		if c.cols[i].vals[v].loud != "" {
			return true
		}
	}
	return false
}

func (c *edgeCase) insert(table string, id int, row []int) string {
	lits := []string{strconv.Itoa(id)}
	for i, v := range row {
		lits = append(lits, c.cols[i].vals[v].lit)
	}
	return fmt.Sprintf("INSERT INTO %s VALUES (%s)", table, strings.Join(lits, ", "))
}

// change draws one statement: an insert of a new row, an update of random columns of a live
// row, or a delete of one.
func (c *edgeCase) change(table string) string {
	if len(c.rows) == 0 || c.rng.IntN(3) == 0 {
		row := make([]int, len(c.cols))
		for i := range row {
			row[i] = c.draw(i)
		}
		c.next++
		c.rows[c.next] = row
		if c.loudRow(row) {
			c.louds++
		}
		return c.insert(table, c.next, row)
	}
	if c.rng.IntN(40) == 0 {
		clear(c.rows)
		return "TRUNCATE " + table
	}
	var ids []int
	for id := range c.rows {
		ids = append(ids, id)
	}
	id := ids[c.rng.IntN(len(ids))]
	if c.rng.IntN(4) == 0 {
		delete(c.rows, id)
		return fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, id)
	}
	row := c.rows[id]
	old := append([]int(nil), row...)
	var sets []string
	for i := range c.cols {
		if len(sets) == 0 || c.rng.IntN(2) == 0 {
			row[i] = c.draw(i)
			sets = append(sets, c.cols[i].name+" = "+c.cols[i].vals[row[i]].lit)
		}
	}
	// MariaDB logs no row event for an update that changes nothing.
	if c.loudRow(row) && !(c.noopSilent && slices.Equal(old, row)) {
		c.louds++
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE id = %d", table, strings.Join(sets, ", "), id)
}

// draw picks a value of column i: one in six from all its values, otherwise from its exact
// ones, so that most rows compare field by field.
func (c *edgeCase) draw(i int) int {
	vals := c.cols[i].vals
	for {
		v := c.rng.IntN(len(vals))
		if vals[v].loud == "" || c.rng.IntN(6) == 0 {
			return v
		}
	}
}

func newEdgeCase(seed uint64, pool []edgeCol) *edgeCase {
	rng := rand.New(rand.NewPCG(seed, 32))
	c := &edgeCase{rng: rng, rows: map[int][]int{}}
	for _, col := range pool {
		if rng.IntN(3) != 0 {
			c.cols = append(c.cols, col)
		}
	}
	if len(c.cols) == 0 {
		c.cols = pool[:1]
	}
	return c
}

// TestDebeziumDifferential runs the differential leg: by default one case per source (make
// check), TRIBUTARY_DBZ_DIFF_CASES cases alternating between them otherwise.
func TestDebeziumDifferential(t *testing.T) {
	connecttest.Require(t)
	cases, changes := 2, 40
	if n, err := strconv.Atoi(os.Getenv("TRIBUTARY_DBZ_DIFF_CASES")); err == nil && n > 0 {
		cases, changes = n, 120
	}
	base := rand.Uint64()
	if s, err := strconv.ParseUint(os.Getenv("TRIBUTARY_DBZ_DIFF_SEED"), 10, 64); err == nil {
		base = s
	}
	for i := range cases {
		seed := base + uint64(i)
		if seed%2 == 0 {
			t.Run(fmt.Sprintf("postgres-seed-%d", seed), func(t *testing.T) { pgEdgeCase(t, seed, changes) })
		} else {
			t.Run(fmt.Sprintf("mariadb-seed-%d", seed), func(t *testing.T) { myEdgeCase(t, seed, changes) })
		}
	}
}

func pgEdgeCase(t *testing.T, seed uint64, changes int) {
	dsn := testenv.Require(t, "TRIBUTARY_PG_DSN")
	conn := connecttest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	variant := rand.New(rand.NewPCG(seed, 1)).IntN(4)
	pool := pgEdgeCols
	if variant == 3 {
		pool = pgPreciseConnect()
	}
	c := newEdgeCase(seed, pool)
	table := fmt.Sprintf("d32dz_pg_%d", rand.Uint32())
	exec := pgSession(ctx, t, dsn, "DROP TABLE IF EXISTS "+table)
	exec(c.ddl(table))
	nst, closeNative := nativePostgres(ctx, t, dsn, table)
	defer closeNative()
	// Variants: 0 string and adaptive, 1 string and adaptive_time_microseconds, 2 without
	// schemas (the catalog's columns), 3 precise and connect on the columns they can carry.
	prefix := "d32dz" + table[len("d32dz_pg_"):]
	cfg := connecttest.PostgresConnector{TopicPrefix: prefix, Tables: []string{"public." + table},
		Slot: table + "_dbz", Publication: table + "_dbz", DecimalHandling: "string"}
	opts := &debezium.Options{Name: "pg"}
	switch variant {
	case 1:
		cfg.TimePrecision = "adaptive_time_microseconds"
	case 2:
		cfg.NoSourceTypes, cfg.Extra = true, schemaless(map[string]string{})
		catalog, err := pgcdc.New(dsn, &pgcdc.Options{Name: "pg"})
		if err != nil {
			t.Fatal(err)
		}
		opts.Catalog, opts.DecimalStrings = catalog, true
	case 3:
		cfg.DecimalHandling, cfg.TimePrecision = "precise", "connect"
	}
	conn.CreatePostgres(t, "d32-"+table, cfg)
	t.Logf("variant %d, columns %d", variant, len(c.cols))
	runEdgeCase(ctx, t, c, table, exec, nst, func() cdc.Stream {
		return openDebezium(ctx, t, conn.Brokers, prefix+".public."+table, opts)
	}, changes)
}

func myEdgeCase(t *testing.T, seed uint64, changes int) {
	m, err := testenv.ParseMySQLDSN(testenv.Require(t, "TRIBUTARY_MYSQL_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	conn := connecttest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	variant := rand.New(rand.NewPCG(seed, 1)).IntN(4)
	pool := myEdgeCols
	switch variant {
	case 1:
		pool = myPlainDates()
	case 3:
		pool = myConnect()
	}
	c := newEdgeCase(seed, pool)
	c.noopSilent = true
	table := fmt.Sprintf("d32dz_my_%d", rand.Uint32())
	exec := mySession(ctx, t, m, table, "SET SESSION sql_mode = ''")
	exec(c.ddl(table))
	nst := nativeMariaDB(ctx, t, m, table)
	defer nst.Close()
	// Variants: 0 as configured by default, 1 with Options.PlainDates (no zero dates written),
	// 2 without schemas (the catalog's columns), 3 time.precision.mode=connect on the columns
	// it can carry; decimals precise or string.
	decimal := []string{"precise", "string"}[c.rng.IntN(2)]
	prefix := "d32dz" + table[len("d32dz_my_"):]
	cfg := connecttest.MariaDBConnector{TopicPrefix: prefix, Tables: []string{m.DB + "." + table}, DecimalHandling: decimal}
	opts := &debezium.Options{Name: "my", PlainDates: variant == 1}
	switch variant {
	case 2:
		cfg.NoSourceTypes, cfg.Extra = true, schemaless(map[string]string{})
		catalog, err := mysqlcdc.New(m.Addr, m.User, m.Password, []mysqlcdc.TableName{{Database: m.DB, Table: table}}, &mysqlcdc.Options{SourceName: "my"})
		if err != nil {
			t.Fatal(err)
		}
		opts.Catalog, opts.DecimalStrings = catalog, decimal == "string"
	case 3:
		cfg.TimePrecision = "connect"
	}
	conn.CreateMariaDB(t, "d32-"+table, cfg)
	t.Logf("variant %d, columns %d, decimal.handling.mode %s", variant, len(c.cols), decimal)
	runEdgeCase(ctx, t, c, table, exec, nst, func() cdc.Stream {
		return openDebezium(ctx, t, conn.Brokers, prefix+"."+m.DB+"."+table, opts)
	}, changes)
}

// runEdgeCase waits until the connector streams (probe rows of negative keys until one
// arrives; the table's topic exists from the first, and open opens the Debezium stream on it),
// writes the case's changes and the end marker, reads both streams to it and compares.
func runEdgeCase(ctx context.Context, t *testing.T, c *edgeCase, table string, exec func(...string), native cdc.Stream, open func() cdc.Stream, changes int) {
	t.Helper()
	marker := make([]int, len(c.cols)) // every column's first value: exact, not NULL
	nIdx, dIdx := newDocIndex(), newDocIndex()
	var reasons []string
	read := func(st cdc.Stream, x *docIndex, done func(cdc.Event) bool, probing bool) bool {
		for {
			var ev cdc.Event
			var ok bool
			select {
			case ev, ok = <-st.Events():
				if !ok {
					t.Fatalf("stream ended: %v", st.Err())
				}
			case <-ctx.Done():
				t.Fatalf("no end marker before the deadline (%d documents so far)", len(x.docs))
			case <-time.After(2 * time.Second):
				if probing {
					return false
				}
				continue
			}
			if ev.Checkpoint != nil {
				if err := st.Ack(ctx, ev.Checkpoint); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
			if ev.Malformed != nil {
				reasons = append(reasons, ev.Malformed.Error())
			} else {
				x.apply(t, ev)
			}
			if done(ev) {
				return true
			}
		}
	}
	// The connector's slot may not exist yet when its task reports RUNNING: probe until a row
	// written now reaches its stream.
	probe := -2
	var dbz cdc.Stream
	for {
		exec(c.insert(table, probe, marker))
		if dbz == nil {
			dbz = open()
		}
		if read(dbz, dIdx, isMarker(0, int64(probe)), true) {
			break
		}
		probe--
	}
	reasons = nil
	var stmts []string
	for range changes {
		stmt := c.change(table)
		if strings.HasPrefix(stmt, "TRUNCATE") && len(stmts) > 0 { // its own transaction
			exec(stmts...)
			stmts = nil
		}
		stmts = append(stmts, stmt)
		if len(stmts) >= 1+c.rng.IntN(3) || strings.HasPrefix(stmt, "TRUNCATE") {
			exec(stmts...)
			stmts = nil
		}
	}
	exec(append(stmts, c.insert(table, -1, marker))...)
	read(native, nIdx, isMarker(0, int64(-1)), false)
	read(dbz, dIdx, isMarker(0, int64(-1)), false)

	var wanted []string
	for _, col := range c.cols {
		for _, v := range col.vals {
			if v.loud != "" {
				wanted = append(wanted, v.loud)
			}
		}
	}
	for _, r := range reasons {
		ok := false
		for _, w := range wanted {
			ok = ok || strings.Contains(r, w)
		}
		if !ok {
			t.Errorf("a dead letter for no value the value table calls dead-lettered: %s", r)
		}
	}
	t.Logf("%d changes (%d truncates), %d dead letters as the value table says", changes, len(dIdx.truncates), len(reasons))
	if len(reasons) != c.louds {
		t.Errorf("%d dead letters, %d writes of rows holding a value the value table calls dead-lettered", len(reasons), c.louds)
	}
	// Rows whose last write was dead-lettered, and the probes, are left out.
	keep := func(x *docIndex) *docIndex {
		out := newDocIndex()
		out.schema = x.schema
		for k, d := range x.docs {
			id, _ := strconv.Atoi(k)
			if row, ok := c.rows[id]; (ok && c.loudRow(row)) || id <= -2 {
				continue
			}
			out.docs[k] = d
		}
		return out
	}
	compareIndexes(t, keep(nIdx), keep(dIdx))
	// A TRUNCATE reaches both paths at the same version.
	if fmt.Sprint(nIdx.truncates) != fmt.Sprint(dIdx.truncates) {
		t.Errorf("truncate versions: native %v, Debezium %v", nIdx.truncates, dIdx.truncates)
	}
}

// TestEdgeRefusedByRealConnector: connector settings that make a captured column's values
// impossible to tell apart stop the stream at the table's first record with a *cdc.StartError
// naming each column and the setting that fixes it.
func TestEdgeRefusedByRealConnector(t *testing.T) {
	conn := connecttest.Require(t)
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Require(t, "TRIBUTARY_PG_DSN")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		table := fmt.Sprintf("d32rf_pg_%d", rand.Uint32())
		exec := pgSession(ctx, t, dsn, "DROP TABLE IF EXISTS "+table)
		exec("CREATE TABLE " + table + " (id int PRIMARY KEY, nu numeric, ts timestamp, t3 time(3), tt timetz, vb varbit(8))")
		exec("INSERT INTO " + table + " VALUES (1, 'NaN', '2024-01-01 00:00:00.123456', '01:02:03.456', '01:02:03+02', B'101')")
		prefix := "d32rf" + table[len("d32rf_pg_"):]
		conn.CreatePostgres(t, "d32-"+table, connecttest.PostgresConnector{TopicPrefix: prefix, Tables: []string{"public." + table},
			Slot: table, Publication: table, TimePrecision: "connect"})
		st := openDebezium(ctx, t, conn.Brokers, prefix+".public."+table, &debezium.Options{Name: "pg"})
		expectRefusal(ctx, t, st, []string{`column "nu"`, "decimal.handling.mode=string", `column "ts"`, "time.precision.mode=adaptive",
			`column "tt"`, `column "vb"`, "column.exclude.list"}, []string{`"t3"`, "2024-01-01", "01:02:03", "101"})
	})
	// A snapshot read of a table with a date column is refused without Options.PlainDates
	// (the snapshot drops a BC date's era); with it, the snapshot's infinities are exact.
	t.Run("postgres-snapshot-dates", func(t *testing.T) {
		dsn := testenv.Require(t, "TRIBUTARY_PG_DSN")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		table := fmt.Sprintf("d32rs_pg_%d", rand.Uint32())
		exec := pgSession(ctx, t, dsn, "DROP TABLE IF EXISTS "+table)
		exec("CREATE TABLE " + table + " (id int PRIMARY KEY, d date, ts timestamp, da date[])")
		exec("INSERT INTO " + table + ` VALUES (1, 'infinity', 'infinity', '{infinity,2024-01-01}'),
			(2, '-infinity', '-infinity', '{-infinity}'), (3, '2024-02-29', '2024-02-29 01:02:03.5', NULL)`)
		prefix := "d32rs" + table[len("d32rs_pg_"):]
		conn.CreatePostgres(t, "d32-"+table, connecttest.PostgresConnector{TopicPrefix: prefix, Tables: []string{"public." + table},
			Slot: table, Publication: table, DecimalHandling: "string"})
		topic := prefix + ".public." + table
		expectRefusal(ctx, t, openDebezium(ctx, t, conn.Brokers, topic, &debezium.Options{Name: "pg"}),
			[]string{`column "d"`, "BC date", "PlainDates"}, []string{"infinity", "2024"})
		st := openDebezium(ctx, t, conn.Brokers, topic, &debezium.Options{Name: "pg", PlainDates: true})
		want := map[int64][]cdc.Value{
			1: {int64(1), "infinity", "infinity", []cdc.Value{"infinity", "2024-01-01"}},
			2: {int64(2), "-infinity", "-infinity", []cdc.Value{"-infinity"}},
			3: {int64(3), "2024-02-29", "2024-02-29 01:02:03.5", nil},
		}
		for len(want) > 0 {
			select {
			case ev, ok := <-st.Events():
				if !ok {
					t.Fatalf("stream ended: %v", st.Err())
				}
				if ev.Malformed != nil || ev.Op != cdc.Read {
					t.Fatalf("%v event, malformed %v", ev.Op, ev.Malformed)
				}
				id := ev.After[0].(int64)
				if fmt.Sprint(ev.After) != fmt.Sprint(want[id]) {
					t.Errorf("row %d: got %v, want %v", id, ev.After, want[id])
				}
				delete(want, id)
			case <-ctx.Done():
				t.Fatalf("rows %v never read", want)
			}
		}
	})
	t.Run("mariadb", func(t *testing.T) {
		m, err := testenv.ParseMySQLDSN(testenv.Require(t, "TRIBUTARY_MYSQL_DSN"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		table := fmt.Sprintf("d32rf_my_%d", rand.Uint32())
		exec := mySession(ctx, t, m, table)
		exec("CREATE TABLE " + table + " (id INT PRIMARY KEY, t TIME, dt6 DATETIME(6), dt3 DATETIME(3))")
		exec("INSERT INTO " + table + " VALUES (1, '838:59:59', '2024-01-01 00:00:00.123456', '2024-01-01 00:00:00.123')")
		prefix := "d32rf" + table[len("d32rf_my_"):]
		conn.CreateMariaDB(t, "d32-"+table, connecttest.MariaDBConnector{TopicPrefix: prefix, Tables: []string{m.DB + "." + table}, TimePrecision: "connect"})
		st := openDebezium(ctx, t, conn.Brokers, prefix+"."+m.DB+"."+table, &debezium.Options{Name: "my", PlainDates: true})
		expectRefusal(ctx, t, st, []string{`column "t"`, "beyond 24:00:00", `column "dt6"`, "time.precision.mode=adaptive_time_microseconds"}, []string{`"dt3"`, "838:59:59", "2024-01-01"})
	})
}

// expectRefusal reads st until it fails, and wants a *cdc.StartError holding every one of
// want and none of never (columns that can be read exactly, values).
func expectRefusal(ctx context.Context, t *testing.T, st cdc.Stream, want, never []string) {
	t.Helper()
	for {
		select {
		case ev, ok := <-st.Events():
			if ok {
				t.Fatalf("an event of a refused table: %v %v", ev.Op, ev.Malformed)
			}
			err := st.Err()
			var se *cdc.StartError
			if !errors.As(err, &se) || !errors.Is(err, cdc.ErrPermanent) {
				t.Fatalf("stream ended with %v, want a permanent *cdc.StartError", err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q: %v", w, err)
				}
			}
			for _, n := range never {
				if strings.Contains(err.Error(), n) {
					t.Errorf("the refusal says %q: %v", n, err)
				}
			}
			return
		case <-ctx.Done():
			t.Fatal("no refusal before the deadline")
		}
	}
}
