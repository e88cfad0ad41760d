package sink

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The table of docs/production.md "How a source value appears in the index" is checked here
// against the real thing: every row's column type is created in a real table of its source,
// its example value inserted, read through the real source (a snapshot row and a streamed
// insert), turned into a document by AppendDocument and mapped by GenerateMapping with the
// default options; the document's field must be exactly the `_source` cell (byte for byte,
// compacted) and the mapping's type the first word of the field cell.

const typeTableDoc = "../docs/production.md"

// typeRow is one row of the doc's table.
type typeRow struct {
	line                    int
	source                  string // "PostgreSQL" or "MariaDB"
	colType, literal, field string
	inSource                string // the `_source` cell: a JSON value
}

// codeSpans returns the `...` spans of a Markdown table cell, in order.
func codeSpans(cell string) []string {
	var out []string
	for {
		i := strings.IndexByte(cell, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(cell[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, cell[i+1:i+1+j])
		cell = cell[i+2+j:]
	}
}

// readTypeTable parses the rows between the type-table markers of docs/production.md.
func readTypeTable(t *testing.T) []typeRow {
	t.Helper()
	b, err := os.ReadFile(typeTableDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows []typeRow
	in := false
	for n, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(line, "<!-- type-table:begin"):
			in = true
			continue
		case strings.Contains(line, "<!-- type-table:end"):
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		src := strings.TrimSpace(cells[0])
		if src != "PostgreSQL" && src != "MariaDB" {
			continue // the header
		}
		if len(cells) != 5 {
			t.Fatalf("%s:%d: %d cells, want 5 (source, column type, example, field, _source)", typeTableDoc, n+1, len(cells))
		}
		r := typeRow{line: n + 1, source: src}
		for i, dst := range []*string{&r.colType, &r.literal, &r.field, &r.inSource} {
			spans := codeSpans(cells[i+1])
			if len(spans) == 0 {
				t.Fatalf("%s:%d: cell %d has no `code`", typeTableDoc, n+1, i+2)
			}
			*dst = spans[0]
		}
		var v any
		if err := json.Unmarshal([]byte(r.inSource), &v); err != nil {
			t.Fatalf("%s:%d: the _source cell %s is no JSON value: %v", typeTableDoc, n+1, r.inSource, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestTypeTableParses runs without servers: the table is there, covers both sources, and
// names only field types GenerateMapping produces.
func TestTypeTableParses(t *testing.T) {
	rows := readTypeTable(t)
	known := map[string]bool{"boolean": true, "byte": true, "short": true, "integer": true, "long": true,
		"unsigned_long": true, "float": true, "double": true, "scaled_float": true, "keyword": true,
		"binary": true, "date": true, "object": true}
	count := map[string]int{}
	for _, r := range rows {
		count[r.source]++
		if !known[r.field] {
			t.Errorf("%s:%d: field type %q is none GenerateMapping gives", typeTableDoc, r.line, r.field)
		}
	}
	if count["PostgreSQL"] < 15 || count["MariaDB"] < 15 {
		t.Fatalf("%s: type table has %d PostgreSQL and %d MariaDB rows; markers lost?", typeTableDoc, count["PostgreSQL"], count["MariaDB"])
	}
}

// TestTypeTableMatchesSources is the check against the real sources.
func TestTypeTableMatchesSources(t *testing.T) {
	rows := readTypeTable(t)
	var pgRows, myRows []typeRow
	for _, r := range rows {
		if r.source == "PostgreSQL" {
			pgRows = append(pgRows, r)
		} else {
			myRows = append(myRows, r)
		}
	}
	var rnd [5]byte
	_, _ = crand.Read(rnd[:])
	table := "pg39_types_" + hex.EncodeToString(rnd[:])
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		snap, stream, m := typeTablePostgres(ctx, t, dsn, table, pgRows)
		compareTypeRows(t, pgRows, snap, stream, m)
	})
	t.Run("mariadb", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.MySQLDSN)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		snap, stream, m := typeTableMariaDB(ctx, t, dsn, table, myRows)
		compareTypeRows(t, myRows, snap, stream, m)
	})
}

func typeColumn(i int) string { return fmt.Sprintf("c%02d", i+1) }

// typeTableSQL returns the CREATE TABLE of the rows' columns and an INSERT of their examples.
func typeTableSQL(table, idColumn string, rows []typeRow) (string, func(id string) string) {
	cols, names, vals := []string{idColumn}, []string{"id"}, []string{}
	for i, r := range rows {
		cols = append(cols, typeColumn(i)+" "+r.colType)
		names = append(names, typeColumn(i))
		vals = append(vals, r.literal)
	}
	insert := func(id string) string {
		return "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") VALUES (" + id + ", " + strings.Join(vals, ", ") + ")"
	}
	return "CREATE TABLE " + table + " (" + strings.Join(cols, ", ") + ")", insert
}

func compareTypeRows(t *testing.T, rows []typeRow, snap, stream []byte, mapping []byte) {
	t.Helper()
	var props struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(mapping, &props); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name string
		doc  []byte
	}{{"snapshot", snap}, {"stream", stream}} {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(d.doc, &fields); err != nil {
			t.Fatalf("%s document: %v", d.name, err)
		}
		for i, r := range rows {
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(r.inSource)); err != nil {
				t.Fatal(err)
			}
			got := fields[typeColumn(i)]
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%s:%d: %s %s: %s document has %s, the table says %s", typeTableDoc, r.line, r.source, r.colType, d.name, got, want.Bytes())
			}
		}
	}
	for i, r := range rows {
		if got := props.Properties[typeColumn(i)].Type; got != r.field {
			t.Errorf("%s:%d: %s %s: mapped as %q, the table says %q", typeTableDoc, r.line, r.source, r.colType, got, r.field)
		}
	}
}

