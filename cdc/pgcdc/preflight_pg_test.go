package pgcdc_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// h3Source is a source whose slot and publication carry this test's prefix; cleanup drops
// them and the named tables.
func h3Source(t *testing.T, dsn string, opts pgcdc.Options, drop ...string) *pgcdc.Source {
	t.Helper()
	sfx := suffix(t)
	opts.Name, opts.Slot, opts.Publication = "h3pre_"+sfx, "h3pre_"+sfx, "h3pre_"+sfx
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
		for _, tb := range drop {
			if err := execSQL(ctx, dsn, false, "DROP TABLE IF EXISTS "+quote(tb)); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return src
}

// exists reports whether the catalog query finds a row.
func exists(t *testing.T, dsn, query string, args ...any) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM ("+query+") q", args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestOpenRefusesMissingTables: captured tables that do not exist as spelled -- one missing,
// one existing only in another case -- make Open fail with one *cdc.StartError naming each,
// the near match as the fix, before a publication or slot is created.
func TestOpenRefusesMissingTables(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	ok, mixed, missing := "h3pre_ok_"+sfx, "H3pre_MyOrders_"+sfx, "h3pre_nothere_"+sfx
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+quote(ok)+" (id int PRIMARY KEY)",
		"CREATE TABLE "+quote(mixed)+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := h3Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever,
		Tables: []pgcdc.Table{{Name: ok}, {Name: strings.ToLower(mixed)}, {Schema: "public", Name: missing}}}, ok, mixed)
	st, err := src.Open(ctx, nil)
	if err == nil {
		st.Close()
		t.Fatal("Open accepted tables that do not exist")
	}
	var se *cdc.StartError
	if !errors.As(err, &se) || !errors.Is(err, cdc.ErrStart) || len(se.Problems) != 2 {
		t.Fatalf("Open: %v, want a *cdc.StartError with two problems", err)
	}
	wrongCase, absent := se.Problems[0], se.Problems[1]
	if wrongCase.Table.Table != strings.ToLower(mixed) || wrongCase.Table.Schema != "public" ||
		wrongCase.Fix != `did you mean public."`+mixed+`"?` {
		t.Fatalf("wrong-case table: %+v", wrongCase)
	}
	if absent.Table.Table != missing || !strings.Contains(absent.Problem, "does not exist") || !strings.Contains(absent.Fix, "create it") {
		t.Fatalf("missing table: %+v", absent)
	}
	for _, want := range []string{strings.ToLower(mixed), missing, `did you mean public."` + mixed + `"?`} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error %q does not say %q", err, want)
		}
	}
	if exists(t, dsn, "SELECT 1 FROM pg_publication WHERE pubname = $1", src.Publication()) ||
		exists(t, dsn, "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", src.Slot()) {
		t.Fatal("a refused Open left a publication or a slot behind")
	}
}

// TestOpenRefusesUnpublishedTable: an existing publication that does not publish a captured
// table is refused with a *cdc.StartError whose fix is the ALTER PUBLICATION.
func TestOpenRefusesUnpublishedTable(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	a, b := "h3pre_pa_"+sfx, "h3pre_pb_"+sfx
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+quote(a)+" (id int PRIMARY KEY)",
		"CREATE TABLE "+quote(b)+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := h3Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, NoCreatePublication: true,
		Tables: []pgcdc.Table{{Name: a}, {Name: b}}}, a, b)
	if err := execSQL(ctx, dsn, false, "CREATE PUBLICATION "+quote(src.Publication())+" FOR TABLE "+quote(a)); err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err == nil {
		st.Close()
		t.Fatal("Open accepted a table the publication does not publish")
	}
	var se *cdc.StartError
	if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Table.Table != b ||
		se.Problems[0].Fix != "ALTER PUBLICATION "+quote(src.Publication())+" ADD TABLE public."+b+", or remove it from the captured tables" {
		t.Fatalf("Open: %v", err)
	}
}

// TestOpenListsTablesAndToastRisks: the stream lists the captured tables' schemas as of Open
// (cdc.TableLister), and Open reports -- in ToastTables and one Warn line per table -- the
// tables with TOASTable columns whose replica identity is not FULL, naming those columns.
func TestOpenListsTablesAndToastRisks(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	def, full, plain := "h3pre_tdef_"+sfx, "h3pre_tfull_"+sfx, "h3pre_tplain_"+sfx
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+quote(def)+" (id int PRIMARY KEY, body text, n int, doc jsonb, price numeric(10,2), at timestamptz)",
		"CREATE TABLE "+quote(full)+" (id int PRIMARY KEY, body text, doc jsonb)",
		"ALTER TABLE "+quote(full)+" REPLICA IDENTITY FULL",
		"CREATE TABLE "+quote(plain)+" (id int PRIMARY KEY, n bigint, f float8, ok boolean)"); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	src := h3Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Logger: log,
		Tables: []pgcdc.Table{{Name: plain}, {Name: def}, {Name: full}}}, def, full, plain)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	lister, ok := st.(cdc.TableLister)
	if !ok {
		t.Fatal("the stream does not implement cdc.TableLister")
	}
	var listed []string
	for _, s := range lister.Tables() {
		listed = append(listed, s.ID.Table)
		if s.ID.Schema != "public" || s.ID.Source != src.Name() || len(s.PrimaryKey) != 1 || s.Columns[s.PrimaryKey[0]].Name != "id" {
			t.Fatalf("schema of %s: %+v", s.ID, s)
		}
	}
	if want := []string{def, full, plain}; !reflect.DeepEqual(listed, want) {
		t.Fatalf("listed %v, want %v", listed, want)
	}

	risks := pgcdc.ToastTables(st)
	if len(risks) != 1 || risks[0].Table.Table != def || risks[0].ReplicaIdentity != "default" ||
		!reflect.DeepEqual(risks[0].Columns, []string{"body", "doc"}) {
		t.Fatalf("TOAST report %+v, want %s with body, doc (numeric(10,2) is never stored out of line)", risks, def)
	}
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "REPLICA IDENTITY FULL") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], def) || !strings.Contains(warned[0], "columns=body,doc ") ||
		!strings.Contains(warned[0], "replica_identity=default") || !strings.Contains(warned[0], "one read per") {
		t.Fatalf("TOAST warnings %q, want one for %s", warned, def)
	}

	// A reopened stream (the runner reopening after a failure) reports the table again in
	// ToastTables but does not log it again.
	st.Close()
	again, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if risks := pgcdc.ToastTables(again); len(risks) != 1 {
		t.Fatalf("TOAST report of a reopened stream %+v", risks)
	}
	again.Close()
	if n := strings.Count(logs.String(), "REPLICA IDENTITY FULL sends the old row"); n != 1 {
		t.Fatalf("%d TOAST warnings after a reopening, want the first one only", n)
	}

	// After REPLICA IDENTITY FULL the table is no longer reported.
	if err := execSQL(ctx, dsn, false, "ALTER TABLE "+quote(def)+" REPLICA IDENTITY FULL"); err != nil {
		t.Fatal(err)
	}
	st2, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if risks := pgcdc.ToastTables(st2); len(risks) != 0 {
		t.Fatalf("TOAST report after REPLICA IDENTITY FULL: %+v", risks)
	}
}
