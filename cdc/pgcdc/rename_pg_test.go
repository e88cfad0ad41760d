package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// p32Source is a source whose name, slot and publication carry the p32_ prefix; cleanup drops
// slot and publication, then runs the drop statements (schemas, tables).
func p32Source(t *testing.T, dsn string, opts pgcdc.Options, drops ...string) *pgcdc.Source {
	t.Helper()
	sfx := suffix(t)
	opts.Name, opts.Slot, opts.Publication = "p32_"+sfx, "p32_"+sfx, "p32_"+sfx
	if opts.StatusInterval == 0 {
		opts.StatusInterval = 200 * time.Millisecond
	}
	src, err := pgcdc.New(dsn, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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

// dropAtEnd runs the drop statements when the test ends, also when it fails while it creates
// what they drop.
func dropAtEnd(t *testing.T, dsn string, drops ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := execSQL(ctx, dsn, false, drops...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// relOID is the pg_class OID of a table, as cdc.TableSchema.Relation spells it.
func relOID(ctx context.Context, t *testing.T, dsn, schema, table string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var oid uint32
	if err := conn.QueryRow(ctx, `SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, table).Scan(&oid); err != nil {
		t.Fatalf("oid of %s.%s: %v", schema, table, err)
	}
	return fmt.Sprint(oid)
}

// renameWriter inserts rows (id i, n i) and bumps an earlier row, one transaction each, into
// the table under its current name, and records the name each row's statements succeeded
// under. A statement that finds the name gone (the table was renamed while it waited for
// the lock) is retried under the name the test sets next.
type renameWriter struct {
	mu    sync.Mutex
	name  string         // the table's current name, schema-qualified and quoted
	under map[int]string // id -> name its insert committed under
	done  int            // rows inserted
}

func (w *renameWriter) setName(name string) {
	w.mu.Lock()
	w.name = name
	w.mu.Unlock()
}

func (w *renameWriter) rows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

func (w *renameWriter) run(ctx context.Context, dsn string, stop <-chan struct{}) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for i := 1; ; {
		select {
		case <-stop:
			return nil
		default:
		}
		w.mu.Lock()
		name := w.name
		w.mu.Unlock()
		bump := i / 2
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", name, i, i)); err != nil {
				return err
			}
			if bump > 0 {
				_, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s SET n = n + 1000 WHERE id = %d", name, bump))
				return err
			}
			return nil
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: renamed meanwhile
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.under[i] = name
		w.done = i
		w.mu.Unlock()
		i++
	}
}

// TestRenameUnderWriter: within one stream, a captured table renamed twice (ALTER TABLE ...
// RENAME, between the writer's transactions, and once inside a transaction that also writes
// before and after it) under a concurrent writer: every change carries the name its statement
// wrote under -- the new name from the first change after the rename, the old one before --
// and the same Relation, the table's OID. The changes rebuild the table row by row.
func TestRenameUnderWriter(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sch := "p32_ren_" + suffix(t)
	qs := quote(sch)
	dropAtEnd(t, dsn, "DROP SCHEMA IF EXISTS "+qs+" CASCADE")
	if err := execSQL(ctx, dsn, false, "CREATE SCHEMA "+qs, "CREATE TABLE "+qs+".a (id int PRIMARY KEY, n int)"); err != nil {
		t.Fatal(err)
	}
	src := p32Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Schema: sch, Name: pgcdc.AllTables}}},
		"DROP SCHEMA IF EXISTS "+qs+" CASCADE")
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	oid := relOID(ctx, t, dsn, sch, "a")
	if tabs := st.(cdc.TableLister).Tables(); len(tabs) != 1 || tabs[0].Relation != oid {
		t.Fatalf("Tables: %d schemas, want one of relation %s", len(tabs), oid)
	}

	w := &renameWriter{name: qs + ".a", under: map[int]string{}}
	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() { werr <- w.run(ctx, dsn, stop) }()
	waitRows := func(n int) {
		t.Helper()
		for w.rows() < n {
			select {
			case err := <-werr:
				t.Fatalf("writer: %v", err)
			case <-ctx.Done():
				t.Fatal("writer too slow")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitRows(20)
	if err := execSQL(ctx, dsn, false, "ALTER TABLE "+qs+".a RENAME TO b"); err != nil {
		t.Fatal(err)
	}
	w.setName(qs + ".b")
	waitRows(w.rows() + 20)
	if err := execSQL(ctx, dsn, false, "ALTER TABLE "+qs+".b RENAME TO c"); err != nil {
		t.Fatal(err)
	}
	w.setName(qs + ".c")
	waitRows(w.rows() + 20)
	close(stop)
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	// One transaction writing under the old name, renaming, and writing under the new one.
	last := w.rows()
	if err := execSQL(ctx, dsn, true,
		fmt.Sprintf("INSERT INTO %s.c VALUES (%d, %d)", qs, last+1, last+1),
		"ALTER TABLE "+qs+".c RENAME TO d",
		fmt.Sprintf("INSERT INTO %s.d VALUES (%d, %d)", qs, last+2, last+2)); err != nil {
		t.Fatal(err)
	}
	w.under[last+1], w.under[last+2] = qs+".c", qs+".d"

	index := map[int]int{}
	names := map[string]int{}
	var tx string // the transaction of the insert seen last, and its row
	txRow := 0
	for len(index) < last+2 || index[last+2] == 0 {
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Schema == nil || ev.Schema.Relation != oid {
			t.Fatalf("%v of %s: relation %v, want %s", ev.Op, ev.Table, ev.Schema, oid)
		}
		if ev.Schema.ID != ev.Table {
			t.Fatalf("event of %s with the schema of %s", ev.Table, ev.Schema.ID)
		}
		id := int(ev.After[0].(int64))
		if ev.Op == cdc.Insert {
			tx, txRow = ev.TxID, id
		} else if ev.TxID != tx {
			t.Fatalf("%v of row %d without its transaction's insert", ev.Op, id)
		}
		// Every statement of the writer's transaction i wrote under the name row i was
		// inserted under; the last transaction's second insert under the new name.
		want := w.under[txRow]
		if ev.Op == cdc.Insert {
			want = w.under[id]
		}
		if got := quote(ev.Table.Schema) + "." + ev.Table.Table; got != want {
			t.Fatalf("%v of row %d carries %s, written under %s", ev.Op, id, got, want)
		}
		names[ev.Table.Table]++
		index[id] = int(ev.After[1].(int64))
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if names[n] == 0 {
			t.Errorf("no change under the name %s (%v)", n, names)
		}
	}
	if relOID(ctx, t, dsn, sch, "d") != oid {
		t.Fatal("the renamed table has another OID")
	}
	compareRows(ctx, t, dsn, qs+".d", index)
}

// compareRows compares the table with the rows rebuilt from its changes, row by row.
func compareRows(ctx context.Context, t *testing.T, dsn, table string, index map[int]int) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT id, n FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	source := map[int]int{}
	for rows.Next() {
		var id, n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		source[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, n := range source {
		if got, ok := index[id]; !ok || got != n {
			t.Errorf("row %d: source n=%d, changes n=%d (present %v)", id, n, got, ok)
		}
	}
	for id := range index {
		if _, ok := source[id]; !ok {
			t.Errorf("row %d in the changes, not in the source", id)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestSetSchemaIntoAndOutOfCapture: tables moved between schemas (ALTER TABLE ... SET SCHEMA)
// take their new name at their next change, with the same Relation. A named table (published
// FOR TABLE, which follows the relation) moved into a pattern's schema is captured under its
// new name; moved on into a schema nobody captures, the server still sends its changes and
// the stream skips them (with a warning). A table moved into a pattern's schema from outside
// is captured from its next change; moved out again, the server stops sending it.
func TestSetSchemaIntoAndOutOfCapture(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sfx := suffix(t)
	capS, outS, awayS := "p32_cap_"+sfx, "p32_out_"+sfx, "p32_away_"+sfx
	qc, qo, qa := quote(capS), quote(outS), quote(awayS)
	dropAtEnd(t, dsn, "DROP SCHEMA IF EXISTS "+qc+" CASCADE", "DROP SCHEMA IF EXISTS "+qo+" CASCADE", "DROP SCHEMA IF EXISTS "+qa+" CASCADE")
	if err := execSQL(ctx, dsn, false,
		"CREATE SCHEMA "+qc, "CREATE SCHEMA "+qo, "CREATE SCHEMA "+qa,
		"CREATE TABLE "+qc+".mark (id int PRIMARY KEY)",
		"CREATE TABLE "+qo+".m (id int PRIMARY KEY, n int)",
		"CREATE TABLE "+qo+".x (id int PRIMARY KEY, n int)"); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	src := p32Source(t, dsn, pgcdc.Options{
		Snapshot: cdc.SnapshotNever,
		Tables:   []pgcdc.Table{{Schema: capS, Name: pgcdc.AllTables}, {Schema: outS, Name: "m"}},
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	}, "DROP SCHEMA IF EXISTS "+qc+" CASCADE", "DROP SCHEMA IF EXISTS "+qo+" CASCADE", "DROP SCHEMA IF EXISTS "+qa+" CASCADE")
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mOID, xOID := relOID(ctx, t, dsn, outS, "m"), relOID(ctx, t, dsn, outS, "x")
	mark := 0
	// expect reads the next events: each (schema, table, id, relation) in order, then the
	// marker the step writes last, so nothing skipped may hide behind the end of the check.
	expect := func(step string, want ...[4]string) {
		t.Helper()
		mark++
		if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s.mark VALUES (%d)", qc, mark)); err != nil {
			t.Fatal(err)
		}
		for _, wv := range want {
			ev := cdctest.NextEvent(ctx, t, st)
			got := [4]string{ev.Table.Schema, ev.Table.Table, fmt.Sprint(ev.After[0]), ev.Schema.Relation}
			if got != wv {
				t.Fatalf("%s: event %v, want %v", step, got, wv)
			}
		}
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Table.Table != "mark" || ev.After[0] != int64(mark) {
			t.Fatalf("%s: %v of %s.%s row %v, want the marker %d", step, ev.Op, ev.Table.Schema, ev.Table.Table, ev.After[0], mark)
		}
	}
	run := func(stmts ...string) {
		t.Helper()
		if err := execSQL(ctx, dsn, false, stmts...); err != nil {
			t.Fatal(err)
		}
	}

	run("INSERT INTO "+qo+".m VALUES (1, 1)", "INSERT INTO "+qo+".x VALUES (1, 1)")
	expect("named table", [4]string{outS, "m", "1", mOID})

	run("ALTER TABLE "+qo+".m SET SCHEMA "+qc, "INSERT INTO "+qc+".m VALUES (2, 2)",
		"ALTER TABLE "+qo+".x SET SCHEMA "+qc, "INSERT INTO "+qc+".x VALUES (2, 2)")
	expect("moved into the pattern's schema", [4]string{capS, "m", "2", mOID}, [4]string{capS, "x", "2", xOID})

	run("ALTER TABLE "+qc+".m SET SCHEMA "+qa, "INSERT INTO "+qa+".m VALUES (3, 3)", "UPDATE "+qa+".m SET n = 0",
		"ALTER TABLE "+qc+".x SET SCHEMA "+qo, "INSERT INTO "+qo+".x VALUES (3, 3)", "DELETE FROM "+qo+".x")
	expect("moved out of the capture")
	if !strings.Contains(logs.String(), "renamed to a name not captured") {
		t.Error("no warning for the table that left the capture")
	}

	// Back into the capture under another captured name: captured again from its next change.
	run("ALTER TABLE "+qa+".m SET SCHEMA "+qc, "ALTER TABLE "+qc+".m RENAME TO m2", "INSERT INTO "+qc+".m2 VALUES (4, 4)")
	expect("moved back", [4]string{capS, "m2", "4", mOID})
}

// TestDropCreateSameName: a captured table dropped and created again under the same name,
// with the same columns, is another relation: its changes carry the new OID, not the cached
// schema of the old one (whose snapshot rows and changes carried the old OID).
func TestDropCreateSameName(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sch := "p32_dc_" + suffix(t)
	qs := quote(sch)
	dropAtEnd(t, dsn, "DROP SCHEMA IF EXISTS "+qs+" CASCADE")
	if err := execSQL(ctx, dsn, false, "CREATE SCHEMA "+qs, "CREATE TABLE "+qs+".d (id int PRIMARY KEY, n int)",
		"INSERT INTO "+qs+".d VALUES (0, 0)"); err != nil {
		t.Fatal(err)
	}
	src := p32Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotInitial, Tables: []pgcdc.Table{{Schema: sch, Name: pgcdc.AllTables}}}, "DROP SCHEMA IF EXISTS "+qs+" CASCADE")
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first := relOID(ctx, t, dsn, sch, "d")
	if ev := cdctest.NextEvent(ctx, t, st); ev.Op != cdc.Read || ev.Schema.Relation != first {
		t.Fatalf("snapshot row: %v relation %s, want a read of relation %s", ev.Op, ev.Schema.Relation, first)
	}
	if err := execSQL(ctx, dsn, false, "INSERT INTO "+qs+".d VALUES (1, 1)"); err != nil {
		t.Fatal(err)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Schema.Relation != first || ev.Table.Table != "d" {
		t.Fatalf("first table: %s relation %s, want d relation %s", ev.Table.Table, ev.Schema.Relation, first)
	}
	if err := execSQL(ctx, dsn, false, "DROP TABLE "+qs+".d", "CREATE TABLE "+qs+".d (id int PRIMARY KEY, n int)",
		"INSERT INTO "+qs+".d VALUES (1, 2)"); err != nil {
		t.Fatal(err)
	}
	second := relOID(ctx, t, dsn, sch, "d")
	if second == first {
		t.Fatal("the server reused the OID")
	}
	ev := cdctest.NextEvent(ctx, t, st)
	if ev.Schema.Relation != second || ev.Table.Table != "d" || ev.After[1] != int64(2) {
		t.Fatalf("re-created table: %s relation %s n %v, want d relation %s n 2", ev.Table.Table, ev.Schema.Relation, ev.After[1], second)
	}
	if s, err := src.LoadSchema(ctx, ev.Table); err != nil || s.Relation != second {
		t.Fatalf("LoadSchema after the re-creation: %v, %v", s, err)
	}
}

// TestRenameToUncapturedStops: a named table renamed to a name not captured stops delivering
// at once, although its FOR TABLE publication still sends its changes, and the warning names
// the fix that publishes a table created under the old name.
func TestRenameToUncapturedStops(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	tb, gone, mk := "p32_r_"+sfx, "p32_gone_"+sfx, "p32_mk_"+sfx
	dropAtEnd(t, dsn, "DROP TABLE IF EXISTS "+quote(tb), "DROP TABLE IF EXISTS "+quote(gone), "DROP TABLE IF EXISTS "+quote(mk))
	if err := execSQL(ctx, dsn, false, "CREATE TABLE "+quote(tb)+" (id int PRIMARY KEY, n int)", "CREATE TABLE "+quote(mk)+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	src := p32Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}, {Name: mk}}, Logger: slog.New(slog.NewTextHandler(logs, nil))},
		"DROP TABLE IF EXISTS "+quote(tb), "DROP TABLE IF EXISTS "+quote(gone), "DROP TABLE IF EXISTS "+quote(mk))
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	oid := relOID(ctx, t, dsn, "public", tb)
	if err := execSQL(ctx, dsn, false, "INSERT INTO "+quote(tb)+" VALUES (1, 1)"); err != nil {
		t.Fatal(err)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Table.Table != tb || ev.Schema.Relation != oid {
		t.Fatalf("before the rename: %s relation %s", ev.Table.Table, ev.Schema.Relation)
	}
	if err := execSQL(ctx, dsn, false, "ALTER TABLE "+quote(tb)+" RENAME TO "+quote(gone),
		"INSERT INTO "+quote(gone)+" VALUES (2, 2)", "UPDATE "+quote(gone)+" SET n = 3", "DELETE FROM "+quote(gone)+" WHERE id = 1",
		"INSERT INTO "+quote(mk)+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if !exists(t, dsn, `SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND tablename = $2`, src.Publication(), gone) {
		t.Fatal("the publication no longer publishes the renamed table")
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Table.Table != mk {
		t.Fatalf("after the rename: %v of %s", ev.Op, ev.Table.Table)
	}
	out := logs.String()
	if !strings.Contains(out, "renamed to a name not captured") || !strings.Contains(out, "ADD TABLE public."+tb) {
		t.Errorf("warnings after the rename:\n%s", out)
	}
	// Back under its captured name: the changes made while away were skipped, so the relation
	// comes back with a new identity (the sink resets the name's index and has it read again).
	if err := execSQL(ctx, dsn, false, "ALTER TABLE "+quote(gone)+" RENAME TO "+quote(tb), "INSERT INTO "+quote(tb)+" VALUES (4, 4)"); err != nil {
		t.Fatal(err)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Table.Table != tb || ev.Schema.Relation != oid+".1" || ev.Op != cdc.Insert {
		t.Fatalf("after the return: %v of %s relation %s, want relation %s.1", ev.Op, ev.Table.Table, ev.Schema.Relation, oid)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "came back into the captured tables") {
		t.Errorf("no warning at the return:\n%s", out)
	}
}
