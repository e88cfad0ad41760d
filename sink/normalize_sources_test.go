package sink

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
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

// sameRowColumns is one logical row in both sources' spelling: column name, PostgreSQL type
// and literal, MariaDB type and literal. The documents must come out byte for byte equal.
type sameRowColumn struct{ name, pgType, pgVal, myType, myVal string }

var sameRowColumns = []sameRowColumn{
	{"si", "int2", "-32768", "SMALLINT", "-32768"},
	{"bi", "int8", "9007199254740993", "BIGINT", "9007199254740993"},
	{"price", "numeric(10,2)", "12.5", "DECIMAL(10,2)", "12.5"},
	{"dbl", "double precision", "0.1", "DOUBLE", "0.1"},
	{"vc", "varchar(20)", "'ålpha ☃'", "VARCHAR(20)", "'ålpha ☃'"},
	{"tx", "text", `'long "text" ☃'`, "TEXT", `'long "text" ☃'`},
	{"txl", "text", `'déjà'`, "TEXT CHARACTER SET latin1", `'déjà'`},
	{"bin", "bytea", `'\x0102ff'`, "VARBINARY(8)", "x'0102ff'"},
	{"d", "date", "'2024-02-29'", "DATE", "'2024-02-29'"},
	{"tm", "time(6)", "'13:14:15.25'", "TIME(6)", "'13:14:15.25'"},
	{"dt", "timestamp(6)", "'2024-01-02 03:04:05.12'", "DATETIME(6)", "'2024-01-02 03:04:05.12'"},
	{"ts", "timestamptz(6)", "'2024-01-02 03:04:05.123456+00'", "TIMESTAMP(6) NULL", "'2024-01-02 03:04:05.123456'"},
	{"j", "json", `'{"a": [1, "x"], "b": null}'`, "JSON", `'{"a": [1, "x"], "b": null}'`},
	{"bits", "bit(4)", "B'0101'", "BIT(4)", "b'0101'"},
	{"u", "uuid", "'0f8fad5b-d9cb-469f-a165-70867728950e'", "UUID", "'0f8fad5b-d9cb-469f-a165-70867728950e'"},
	{"n", "int4", "NULL", "INT", "NULL"},
}

// sourceDocs reads row 1 through a snapshot and row 2 (the same values) through the stream and
// returns both documents, with the id set to 1 in both, and the table's mapping.
type sourceDocs struct {
	snapshot, stream []byte
	mapping          string
}

func TestNormalizeSameRowFromPostgresAndMariaDB(t *testing.T) {
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	myDSN := testenv.Require(t, testenv.MySQLDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rnd [5]byte
	_, _ = crand.Read(rnd[:])
	sfx := hex.EncodeToString(rnd[:])

	pg := postgresDocs(ctx, t, pgDSN, "sink_same_"+sfx)
	my := mariadbDocs(ctx, t, myDSN, "sink_same_"+sfx)
	for _, d := range []struct {
		name string
		a, b []byte
	}{
		{"postgres snapshot vs stream", pg.snapshot, pg.stream},
		{"mariadb snapshot vs stream", my.snapshot, my.stream},
		{"postgres vs mariadb", pg.snapshot, my.snapshot},
	} {
		if string(d.a) != string(d.b) {
			t.Errorf("%s:\n %s\n %s", d.name, d.a, d.b)
		}
	}
	if pg.mapping != my.mapping {
		t.Errorf("mappings differ:\n postgres %s\n mariadb  %s", pg.mapping, my.mapping)
	}
	t.Logf("document: %s", pg.snapshot)
}

func docFromEvent(t *testing.T, ev cdc.Event) []byte {
	t.Helper()
	row := append([]cdc.Value(nil), ev.After...)
	row[0] = int64(1)
	doc, err := AppendDocument(nil, ev.Schema, row)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// sameRowTable returns the CREATE TABLE statement for sameRowColumns in one dialect (each
// column's type and literal from dialect) and an INSERT of the row with a given id.
func sameRowTable(table, idColumn string, dialect func(sameRowColumn) (typ, val string)) (string, func(id string) string) {
	cols, names, vals := []string{idColumn}, []string{"id"}, []string{}
	for _, c := range sameRowColumns {
		typ, val := dialect(c)
		cols = append(cols, c.name+" "+typ)
		names = append(names, c.name)
		vals = append(vals, val)
	}
	insert := func(id string) string {
		return "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") VALUES (" + id + ", " + strings.Join(vals, ", ") + ")"
	}
	return "CREATE TABLE " + table + " (" + strings.Join(cols, ", ") + ")", insert
}

func postgresDocs(ctx context.Context, t *testing.T, dsn, table string) sourceDocs {
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
	create, insert := sameRowTable(table, "id int PRIMARY KEY", func(c sameRowColumn) (string, string) { return c.pgType, c.pgVal })
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
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+table)
			_ = conn.Close(ctx)
		}
	})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap := cdctest.NextEvent(ctx, t, st)
	exec(insert("2"))
	stream := cdctest.NextEvent(ctx, t, st)
	if snap.Op != cdc.Read || stream.Op != cdc.Insert {
		t.Fatalf("postgres events %v, %v", snap.Op, stream.Op)
	}
	m, err := GenerateMapping(snap.Schema, MappingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sourceDocs{docFromEvent(t, snap), docFromEvent(t, stream), string(m)}
}

func mariadbDocs(ctx context.Context, t *testing.T, dsn, table string) sourceDocs {
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
	create, insert := sameRowTable(table, "id INT NOT NULL PRIMARY KEY", func(c sameRowColumn) (string, string) { return c.myType, c.myVal })
	exec(create+" DEFAULT CHARSET=utf8mb4", insert("1"))
	t.Cleanup(func() { exec("DROP TABLE IF EXISTS " + table) })
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
	snap := cdctest.NextEvent(ctx, t, st)
	exec(insert("2"))
	stream := cdctest.NextEvent(ctx, t, st)
	if snap.Op != cdc.Read || stream.Op != cdc.Insert {
		t.Fatalf("mariadb events %v, %v", snap.Op, stream.Op)
	}
	m, err := GenerateMapping(snap.Schema, MappingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sourceDocs{docFromEvent(t, snap), docFromEvent(t, stream), string(m)}
}
