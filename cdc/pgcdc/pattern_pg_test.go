package pgcdc_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// pgtbSource is a source whose name, slot and publication carry the pgtb_ prefix; cleanup drops
// slot and publication, then runs the drop statements (schemas, tables).
func pgtbSource(t *testing.T, dsn string, opts pgcdc.Options, drops ...string) *pgcdc.Source {
	t.Helper()
	sfx := suffix(t)
	opts.Name, opts.Slot, opts.Publication = "pgtb_"+sfx, "pgtb_"+sfx, "pgtb_"+sfx
	if opts.StatusInterval == 0 {
		opts.StatusInterval = 200 * time.Millisecond
	}
	src, err := pgcdc.New(dsn, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := src.Drop(ctx); err != nil {
			t.Errorf("drop slot and publication: %v", err)
		}
		if err := execSQL(ctx, dsn, false, drops...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return src
}

// tableNames lists the schema.table of each schema.
func tableNames(schemas []*cdc.TableSchema) []string {
	var out []string
	for _, s := range schemas {
		out = append(out, s.ID.Schema+"."+s.ID.Table)
	}
	return out
}

// TestPatternCapturesSchema: with sales.* and a named table outside the schema, pgcdc creates
// the publication FOR TABLES IN SCHEMA plus FOR TABLE, Tables lists the matched tables, the
// snapshot reads them, and a table created in the schema after Open -- one created and filled in
// one transaction too -- delivers its inserts, updates and deletes with its own schema, loaded
// by its first relation message. A table of another schema delivers nothing.
func TestPatternCapturesSchema(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	sch, other, named := "pgtb_sales_"+sfx, "pgtb_other_"+sfx, "pgtb_named_"+sfx
	if err := execSQL(ctx, dsn, false,
		"CREATE SCHEMA "+quote(sch), "CREATE SCHEMA "+quote(other),
		"CREATE TABLE "+quote(sch)+".orders (id int PRIMARY KEY, v text)",
		"INSERT INTO "+quote(sch)+".orders VALUES (1, 'a'), (2, 'b')",
		"CREATE TABLE "+quote(named)+" (id int PRIMARY KEY)",
		"INSERT INTO "+quote(named)+" VALUES (7)",
		"CREATE TABLE "+quote(other)+".noise (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := pgtbSource(t, dsn, pgcdc.Options{Tables: []pgcdc.Table{{Schema: sch, Name: pgcdc.AllTables}, {Name: named}}},
		"DROP SCHEMA IF EXISTS "+quote(sch)+" CASCADE", "DROP SCHEMA IF EXISTS "+quote(other)+" CASCADE",
		"DROP TABLE IF EXISTS "+quote(named))
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	if !exists(t, dsn, `SELECT 1 FROM pg_publication_namespace pn JOIN pg_publication p ON p.oid = pn.pnpubid
			JOIN pg_namespace n ON n.oid = pn.pnnspid WHERE p.pubname = $1 AND n.nspname = $2`, src.Publication(), sch) {
		t.Fatal("the publication does not publish the schema as a whole")
	}
	if exists(t, dsn, `SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2`, src.Publication(), other) {
		t.Fatal("the publication publishes a schema nobody captures")
	}
	listed := tableNames(st.(cdc.TableLister).Tables())
	if want := []string{sch + ".orders", "public." + named}; !reflect.DeepEqual(listed, want) {
		t.Fatalf("Tables %v, want %v", listed, want)
	}

	snap := map[string]int{}
	for range 3 {
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Op != cdc.Read {
			t.Fatalf("%v during the snapshot", ev.Op)
		}
		snap[ev.Table.Schema+"."+ev.Table.Table]++
	}
	if snap[sch+".orders"] != 2 || snap["public."+named] != 1 {
		t.Fatalf("snapshot rows per table %v", snap)
	}

	later, together := quote(sch)+".later", quote(sch)+`."Together"`
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+later+" (id bigint PRIMARY KEY, name text NOT NULL, n numeric(6,2))",
		"INSERT INTO "+quote(other)+".noise VALUES (1)",
		"INSERT INTO "+later+" VALUES (1, 'one', 1.5), (2, 'two', NULL)",
		"UPDATE "+later+" SET name = 'uno' WHERE id = 1",
		"DELETE FROM "+later+" WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	if err := execSQL(ctx, dsn, true,
		"CREATE TABLE "+together+" (k text PRIMARY KEY)",
		"INSERT INTO "+together+" VALUES ('x')"); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		op    cdc.Op
		table string
		row   []cdc.Value
	}
	var got []seen
	var laterSchema *cdc.TableSchema
	for range 5 {
		ev := cdctest.NextEvent(ctx, t, st)
		row := ev.After
		if ev.Op == cdc.Delete {
			row = ev.Before
		}
		got = append(got, seen{ev.Op, ev.Table.Schema + "." + ev.Table.Table, row})
		if ev.Schema == nil || ev.Schema.ID != ev.Table {
			t.Fatalf("%v of %s without its own schema: %+v", ev.Op, ev.Table, ev.Schema)
		}
		if ev.Table.Table == "later" {
			laterSchema = ev.Schema
		}
	}
	want := []seen{
		{cdc.Insert, sch + ".later", []cdc.Value{int64(1), "one", "1.50"}},
		{cdc.Insert, sch + ".later", []cdc.Value{int64(2), "two", nil}},
		{cdc.Update, sch + ".later", []cdc.Value{int64(1), "uno", "1.50"}},
		{cdc.Delete, sch + ".later", []cdc.Value{int64(2), nil, nil}},
		{cdc.Insert, sch + ".Together", []cdc.Value{"x"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed\n %v\nwant\n %v", got, want)
	}
	cols := laterSchema.Columns
	if len(cols) != 3 || cols[0].Name != "id" || cols[0].Kind != cdc.KindInt || cols[0].Bits != 64 ||
		cols[1].Kind != cdc.KindText || cols[1].Nullable || cols[2].Kind != cdc.KindDecimal || cols[2].Precision != 6 ||
		cols[2].Scale != 2 || !reflect.DeepEqual(laterSchema.PrimaryKey, []int{0}) {
		t.Fatalf("schema of the later table: %+v", laterSchema)
	}
	if loaded, err := src.LoadSchema(ctx, laterSchema.ID); err != nil || !reflect.DeepEqual(loaded, laterSchema) {
		t.Fatalf("LoadSchema of the later table: %+v, %v", loaded, err)
	}
	quiet(t, st) // nothing of the other schema
}

// TestPatternRefusesMissingSchema: a pattern whose schema does not exist -- absent, or existing
// only in another case -- is refused at Open with a *cdc.StartError naming it (the near match
// as the fix) before anything is created; an existing schema without tables is accepted.
func TestPatternRefusesMissingSchema(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	mixed, absent, empty := "Pgtb_Mixed_"+sfx, "pgtb_absent_"+sfx, "pgtb_empty_"+sfx
	if err := execSQL(ctx, dsn, false, "CREATE SCHEMA "+quote(mixed), "CREATE SCHEMA "+quote(empty)); err != nil {
		t.Fatal(err)
	}
	drops := []string{"DROP SCHEMA IF EXISTS " + quote(mixed) + " CASCADE", "DROP SCHEMA IF EXISTS " + quote(empty) + " CASCADE"}
	src := pgtbSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{
		{Schema: strings.ToLower(mixed), Name: pgcdc.AllTables}, {Schema: absent, Name: pgcdc.AllTables}, {Schema: empty, Name: pgcdc.AllTables}}}, drops...)
	st, err := src.Open(ctx, nil)
	if err == nil {
		st.Close()
		t.Fatal("Open accepted a pattern of a missing schema")
	}
	var se *cdc.StartError
	if !errors.As(err, &se) || !cdc.IsPermanent(err) || len(se.Problems) != 2 {
		t.Fatalf("Open: %v, want a *cdc.StartError with two problems", err)
	}
	wrongCase, missing := se.Problems[0], se.Problems[1]
	if wrongCase.Table.Schema != strings.ToLower(mixed) || wrongCase.Table.Table != "*" || !strings.Contains(wrongCase.Problem, "schema does not exist") ||
		wrongCase.Fix != `did you mean "`+mixed+`".*?` {
		t.Fatalf("wrong-case schema: %+v", wrongCase)
	}
	if missing.Table.Schema != absent || missing.Fix != "create it, or remove "+absent+".* from the captured tables" {
		t.Fatalf("missing schema: %+v", missing)
	}
	if !strings.Contains(err.Error(), absent+".*") {
		t.Fatalf("the error does not name the pattern: %v", err)
	}
	if exists(t, dsn, "SELECT 1 FROM pg_publication WHERE pubname = $1", src.Publication()) ||
		exists(t, dsn, "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", src.Slot()) {
		t.Fatal("a refused Open left a publication or a slot behind")
	}

	ok := pgtbSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Schema: empty, Name: pgcdc.AllTables}}})
	st, err = ok.Open(ctx, nil)
	if err != nil {
		t.Fatalf("Open of an empty schema's pattern: %v", err)
	}
	defer st.Close()
	if tables := st.(cdc.TableLister).Tables(); len(tables) != 0 {
		t.Fatalf("Tables of an empty schema: %v", tableNames(tables))
	}
	if err := execSQL(ctx, dsn, false, "CREATE TABLE "+quote(empty)+".first (id int PRIMARY KEY)",
		"INSERT INTO "+quote(empty)+".first VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Op != cdc.Insert || ev.Table.Schema != empty || ev.Table.Table != "first" {
		t.Fatalf("%v of %s, want the insert into %s.first", ev.Op, ev.Table, empty)
	}
	st.Close()
	if err := execSQL(ctx, dsn, false, "DROP TABLE "+quote(empty)+".first"); err != nil {
		t.Fatal(err)
	}
}