func typeTablePostgres(ctx context.Context, t *testing.T, dsn, table string, rows []typeRow) (snap, stream, mapping []byte) {
	exec := func(stmts ...string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("postgres: %v", err)
			}
		}
	}
	create, insert := typeTableSQL(table, "id int PRIMARY KEY", rows)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+table)
			_ = conn.Close(ctx)
		}
	})
	exec(create, insert("1"))
	src, err := pgcdc.New(dsn, &pgcdc.Options{Name: table, Slot: table, Publication: table,
		Tables: []pgcdc.Table{{Name: table}}, Snapshot: cdc.SnapshotInitial, StatusInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := src.Drop(ctx); err != nil {
			t.Errorf("drop slot and publication: %v", err)
		}
	})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return typeTableEvents(ctx, t, st, func() { exec(insert("2")) })
}

func typeTableMariaDB(ctx context.Context, t *testing.T, dsn, table string, rows []typeRow) (snap, stream, mapping []byte) {
	at := strings.LastIndex(dsn, "@")
	user, pass, _ := strings.Cut(dsn[:at], ":")
	rest := strings.TrimPrefix(dsn[at+1:], "tcp(")
	addr, rest, _ := strings.Cut(rest, ")")
	db, _, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "?")
	exec := func(stmts ...string) {
		t.Helper()
		c, err := client.ConnectWithContext(context.WithoutCancel(ctx), addr, user, pass, db, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, s := range append([]string{"SET time_zone = '+00:00'", "SET NAMES utf8mb4"}, stmts...) {
			if _, err := c.Execute(s); err != nil {
				t.Fatalf("mariadb: %v", err)
			}
		}
	}
	create, insert := typeTableSQL(table, "id INT NOT NULL PRIMARY KEY", rows)
	t.Cleanup(func() { exec("DROP TABLE IF EXISTS " + table) })
	exec(create+" DEFAULT CHARSET=utf8mb4", insert("1"))
	var idb [4]byte
	_, _ = crand.Read(idb[:])
	src, err := mysqlcdc.New(addr, user, pass, []mysqlcdc.TableName{{Database: db, Table: table}}, &mysqlcdc.Options{
		Snapshot: cdc.SnapshotInitial,
		ServerID: 1<<24 + binary.BigEndian.Uint32(idb[:])%(1<<30),
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return typeTableEvents(ctx, t, st, func() { exec(insert("2")) })
}

// typeTableEvents reads the snapshot row, inserts the streamed one, and returns both documents
// and the snapshot schema's default mapping.
func typeTableEvents(ctx context.Context, t *testing.T, st cdc.Stream, insert func()) (snap, stream, mapping []byte) {
	t.Helper()
	var docs [2][]byte
	var schema *cdc.TableSchema
	for i, want := range []cdc.Op{cdc.Read, cdc.Insert} {
		if i == 1 {
			insert()
		}
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Op != want {
			t.Fatalf("event %d: %v, want %v", i, ev.Op, want)
		}
		doc, err := AppendDocument(nil, ev.Schema, ev.After)
		if err != nil {
			t.Fatalf("%v event: %v", ev.Op, err)
		}
		docs[i] = doc
		if i == 0 {
			schema = ev.Schema
		}
	}
	m, err := GenerateMapping(schema, MappingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return docs[0], docs[1], m
}
