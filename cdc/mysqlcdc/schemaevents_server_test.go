package mysqlcdc_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/internal/charset"
)

// schemaFixture is one stream over two databases captured whole (db, db3) and one that is not
// (out), with a marker table that ends each case.
type schemaFixture struct {
	s            server
	db, out, db3 string
	st           cdc.Stream
	opts         mysqlcdc.Options
	mark         int
	last         int64          // the version of the last event read
	markCP       cdc.Checkpoint // the checkpoint of the last marker row read
}

// source returns a source of the fixture's databases with a server id of its own.
func (f *schemaFixture) source(t *testing.T) *mysqlcdc.Source {
	t.Helper()
	opts := f.opts
	opts.ServerID = nextServerID()
	src, err := mysqlcdc.New(f.s.addr, f.s.user, f.s.pass, []mysqlcdc.TableName{{Database: f.db, Table: mysqlcdc.AllTables},
		{Database: f.db3, Table: mysqlcdc.AllTables}}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// until reads the events up to the next marker row (not returned), checking that versions
// strictly increase across the stream.
func (f *schemaFixture) until(ctx context.Context, t *testing.T) []cdc.Event {
	t.Helper()
	return f.untilAllowing(ctx, t, nil)
}

// untilAllowing is until, where a malformed event for which allow says true is returned
// rather than failing the test.
func (f *schemaFixture) untilAllowing(ctx context.Context, t *testing.T, allow func(cdc.Event) bool) []cdc.Event {
	t.Helper()
	f.mark++
	if err := f.s.exec(fmt.Sprintf("INSERT INTO %s.mark VALUES (%d)", quote(f.db), f.mark)); err != nil {
		t.Fatal(err)
	}
	var evs []cdc.Event
	for {
		ev := cdctest.NextAnyEvent(ctx, t, f.st)
		if ev.Malformed != nil && (allow == nil || !allow(ev)) {
			t.Fatalf("malformed event on %v: %v", ev.Table, ev.Malformed)
		}
		if v := ev.Position.Version(); v <= f.last {
			t.Fatalf("%v of %v at version %d, not above the previous %d", ev.Op, ev.Table, v, f.last)
		}
		f.last = ev.Position.Version()
		if ev.Schema == nil {
			t.Fatalf("%v of %v without a schema", ev.Op, ev.Table)
		}
		if ev.Table.Table == "mark" && ev.Op == cdc.Insert {
			if ev.After[0].(int64) != int64(f.mark) {
				t.Fatalf("marker %v, want %d", ev.After[0], f.mark)
			}
			f.markCP = ev.Checkpoint
			return evs
		}
		evs = append(evs, ev)
	}
}

// shape describes events compactly: "T db.table rel" or "I db.table rel", where rel is "-" for
// no identity and otherwise the identity's index among those met in the case (#0, #1, ...).
func shape(evs []cdc.Event) []string {
	ids := map[string]int{}
	var out []string
	for _, ev := range evs {
		rel := "-"
		if r := ev.Schema.Relation; r != "" {
			if _, ok := ids[r]; !ok {
				ids[r] = len(ids)
			}
			rel = "#" + strconv.Itoa(ids[r])
		}
		op := "I"
		if ev.Op == cdc.Truncate {
			op = "T"
		}
		out = append(out, op+" "+ev.Table.Database+"."+ev.Table.Table+" "+rel)
	}
	return out
}

// checkDDLEvents checks the Truncate events of one DDL statement: consecutive, of one
// transaction, without rows, the checkpoint on the last only, and each new identity the
// decimal version of the event that announced it.
func checkDDLEvents(t *testing.T, evs []cdc.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Op != cdc.Truncate {
			t.Fatalf("event %d: %v, want a truncate", i, ev.Op)
		}
		if ev.Before != nil || ev.After != nil {
			t.Errorf("truncate %d carries a row", i)
		}
		if ev.TxID != evs[0].TxID || ev.TxID == "" {
			t.Errorf("truncate %d: transaction %q, first %q", i, ev.TxID, evs[0].TxID)
		}
		if (ev.Checkpoint != nil) != (i == len(evs)-1) {
			t.Errorf("truncate %d of %d: checkpoint %v", i, len(evs), ev.Checkpoint != nil)
		}
		if ev.Schema.ID != ev.Table {
			t.Errorf("truncate %d: schema of %v for %v", i, ev.Schema.ID, ev.Table)
		}
		if r := ev.Schema.Relation; r != "" {
			// A vacated name carries the identity it had, a new one is the version of the
			// event announcing it: a version either way, never above the event's.
			if v, err := strconv.ParseInt(r, 10, 64); err != nil || v > ev.Position.Version() {
				t.Errorf("truncate %d at version %d: identity %q", i, ev.Position.Version(), r)
			}
		}
	}
}

func wantShape(t *testing.T, what string, evs []cdc.Event, want ...string) {
	t.Helper()
	if got := shape(evs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: events\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestSchemaEvents runs the statements that give a captured name another relation through one
// stream: each emits Truncate events at its own version with the identities of the rule (see
// Schema events in the package documentation), and the changes after it carry the new table
// and identity. Rows are compared with the server's row by row.
func TestSchemaEvents(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		sfx := suffix()
		f := &schemaFixture{s: s, db: "m32_cap_" + sfx, out: "m32_out_" + sfx, db3: "m32_cap3_" + sfx}
		t.Cleanup(func() {
			for _, db := range []string{f.db, f.out, f.db3} {
				_ = s.exec("DROP DATABASE IF EXISTS " + quote(db))
			}
		})
		q := func(db, table string) string { return quote(db) + "." + quote(table) }
		setup := []string{"CREATE DATABASE " + quote(f.db), "CREATE DATABASE " + quote(f.out), "CREATE DATABASE " + quote(f.db3),
			"CREATE TABLE " + q(f.db, "mark") + " (id INT PRIMARY KEY)"}
		for _, tb := range []string{"ra", "sa", "al", "mv", "dc"} {
			setup = append(setup, "CREATE TABLE "+q(f.db, tb)+" (id INT PRIMARY KEY, v VARCHAR(20))")
		}
		setup = append(setup, "CREATE TABLE "+q(f.db, "sb")+" (id INT PRIMARY KEY, v VARCHAR(20), w INT)",
			"CREATE TABLE "+q(f.out, "src")+" (id INT PRIMARY KEY, v VARCHAR(20))",
			"INSERT INTO "+q(f.out, "src")+" VALUES (1, 'one'), (2, 'two'), (3, 'three')",
			"INSERT INTO "+q(f.db, "sa")+" VALUES (1, 'a')", "INSERT INTO "+q(f.db, "sb")+" VALUES (1, 'b', 1)",
			"INSERT INTO "+q(f.db, "mv")+" VALUES (1, 'm')", "INSERT INTO "+q(f.db, "dc")+" VALUES (1, 'd')")
		if err := s.exec(setup...); err != nil {
			t.Fatal(err)
		}
		f.opts = mysqlcdc.Options{Positioning: p, Snapshot: cdc.SnapshotNever,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		var err error
		if f.st, err = f.source(t).Open(ctx, nil); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.st.Close() }()
		if evs := f.until(ctx, t); len(evs) != 0 {
			t.Fatalf("events before any change: %v", shape(evs))
		}

		t.Run("rename under a writer", func(t *testing.T) { renameUnderWriter(ctx, t, f) })

		t.Run("swap", func(t *testing.T) {
			// Names without a database are of the statement's (USE).
			if err := s.exec("USE "+quote(f.db), "RENAME TABLE /* swap */ sa TO stmp, sb TO "+q(f.db, "sa")+", `stmp` TO sb",
				"INSERT INTO "+q(f.db, "sa")+" VALUES (2, 'from b', 2)", "INSERT INTO "+q(f.db, "sb")+" VALUES (2, 'from a')"); err != nil {
				t.Fatal(err)
			}
			evs := f.until(ctx, t)
			d := f.db
			// Both names are vacated (their identities unknown: "-"), then each receives its
			// relation after a stamp, so that a sink re-snapshots it; the passing name stmp
			// produces nothing.
			wantShape(t, "swap", evs, "T "+d+".sa -", "T "+d+".sb -", "T "+d+".sa #0", "T "+d+".sa #1", "T "+d+".sb #2", "T "+d+".sb #3",
				"I "+d+".sa #1", "I "+d+".sb #3")
			checkDDLEvents(t, evs[:6])
			if n := len(evs[0].Schema.Columns); n != 2 {
				t.Errorf("the vacated sa's truncate has %d columns, want sa's old 2", n)
			}
			if n := len(evs[6].Schema.Columns); n != 3 {
				t.Errorf("sa's insert has %d columns, want b's 3", n)
			}
		})

		t.Run("alter rename", func(t *testing.T) {
			if err := s.exec("ALTER TABLE "+q(f.db, "al")+" ADD COLUMN z INT, RENAME TO "+q(f.db, "al2"),
				"INSERT INTO "+q(f.db, "al2")+" VALUES (1, 'x', 5)"); err != nil {
				t.Fatal(err)
			}
			evs := f.until(ctx, t)
			d := f.db
			wantShape(t, "alter rename", evs, "T "+d+".al -", "T "+d+".al2 #0", "T "+d+".al2 #1", "I "+d+".al2 #1")
			checkDDLEvents(t, evs[:3])
			if n := len(evs[3].Schema.Columns); n != 3 || fmt.Sprint(evs[3].After) != "[1 x 5]" {
				t.Errorf("insert into al2: %v with %d columns", evs[3].After, n)
			}
			// The statement changed the columns too: what the stream knew of them is outdated.
			for i, ev := range evs[:3] {
				if n := len(ev.Schema.Columns); n != 0 {
					t.Errorf("truncate %d of an ALTER ... RENAME carries %d columns, want none (unknown)", i, n)
				}
			}
		})

		t.Run("altered, then renamed", func(t *testing.T) { alteredThenRenamed(ctx, t, f) })

		t.Run("moves between databases", func(t *testing.T) {
			if err := s.exec("RENAME TABLE "+q(f.db, "mv")+" TO "+q(f.out, "mv"), "INSERT INTO "+q(f.out, "mv")+" VALUES (2, 'out')"); err != nil {
				t.Fatal(err)
			}
			if evs := f.until(ctx, t); len(evs) != 0 {
				// Out of the capture: nothing (the index keeps its documents).
				t.Fatalf("moved out of the capture: %v", shape(evs))
			}
			if err := s.exec("RENAME TABLE "+q(f.out, "mv")+" TO "+q(f.db, "mv2"), "INSERT INTO "+q(f.db, "mv2")+" VALUES (3, 'in')"); err != nil {
				t.Fatal(err)
			}
			evs := f.until(ctx, t)
			d := f.db
			// mv, the name the relation left, is vacated after the name entered (its identity
			// unknown: no DDL of the stream touched it).
			wantShape(t, "moved into the capture", evs, "T "+d+".mv2 #0", "T "+d+".mv2 #1", "T "+d+".mv -", "I "+d+".mv2 #1")
			checkDDLEvents(t, evs[:3])
			in, resume := evs[1].Schema.Relation, evs[3].Checkpoint
			if err := s.exec("RENAME TABLE "+q(f.db, "mv2")+" TO "+q(f.db3, "mv"), "INSERT INTO "+q(f.db3, "mv")+" VALUES (4, 'db3')"); err != nil {
				t.Fatal(err)
			}
			evs = f.until(ctx, t)
			d3 := f.db3
			// The vacated mv2 carries the identity the stream gave it.
			wantShape(t, "moved between captured databases", evs, "T "+d+".mv2 #0", "T "+d3+".mv #1", "T "+d3+".mv #2", "I "+d3+".mv #2")
			checkDDLEvents(t, evs[:3])
			if evs[0].Schema.Relation != in {
				t.Errorf("vacated mv2 with identity %q, want %q", evs[0].Schema.Relation, in)
			}
			compareRows(t, s, f.db3, "mv", nil, "[1 m]", "[2 out]", "[3 in]", "[4 db3]")

			// A stream reopened after mv2 got its identity does not know it: the vacated mv2
			// carries none, and the rest comes with the same versions and identities.
			st2, err := f.source(t).Open(ctx, resume)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			for i, want := range evs {
				ev := cdctest.NextEvent(ctx, t, st2)
				for ev.Table.Table == "mark" {
					ev = cdctest.NextEvent(ctx, t, st2)
				}
				wantRel := want.Schema.Relation
				if i == 0 {
					wantRel = ""
				}
				if ev.Op != want.Op || ev.Table != want.Table || ev.Position.Version() != want.Position.Version() || ev.Schema.Relation != wantRel {
					t.Fatalf("reopened, event %d: %v of %v at %d (identity %q), want %v of %v at %d (%q)", i, ev.Op, ev.Table,
						ev.Position.Version(), ev.Schema.Relation, want.Op, want.Table, want.Position.Version(), wantRel)
				}
			}
		})

		t.Run("moved out and back", func(t *testing.T) { movedOutAndBack(ctx, t, f) })

		t.Run("drop and create", func(t *testing.T) {
			if err := s.exec("DROP TABLE IF EXISTS " + q(f.db, "dc") + ", " + q(f.db, "nothere")); err != nil {
				t.Fatal(err)
			}
			if evs := f.until(ctx, t); len(evs) != 0 {
				t.Fatalf("drop: %v", shape(evs))
			}
			if err := s.exec("CREATE TABLE "+q(f.db, "dc")+" (id INT PRIMARY KEY, n INT, v TEXT)", "INSERT INTO "+q(f.db, "dc")+" VALUES (5, 5, 'new')",
				"CREATE TABLE IF NOT EXISTS "+q(f.db, "dc")+" (id INT PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			evs := f.until(ctx, t)
			d := f.db
			wantShape(t, "create", evs, "T "+d+".dc #0", "I "+d+".dc #0")
			checkDDLEvents(t, evs[:1])
			if evs[0].Schema.Relation != strconv.FormatInt(evs[0].Position.Version(), 10) || len(evs[0].Schema.Columns) != 3 {
				t.Errorf("create: identity %q at version %d, %d columns", evs[0].Schema.Relation, evs[0].Position.Version(), len(evs[0].Schema.Columns))
			}
		})

		t.Run("create select", func(t *testing.T) {
			if err := s.exec("CREATE TABLE " + q(f.db, "cs") + " (PRIMARY KEY (id)) SELECT * FROM " + q(f.out, "src")); err != nil {
				t.Fatal(err)
			}
			evs := f.until(ctx, t)
			d := f.db
			wantShape(t, "create select", evs, "T "+d+".cs #0", "I "+d+".cs #0", "I "+d+".cs #0", "I "+d+".cs #0")
			for i, ev := range evs {
				if ev.TxID != evs[0].TxID {
					t.Errorf("event %d of transaction %q, the truncate's %q", i, ev.TxID, evs[0].TxID)
				}
				if (ev.Checkpoint != nil) != (i == len(evs)-1) {
					t.Errorf("event %d of %d: checkpoint %v", i, len(evs), ev.Checkpoint != nil)
				}
			}
			var got []string
			for _, ev := range evs[1:] {
				got = append(got, fmt.Sprint(ev.After))
			}
			compareRows(t, s, f.db, "cs", got)
		})

		t.Run("rows of a table gone since", func(t *testing.T) {
			if err := s.exec("CREATE TABLE "+q(f.db, "gone")+" (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO "+q(f.db, "gone")+" VALUES (1, 'x')"); err != nil {
				t.Fatal(err)
			}
			evs := f.until(ctx, t)
			wantShape(t, "create", evs, "T "+f.db+".gone #0", "I "+f.db+".gone #0")
			cp := evs[1].Checkpoint
			if err := s.exec("INSERT INTO "+q(f.db, "gone")+" VALUES (2, 'y')", "UPDATE "+q(f.db, "gone")+" SET v = 'z' WHERE id = 1",
				"RENAME TABLE "+q(f.db, "gone")+" TO "+q(f.out, "gone")); err != nil {
				t.Fatal(err)
			}
			f.until(ctx, t)
			// A stream reading these rows now is behind the rename: the catalog no longer has
			// the table, the rows are read with the table map's columns.
			st2, err := f.source(t).Open(ctx, cp)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			for i, want := range []string{"insert [2 y]", "update [1 z]"} {
				ev := cdctest.NextEvent(ctx, t, st2) // fails on a malformed event
				for ev.Table.Table == "mark" {
					ev = cdctest.NextEvent(ctx, t, st2)
				}
				op := map[cdc.Op]string{cdc.Insert: "insert", cdc.Update: "update"}[ev.Op]
				if got := op + " " + fmt.Sprint(ev.After); got != want || ev.Table.Table != "gone" || len(ev.Schema.Columns) != 2 ||
					len(ev.Schema.PrimaryKey) != 1 || ev.Schema.ID != ev.Table {
					t.Fatalf("reopened, event %d: %s of %v (schema %+v), want %s", i, got, ev.Table, ev.Schema, want)
				}
			}
		})

		t.Run("rows of relations renamed and replaced since", func(t *testing.T) {
			// Read from behind all of the DDL below, each row image must be decoded with the
			// description of the relation that wrote it -- its character sets and key -- not
			// with the catalog's description of whatever bears the name now.
			lt, lt2, lt4 := q(f.db, "lt"), q(f.db, "lt2"), q(f.db, "lt4")
			if err := s.exec("CREATE TABLE "+lt+" (k1 INT PRIMARY KEY, c3 LONGTEXT CHARACTER SET latin1, v VARCHAR(20) CHARACTER SET latin1)",
				"INSERT INTO "+lt+" VALUES (1, 'café', 'déjà')",
				"CREATE TABLE "+q(f.out, "src4")+" (id INT PRIMARY KEY, t TEXT CHARACTER SET latin1, e ENUM('à', 'ñ') CHARACTER SET latin1) CHARACTER SET latin1",
				"INSERT INTO "+q(f.out, "src4")+" VALUES (1, 'façade', 'ñ')"); err != nil {
				t.Fatal(err)
			}
			evs := f.until(ctx, t)
			wantShape(t, "create", evs, "T "+f.db+".lt #0", "I "+f.db+".lt #0")
			cp := evs[1].Checkpoint
			if err := s.exec("INSERT INTO "+lt+" VALUES (2, 'naïve', 'señor')", "UPDATE "+lt+" SET c3 = 'crème' WHERE k1 = 1",
				"RENAME TABLE "+lt+" TO "+lt2,
				"INSERT INTO "+lt2+" VALUES (3, 'über', 'größe')",
				"TRUNCATE TABLE "+lt2, "INSERT INTO "+lt2+" VALUES (4, 'où', 'là')",
				// A new relation under the old name: another key, other character sets.
				"CREATE TABLE "+lt+" (k1 VARCHAR(10) PRIMARY KEY, c3 LONGTEXT CHARACTER SET utf8mb4, v VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci)",
				"INSERT INTO "+lt+" VALUES ('a', '日本', 'ŵ')",
				"RENAME TABLE "+lt2+" TO "+q(f.out, "lt3"),
				// A relation the stream never saw enters, is written and leaves again.
				"RENAME TABLE "+q(f.out, "src4")+" TO "+lt4,
				"INSERT INTO "+lt4+" VALUES (2, 'garçon', 'à')",
				"RENAME TABLE "+lt4+" TO "+q(f.out, "src5")); err != nil {
				t.Fatal(err)
			}
			live := f.until(ctx, t)
			liveRows := describeRows(t, live)
			for i, r := range liveRows {
				if r == "T lt4 3 [0]" {
					liveRows[i] = "T lt4 0 []" // read before the rename out: the catalog still had it
				}
			}
			want := []string{
				"I lt [2 naïve señor]", "U lt [1 crème déjà]",
				"T lt 3 [0]", "T lt2 3 [0]", "T lt2 3 [0]", // vacated, entered (two identities)
				"I lt2 [3 über größe]", "T lt2 3 [0]", "I lt2 [4 où là]",
				"T lt 3 [0]", "I lt [a 日本 ŵ]",
				"T lt4 0 []", "T lt4 0 []", // entered from an uncaptured name, gone from the catalog: no columns
				"I lt4 [2 garçon à]",
			}
			if got := liveRows; !slices.Equal(got, want) {
				t.Fatalf("live stream:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			st2, err := f.source(t).Open(ctx, cp)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			var behind []cdc.Event
			for len(behind) < len(want) {
				ev := cdctest.NextEvent(ctx, t, st2) // fails on a malformed event
				if ev.Table.Table != "mark" {
					behind = append(behind, ev)
				}
			}
			if got := describeRows(t, behind); !slices.Equal(got, want) {
				t.Fatalf("stream reopened before the DDL:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The same versions as the live stream's, and the same identities from the first
			// DDL the reopened stream read on (before it, lt's identity is one it never learnt).
			for i := range want {
				if behind[i].Position.Version() != live[i].Position.Version() || i > 2 && behind[i].Schema.Relation != live[i].Schema.Relation {
					t.Errorf("event %d (%s): version %d relation %q reopened, %d %q live", i, want[i], behind[i].Position.Version(),
						behind[i].Schema.Relation, live[i].Position.Version(), live[i].Schema.Relation)
				}
			}
		})

		t.Run("rows of a relation dropped before they were read", func(t *testing.T) { droppedBeforeRead(ctx, t, f) })

		t.Run("uncaptured", func(t *testing.T) {
			if err := s.exec("RENAME TABLE "+q(f.out, "src")+" TO "+q(f.out, "src2"), "CREATE TABLE "+q(f.out, "x")+" (id INT PRIMARY KEY)",
				"DROP TABLE "+q(f.out, "x")); err != nil {
				t.Fatal(err)
			}
			if evs := f.until(ctx, t); len(evs) != 0 {
				t.Fatalf("DDL of uncaptured tables: %v", shape(evs))
			}
		})
	})
}

// renameUnderWriter renames a captured table while a writer inserts into it (and, once the
// old name is gone, into the new one): the changes before the rename are of the old name, those
// after of the new one with its new identity, the rename's events lie between them, and every
// row arrives once, equal to the server's. Read again from before the rename, the same events
// come with the same versions and identities.
func renameUnderWriter(ctx context.Context, t *testing.T, f *schemaFixture) {
	s := f.s
	const rows = 300
	var written atomic.Int32
	done := make(chan error, 1)
	go func() {
		c, err := s.conn()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		// It writes until it has written rows/3 rows into the new name, however late the rename.
		name, renamed := quote(f.db)+".ra", 0
		for i := 1; renamed < rows/3; i++ {
			_, err := c.Execute(fmt.Sprintf("INSERT INTO %s VALUES (%d, 'row %d')", name, i, i))
			if err != nil && strings.Contains(err.Error(), "doesn't exist") && strings.HasSuffix(name, ".ra") {
				name = quote(f.db) + ".rb"
				i--
				continue
			}
			if err != nil {
				done <- err
				return
			}
			written.Add(1)
			if strings.HasSuffix(name, ".rb") {
				renamed++
			}
			if ctx.Err() != nil {
				done <- ctx.Err()
				return
			}
		}
		done <- nil
	}()
	for written.Load() < rows/3 { // the rename comes while the writer writes
		select {
		case err := <-done:
			t.Fatalf("writer ended early: %v", err)
		default:
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.exec("RENAME TABLE " + quote(f.db) + ".ra TO " + quote(f.db) + ".rb"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := f.until(ctx, t)
	var before, ddl, after []cdc.Event
	for _, ev := range evs {
		switch {
		case ev.Op == cdc.Truncate:
			ddl = append(ddl, ev)
		case len(ddl) == 0:
			before = append(before, ev)
		default:
			after = append(after, ev)
		}
	}
	d := f.db
	wantShape(t, "rename", ddl, "T "+d+".ra -", "T "+d+".rb #0", "T "+d+".rb #1")
	checkDDLEvents(t, ddl)
	if len(before) == 0 {
		t.Fatal("no change before the rename")
	}
	var got []string
	for _, ev := range before {
		if ev.Op != cdc.Insert || ev.Table.Table != "ra" || ev.Schema.Relation != "" {
			t.Fatalf("before the rename: %v of %v (identity %q)", ev.Op, ev.Table, ev.Schema.Relation)
		}
		got = append(got, fmt.Sprint(ev.After))
	}
	id := ddl[2].Schema.Relation
	for _, ev := range after {
		if ev.Op != cdc.Insert || ev.Table.Table != "rb" || ev.Schema.Relation != id {
			t.Fatalf("after the rename: %v of %v (identity %q, want %q)", ev.Op, ev.Table, ev.Schema.Relation, id)
		}
		got = append(got, fmt.Sprint(ev.After))
	}
	compareRows(t, s, f.db, "rb", got)

	// Again from the last change before the rename.
	st2, err := f.source(t).Open(ctx, before[len(before)-1].Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	for i, want := range append(append([]cdc.Event(nil), ddl...), after[0]) {
		ev := cdctest.NextEvent(ctx, t, st2)
		if ev.Op != want.Op || ev.Table != want.Table || ev.Position.Version() != want.Position.Version() ||
			ev.Schema.Relation != want.Schema.Relation {
			t.Fatalf("replayed event %d: %v of %v at %d (identity %q), first %v of %v at %d (%q)", i, ev.Op, ev.Table,
				ev.Position.Version(), ev.Schema.Relation, want.Op, want.Table, want.Position.Version(), want.Schema.Relation)
		}
	}
}

// compareRows compares a table's rows (id order) with got (any order) and want.
func compareRows(t *testing.T, s server, db, table string, got []string, want ...string) {
	t.Helper()
	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Execute("SELECT * FROM " + quote(db) + "." + quote(table) + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for i := 0; i < r.RowNumber(); i++ {
		var vals []string
		for j := range r.Fields {
			v, _ := r.GetString(i, j)
			vals = append(vals, v)
		}
		rows = append(rows, "["+strings.Join(vals, " ")+"]")
	}
	if want != nil && strings.Join(rows, ",") != strings.Join(want, ",") {
		t.Errorf("%s.%s holds %v, want %v", db, table, rows, want)
	}
	if got != nil {
		sort.Slice(got, func(i, j int) bool { return rowID(got[i]) < rowID(got[j]) })
		if strings.Join(rows, ",") != strings.Join(got, ",") {
			t.Errorf("%s.%s holds %d rows, the stream delivered %d; first difference:\n%s", db, table, len(rows), len(got), firstDiff(rows, got))
		}
	}
}

func rowID(row string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(strings.Fields(row)[0], "["))
	return n
}

func firstDiff(a, b []string) string {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("row %d: server %q, stream %q", i, x, y)
		}
	}
	return "none"
}

// mirrorIndex applies events the way a sink's index mirrors them (a Truncate empties the
// name, an insert adds a row) and returns each name's rows.
type mirrorIndex map[string]map[string]bool

func (m mirrorIndex) apply(evs []cdc.Event) {
	for _, ev := range evs {
		n := ev.Table.Database + "." + ev.Table.Table
		switch ev.Op {
		case cdc.Truncate:
			m[n] = map[string]bool{}
		case cdc.Insert:
			if m[n] == nil {
				m[n] = map[string]bool{}
			}
			m[n][fmt.Sprint(ev.After)] = true
		}
	}
}

func (m mirrorIndex) rows(db, table string) []string {
	var out []string
	for r := range m[db+"."+table] {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return rowID(out[i]) < rowID(out[j]) })
	return out
}

// movedOutAndBack moves captured tables out of the capture and back: under another captured
// name the name left is vacated (its rows moved), after the names entered; back under its own
// name the name is entered again (emptied, re-snapshotted); a name re-created meanwhile, or a
// relation dropped while away, vacates nothing. Each name's mirrored rows are compared with the
// server's row by row.
func movedOutAndBack(ctx context.Context, t *testing.T, f *schemaFixture) {
	s, d, d3, o := f.s, f.db, f.db3, f.out
	q := func(db, table string) string { return quote(db) + "." + quote(table) }
	idx := mirrorIndex{}
	var setup []string
	for _, tb := range []string{"ob", "oh", "rc", "dr"} {
		setup = append(setup, "CREATE TABLE "+q(d, tb)+" (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO "+q(d, tb)+" VALUES (1, 'a')")
	}
	if err := s.exec(setup...); err != nil {
		t.Fatal(err)
	}
	evs := f.until(ctx, t)
	idx.apply(evs)
	created := map[string]string{}
	for _, ev := range evs {
		if ev.Op == cdc.Truncate {
			created[ev.Table.Table] = ev.Schema.Relation
		}
	}
	// Out of the capture, renamed among uncaptured names, written to there: nothing.
	if err := s.exec("RENAME TABLE "+q(d, "ob")+" TO "+q(o, "ob1")+", "+q(d, "oh")+" TO "+q(o, "oh"),
		"RENAME TABLE "+q(d, "rc")+" TO "+q(o, "rc"), "ALTER TABLE "+q(d, "dr")+" RENAME TO "+q(o, "dr"),
		"INSERT INTO "+q(o, "ob1")+" VALUES (2, 'away')", "RENAME TABLE "+q(o, "ob1")+" TO "+q(o, "ob2"),
		"INSERT INTO "+q(o, "ob2")+" VALUES (3, 'away')", "INSERT INTO "+q(o, "oh")+" VALUES (2, 'away')"); err != nil {
		t.Fatal(err)
	}
	if evs := f.until(ctx, t); len(evs) != 0 {
		t.Fatalf("moved out of the capture: %v", shape(evs))
	}
	compareRows(t, s, o, "ob2", nil, "[1 a]", "[2 away]", "[3 away]")
	compareRows(t, s, o, "oh", nil, "[1 a]", "[2 away]")
	for _, tb := range []string{"ob", "oh", "rc", "dr"} {
		if got := idx.rows(d, tb); strings.Join(got, ",") != "[1 a]" {
			t.Fatalf("%s after the move out: %v, want its last documents", tb, got)
		}
	}

	// Back under another captured name: ob3 entered, then ob vacated with the identity its
	// CREATE gave it.
	if err := s.exec("RENAME TABLE "+q(o, "ob2")+" TO "+q(d3, "ob3"), "INSERT INTO "+q(d3, "ob3")+" VALUES (4, 'back')"); err != nil {
		t.Fatal(err)
	}
	evs = f.until(ctx, t)
	wantShape(t, "moved back under another name", evs, "T "+d3+".ob3 #0", "T "+d3+".ob3 #1", "T "+d+".ob #2", "I "+d3+".ob3 #1")
	checkDDLEvents(t, evs[:3])
	if evs[2].Schema.Relation != created["ob"] || len(evs[2].Schema.Columns) != 2 {
		t.Errorf("vacated ob: identity %q (want %q), %d columns", evs[2].Schema.Relation, created["ob"], len(evs[2].Schema.Columns))
	}
	idx.apply(evs)
	if got := idx.rows(d, "ob"); len(got) != 0 {
		t.Errorf("ob after its relation came back as ob3: %v, want vacated", got)
	}
	// ob3's rows before the statement come with its re-snapshot (the sink's); the stream's
	// rows after it are the server's.
	compareRows(t, s, d3, "ob3", nil, "[1 a]", "[2 away]", "[3 away]", "[4 back]")
	if got := idx.rows(d3, "ob3"); strings.Join(got, ",") != "[4 back]" {
		t.Errorf("ob3 mirrored %v, want the row after the statement", got)
	}

	// Back under its own name: entered with a new identity (emptied, re-snapshotted), no
	// vacate.
	if err := s.exec("RENAME TABLE "+q(o, "oh")+" TO "+q(d, "oh"), "INSERT INTO "+q(d, "oh")+" VALUES (3, 'back')"); err != nil {
		t.Fatal(err)
	}
	evs = f.until(ctx, t)
	wantShape(t, "moved back under its own name", evs, "T "+d+".oh #0", "T "+d+".oh #1", "I "+d+".oh #1")
	checkDDLEvents(t, evs[:2])
	if evs[1].Schema.Relation == created["oh"] || evs[0].Schema.Relation == created["oh"] {
		t.Errorf("oh came back with the identity it left with (%q): no re-snapshot", created["oh"])
	}
	idx.apply(evs)
	compareRows(t, s, d, "oh", nil, "[1 a]", "[2 away]", "[3 back]")
	if got := idx.rows(d, "oh"); strings.Join(got, ",") != "[3 back]" {
		t.Errorf("oh mirrored %v, want the row after the statement", got)
	}

	// rc re-created while its old relation is away; dr's relation dropped while away and
	// another created under its uncaptured name: neither vacates anything when it moves in.
	if err := s.exec("CREATE TABLE "+q(d, "rc")+" (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO "+q(d, "rc")+" VALUES (7, 'new')",
		"DROP TABLE "+q(o, "dr"), "CREATE TABLE "+q(o, "dr")+" (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO "+q(o, "dr")+" VALUES (8, 'other')"); err != nil {
		t.Fatal(err)
	}
	evs = f.until(ctx, t)
	wantShape(t, "re-created", evs, "T "+d+".rc #0", "I "+d+".rc #0")
	idx.apply(evs)
	if err := s.exec("RENAME TABLE " + q(o, "rc") + " TO " + q(d3, "rc2") + ", " + q(o, "dr") + " TO " + q(d3, "dr2")); err != nil {
		t.Fatal(err)
	}
	evs = f.until(ctx, t)
	wantShape(t, "moved in, old names taken or relation dropped", evs, "T "+d3+".rc2 #0", "T "+d3+".rc2 #1", "T "+d3+".dr2 #2", "T "+d3+".dr2 #3")
	checkDDLEvents(t, evs)
	idx.apply(evs)
	compareRows(t, s, d, "rc", nil, "[7 new]")
	if got := idx.rows(d, "rc"); strings.Join(got, ",") != "[7 new]" {
		t.Errorf("rc mirrored %v, want the re-created table's row", got)
	}
	if got := idx.rows(d, "dr"); strings.Join(got, ",") != "[1 a]" {
		t.Errorf("dr mirrored %v, want the dropped relation's last documents", got)
	}
}

// describeRows describes events for comparison: "T table columns key" for a Truncate (the
// number of its schema's columns and its primary key), "I|U|D table [values]" for a row, the
// values as text -- TEXT columns (cdc.Base64 of the bytes in the column's character set)
// decoded with the character set the schema gives, so that the wrong one shows.
func describeRows(t *testing.T, evs []cdc.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Malformed != nil {
			t.Fatalf("%v of %v malformed: %v", ev.Op, ev.Table, ev.Malformed)
		}
		if ev.Schema.ID != ev.Table {
			t.Errorf("%v of %v with a schema of %v", ev.Op, ev.Table, ev.Schema.ID)
		}
		op := map[cdc.Op]string{cdc.Insert: "I", cdc.Update: "U", cdc.Delete: "D", cdc.Truncate: "T"}[ev.Op]
		if ev.Op == cdc.Truncate {
			out = append(out, fmt.Sprintf("T %s %d %v", ev.Table.Table, len(ev.Schema.Columns), ev.Schema.PrimaryKey))
			continue
		}
		row := ev.After
		if row == nil {
			row = ev.Before
		}
		vals := make([]string, len(row))
		for i, v := range row {
			switch v := v.(type) {
			case cdc.Base64:
				b, err := base64.StdEncoding.DecodeString(string(v))
				if err != nil {
					t.Fatal(err)
				}
				cs := ev.Schema.Columns[i].Charset
				text, err := charset.Decode(cs, b)
				if err != nil || !utf8.ValidString(text) {
					t.Fatalf("%v of %v: column %s does not decode from %q: %v", ev.Op, ev.Table, ev.Schema.Columns[i].Name, cs, err)
				}
				vals[i] = text
			default:
				vals[i] = fmt.Sprint(v)
			}
		}
		if len(ev.Schema.PrimaryKey) == 0 {
			t.Errorf("%v of %v: the schema has no primary key", ev.Op, ev.Table)
		}
		out = append(out, fmt.Sprintf("%s %s %v", op, ev.Table.Table, vals))
	}
	return out
}

// alteredThenRenamed: a Truncate never carries a description of a relation older than an
// ALTER TABLE the stream read since (a sink would map a new generation with the old types):
// after the ALTER, until a row of the table is decoded, a rename back into the capture, a
// TRUNCATE and a relation altered while out of the capture give Truncates without columns,
// identities as ever; once a row is decoded they carry its columns again.
func alteredThenRenamed(ctx context.Context, t *testing.T, f *schemaFixture) {
	s, d, o := f.s, f.db, f.out
	q := func(db, table string) string { return quote(db) + "." + quote(table) }
	if err := s.exec("CREATE TABLE "+q(d, "at")+" (id INT PRIMARY KEY, n TINYINT)", "INSERT INTO "+q(d, "at")+" VALUES (1, 1)",
		"CREATE TABLE "+q(d, "aw")+" (id INT PRIMARY KEY, n TINYINT)", "INSERT INTO "+q(d, "aw")+" VALUES (1, 1)"); err != nil {
		t.Fatal(err)
	}
	f.until(ctx, t)
	bits := func(ev cdc.Event) int {
		if i := ev.Schema.ColumnIndex("n"); i >= 0 {
			return ev.Schema.Columns[i].Bits
		}
		return -1
	}
	noColumns := func(what string, evs []cdc.Event) {
		t.Helper()
		for i, ev := range evs {
			if ev.Op == cdc.Truncate && len(ev.Schema.Columns) != 0 {
				t.Errorf("%s: truncate %d of %s carries %d columns (n %d bits), want none: the description predates the ALTER",
					what, i, ev.Table.Table, len(ev.Schema.Columns), bits(ev))
			}
		}
	}

	// Widened, moved out and back before any row: entered without columns, rows with theirs.
	if err := s.exec("ALTER TABLE "+q(d, "at")+" MODIFY COLUMN n SMALLINT", "RENAME TABLE "+q(d, "at")+" TO "+q(o, "at"),
		"RENAME TABLE "+q(o, "at")+" TO "+q(d, "at"), "INSERT INTO "+q(d, "at")+" VALUES (2, 300)"); err != nil {
		t.Fatal(err)
	}
	evs := f.until(ctx, t)
	wantShape(t, "altered, moved out and back", evs, "T "+d+".at #0", "T "+d+".at #1", "I "+d+".at #1")
	checkDDLEvents(t, evs[:2])
	noColumns("altered, moved out and back", evs)
	if b := bits(evs[2]); b != 16 || fmt.Sprint(evs[2].After) != "[2 300]" {
		t.Errorf("insert after the move back: %v, n of %d bits, want [2 300] and 16", evs[2].After, b)
	}

	// Widened again, then truncated: without columns, its identity kept; once a row was read,
	// a truncate carries the columns again.
	if err := s.exec("ALTER TABLE "+q(d, "at")+" MODIFY COLUMN n INT", "TRUNCATE TABLE "+q(d, "at"),
		"INSERT INTO "+q(d, "at")+" VALUES (3, 70000)", "TRUNCATE TABLE "+q(d, "at")); err != nil {
		t.Fatal(err)
	}
	rel := evs[2].Schema.Relation
	evs = f.until(ctx, t)
	wantShape(t, "altered and truncated", evs, "T "+d+".at #0", "I "+d+".at #0", "T "+d+".at #0")
	noColumns("altered and truncated", evs[:1])
	if evs[0].Schema.Relation != rel {
		t.Errorf("truncate after the ALTER: identity %q, want %q", evs[0].Schema.Relation, rel)
	}
	if b := bits(evs[2]); b != 32 {
		t.Errorf("truncate after a row: n of %d bits, want 32", b)
	}

	// Moved out, altered there, moved back.
	if err := s.exec("RENAME TABLE "+q(d, "aw")+" TO "+q(o, "aw"), "ALTER TABLE "+q(o, "aw")+" MODIFY COLUMN n BIGINT",
		"RENAME TABLE "+q(o, "aw")+" TO "+q(d, "aw"), "INSERT INTO "+q(d, "aw")+" VALUES (2, 5000000000)"); err != nil {
		t.Fatal(err)
	}
	evs = f.until(ctx, t)
	wantShape(t, "altered out of the capture", evs, "T "+d+".aw #0", "T "+d+".aw #1", "I "+d+".aw #1")
	noColumns("altered out of the capture", evs)
	if b := bits(evs[2]); b != 64 {
		t.Errorf("insert after the move back: n of %d bits, want 64", b)
	}
	for _, tb := range []string{"at", "aw"} {
		if err := s.exec("DROP TABLE " + q(d, tb)); err != nil {
			t.Fatal(err)
		}
	}
	f.until(ctx, t)
}

// droppedBeforeRead: a relation the stream never saw enters the capture, is written and is
// dropped. Read from behind it all, its rows have no description left -- the catalog has no
// table, the stream never read one -- and MariaDB's table map has its JSON as a LONGTEXT and
// its INET4 as a BINARY(4): they come out malformed (ErrAmbiguousType, which names the columns
// and no value), carrying their values as read for the dead letter, never decoded silently as
// text and bytes. The live stream, which may have read them while the table still existed,
// decodes them or marks them so too.
func droppedBeforeRead(ctx context.Context, t *testing.T, f *schemaFixture) {
	s := f.s
	q := func(db, table string) string { return quote(db) + "." + quote(table) }
	src, amb := q(f.out, "amb"), q(f.db, "amb")
	if err := s.exec("CREATE TABLE " + src + " (id INT PRIMARY KEY, j JSON, ip INET4, v VARCHAR(10))"); err != nil {
		t.Fatal(err)
	}
	f.until(ctx, t)
	cp := f.markCP
	if err := s.exec("RENAME TABLE "+src+" TO "+amb,
		"INSERT INTO "+amb+` VALUES (1, '{"a": [1, 2]}', '10.1.2.3', 'x'), (2, NULL, NULL, 'y')`,
		"UPDATE "+amb+" SET v = 'z' WHERE id = 1",
		"DROP TABLE "+amb); err != nil {
		t.Fatal(err)
	}
	ambiguous := func(ev cdc.Event) bool {
		return ev.Table.Table == "amb" && errors.Is(ev.Malformed, mysqlcdc.ErrAmbiguousType)
	}
	f.untilAllowing(ctx, t, ambiguous)
	st2, err := f.source(t).Open(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	var rows []string
	for len(rows) < 3 {
		ev := cdctest.NextAnyEvent(ctx, t, st2)
		if ev.Table.Table != "amb" || ev.Op == cdc.Truncate {
			if ev.Malformed != nil {
				t.Fatalf("%v of %v malformed: %v", ev.Op, ev.Table, ev.Malformed)
			}
			continue
		}
		if !ambiguous(ev) {
			t.Fatalf("%v of amb read from behind its drop: malformed %v, want ErrAmbiguousType", ev.Op, ev.Malformed)
		}
		msg := ev.Malformed.Error()
		if !strings.Contains(msg, `"j"`) || !strings.Contains(msg, `"ip"`) || strings.Contains(msg, `"v"`) || strings.Contains(msg, "10.1.2.3") {
			t.Errorf("the reason names the wrong columns, or a value: %s", msg)
		}
		if ev.Schema == nil || len(ev.After) != 4 {
			t.Fatalf("%v of amb without its values for the dead letter: schema %v, after %v", ev.Op, ev.Schema, ev.After)
		}
		rows = append(rows, fmt.Sprintf("%v %v %v", ev.Op, ev.After[0], ev.After[3]))
	}
	if want := []string{"insert 1 x", "insert 2 y", "update 1 z"}; !slices.Equal(rows, want) {
		t.Errorf("rows of amb: %v, want %v", rows, want)
	}
}