// TestPatternNeedsSchemaPublication: an existing publication that publishes a pattern's tables
// one by one but not the schema as a whole is refused (tables created later would be missed),
// with the ALTER PUBLICATION ... ADD TABLES IN SCHEMA as the fix; after it Open succeeds. The
// publication is never altered by pgcdc.
func TestPatternNeedsSchemaPublication(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	sch := "pgtb_pub_" + sfx
	if err := execSQL(ctx, dsn, false, "CREATE SCHEMA "+quote(sch), "CREATE TABLE "+quote(sch)+".a (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := pgtbSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Schema: sch, Name: pgcdc.AllTables}}},
		"DROP SCHEMA IF EXISTS "+quote(sch)+" CASCADE")
	if err := execSQL(ctx, dsn, false, "CREATE PUBLICATION "+quote(src.Publication())+" FOR TABLE "+quote(sch)+".a"); err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err == nil {
		st.Close()
		t.Fatal("Open accepted a publication that does not publish the schema")
	}
	var se *cdc.StartError
	if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Table.Schema != sch ||
		se.Problems[0].Fix != "ALTER PUBLICATION "+quote(src.Publication())+" ADD TABLES IN SCHEMA "+sch+", or name the tables instead of "+sch+".*" {
		t.Fatalf("Open: %v", err)
	}
	if exists(t, dsn, `SELECT 1 FROM pg_publication_namespace pn JOIN pg_publication p ON p.oid = pn.pnpubid WHERE p.pubname = $1`, src.Publication()) {
		t.Fatal("Open altered the publication")
	}
	if err := execSQL(ctx, dsn, false, "ALTER PUBLICATION "+quote(src.Publication())+" ADD TABLES IN SCHEMA "+quote(sch)); err != nil {
		t.Fatal(err)
	}
	st, err = src.Open(ctx, nil)
	if err != nil {
		t.Fatalf("Open after ADD TABLES IN SCHEMA: %v", err)
	}
	defer st.Close()
	if listed := tableNames(st.(cdc.TableLister).Tables()); !reflect.DeepEqual(listed, []string{sch + ".a"}) {
		t.Fatalf("Tables %v", listed)
	}
}

// TestNoTableListCapturesTablesPublishedLater: without Options.Tables the stream captures every
// table the publication sends, also one published after Open (ALTER PUBLICATION ... ADD TABLE
// of a table created meanwhile), whose schema its first relation message loads.
func TestNoTableListCapturesTablesPublishedLater(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	first, added := "pgtb_first_"+sfx, "pgtb_added_"+sfx
	if err := execSQL(ctx, dsn, false, "CREATE TABLE "+quote(first)+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := pgtbSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, NoCreatePublication: true},
		"DROP TABLE IF EXISTS "+quote(first), "DROP TABLE IF EXISTS "+quote(added))
	if err := execSQL(ctx, dsn, false, "CREATE PUBLICATION "+quote(src.Publication())+" FOR TABLE "+quote(first)); err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if listed := tableNames(st.(cdc.TableLister).Tables()); !reflect.DeepEqual(listed, []string{"public." + first}) {
		t.Fatalf("Tables %v", listed)
	}
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+quote(added)+" (id int PRIMARY KEY, s text)",
		"ALTER PUBLICATION "+quote(src.Publication())+" ADD TABLE "+quote(added),
		"INSERT INTO "+quote(added)+" VALUES (1, 'x')",
		"INSERT INTO "+quote(first)+" VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	ev := cdctest.NextEvent(ctx, t, st)
	if ev.Op != cdc.Insert || ev.Table.Table != added || !reflect.DeepEqual(ev.After, []cdc.Value{int64(1), "x"}) ||
		len(ev.Schema.Columns) != 2 || !reflect.DeepEqual(ev.Schema.PrimaryKey, []int{0}) {
		t.Fatalf("%v of %s %v, schema %+v; want the insert into %s", ev.Op, ev.Table, ev.After, ev.Schema, added)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Op != cdc.Insert || ev.Table.Table != first {
		t.Fatalf("%v of %s, want the insert into %s", ev.Op, ev.Table, first)
	}
}
