package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// p39Source is a source whose name, slot and publication carry the p39_ prefix; cleanup drops
// slot and publication, then runs the drop statements.
func p39Source(t *testing.T, dsn string, opts pgcdc.Options, drops ...string) *pgcdc.Source {
	t.Helper()
	sfx := suffix(t)
	if opts.Name == "" {
		opts.Name, opts.Slot, opts.Publication = "p39_"+sfx, "p39_"+sfx, "p39_"+sfx
	}
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

// miniMirror plays sink and mirror for one table: an index bound to one relation identity; a
// change of another identity under the table's name resets the index and asks the source for
// a re-snapshot of the table, as the sink's ENTERED(replaced) and mirror's hook do.
type miniMirror struct {
	t       *testing.T
	ctx     context.Context
	src     *pgcdc.Source
	st      cdc.Stream
	table   string // schema.table of the mirrored table
	mark    string // the table whose inserts are markers
	idx     *cdctest.VersionedIndex
	bound   string   // the identity the index is bound to
	idents  []string // every identity bound, in order
	resnaps []string // re-snapshot requests made
	// resnapDone: the requests seen done.
	resnapDone map[string]bool
	acked      cdc.Checkpoint
	marks      []int64
}

func (m *miniMirror) apply(ev cdc.Event) {
	m.t.Helper()
	name := ev.Table.Schema + "." + ev.Table.Table
	switch {
	case name == strings.ReplaceAll(m.mark, `"`, ""):
		if ev.Op == cdc.Insert {
			m.marks = append(m.marks, ev.After[0].(int64))
		}
	case name == m.table:
		if ev.Schema.Relation != m.bound {
			m.bound = ev.Schema.Relation
			m.idents = append(m.idents, m.bound)
			if len(m.idents) > 1 {
				m.idx = cdctest.NewVersionedIndex(0, 1, 2)
				id, err := m.src.Resnapshot(m.ctx, cdc.ResnapshotRequest{Tables: []string{m.table}})
				if err != nil {
					m.t.Fatalf("re-snapshot of %s: %v", m.table, err)
				}
				m.resnaps = append(m.resnaps, id)
			}
		}
		m.idx.Apply(m.t, ev)
	}
	if ev.Checkpoint != nil {
		if err := m.st.Ack(m.ctx, ev.Checkpoint); err != nil {
			m.t.Fatal(err)
		}
		m.acked = ev.Checkpoint
	}
}

// until consumes events until done says so.
func (m *miniMirror) until(what string, done func() bool) {
	m.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case ev, ok := <-m.st.Events():
			if !ok {
				m.t.Fatalf("%s: stream ended: %v", what, m.st.Err())
			}
			m.apply(ev)
		case <-tick.C:
		case <-m.ctx.Done():
			m.t.Fatalf("%s: timed out; progress %+v", what, m.st.Progress())
		}
	}
}

// marker inserts marker n and consumes events until it arrives.
func (m *miniMirror) marker(dsn string, n int64) {
	m.t.Helper()
	if err := execSQL(m.ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (%d)", m.mark, n)); err != nil {
		m.t.Fatal(err)
	}
	m.until(fmt.Sprintf("marker %d", n), func() bool { return slices.Contains(m.marks, n) })
}

// settle consumes for a while (events of a re-snapshot, idle notes) and until every
// re-snapshot requested is done.
func (m *miniMirror) settle(d time.Duration) {
	m.t.Helper()
	end := time.Now().Add(d)
	m.until("settle", func() bool {
		if p := m.st.Progress(); p.Resnapshot != "" && !p.Active {
			if p.Error != "" {
				m.t.Fatalf("re-snapshot %s: %s", p.Resnapshot, p.Error)
			}
			m.resnapDone[p.Resnapshot] = true
		}
		if time.Now().Before(end) {
			return false
		}
		for _, id := range m.resnaps {
			if !m.resnapDone[id] {
				return false
			}
		}
		return true
	})
}

func (m *miniMirror) reopen(src *pgcdc.Source) {
	m.t.Helper()
	_ = m.st.Close()
	m.src = src
	st, err := src.Open(m.ctx, m.acked)
	if err != nil {
		m.t.Fatalf("reopen: %v", err)
	}
	m.st = st
}

// tableRows reads a table (id, n, pad) whole.
func tableRows(ctx context.Context, t *testing.T, dsn, table string) map[int64]cdctest.IndexDoc {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT id, n, pad FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]cdctest.IndexDoc{}
	for rows.Next() {
		var id int32
		var d cdctest.IndexDoc
		if err := rows.Scan(&id, &d.N, &d.Pad); err != nil {
			t.Fatal(err)
		}
		want[int64(id)] = d
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestOutAndBackAcrossRestarts: a table of a pattern's schema, under a publication FOR ALL
// TABLES (which sends every table, so the departure reaches the stream), moved to a schema the
// source does not capture, changed there, and moved back under its own name: it comes back
// with a new identity (<oid>.1), so that its index is reset and re-read, and the index ends
// equal to the table row by row. The stream restarts twice while the table is away: once
// before any checkpoint carries the departure (idle checkpoints on: they must not move the
// slot past it, or the restart would never see it), once after one does. A new Source opened
// from the last checkpoint keeps the new identity.
func TestOutAndBackAcrossRestarts(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sfx := suffix(t)
	capS, awayS := "p39_oab_"+sfx, "p39_oaa_"+sfx
	qc, qa := quote(capS), quote(awayS)
	drops := []string{"DROP SCHEMA IF EXISTS " + qc + " CASCADE", "DROP SCHEMA IF EXISTS " + qa + " CASCADE"}
	dropAtEnd(t, dsn, drops...)
	if err := execSQL(ctx, dsn, false, "CREATE SCHEMA "+qc, "CREATE SCHEMA "+qa,
		"CREATE TABLE "+qc+".t (id int PRIMARY KEY, n int NOT NULL, pad text NOT NULL)",
		"CREATE TABLE "+qc+".mk (id int PRIMARY KEY)",
		"CREATE TABLE "+qa+".other (id serial PRIMARY KEY, pad text)",
		"INSERT INTO "+qc+".t SELECT i, i, 'p' || i FROM generate_series(1, 40) i"); err != nil {
		t.Fatal(err)
	}
	opts := pgcdc.Options{Snapshot: cdc.SnapshotInitial, Tables: []pgcdc.Table{{Schema: capS, Name: pgcdc.AllTables}},
		IdleCheckpointInterval: 200 * time.Millisecond, ResnapshotWait: time.Minute}
	logs := &syncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	src := p39Source(t, dsn, opts, drops...)
	if err := execSQL(ctx, dsn, false, "CREATE PUBLICATION "+quote(src.Publication())+" FOR ALL TABLES"); err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &miniMirror{t: t, ctx: ctx, src: src, st: st, table: capS + ".t", mark: qc + ".mk", idx: cdctest.NewVersionedIndex(0, 1, 2), resnapDone: map[string]bool{}}
	defer func() { _ = m.st.Close() }()
	m.marker(dsn, 1)
	oid := relOID(ctx, t, dsn, capS, "t")
	if m.bound != oid || len(m.idx.Docs) != 40 {
		t.Fatalf("after the snapshot: bound to %q with %d rows, want %s with 40", m.bound, len(m.idx.Docs), oid)
	}
	run := func(stmts ...string) {
		t.Helper()
		if err := execSQL(ctx, dsn, false, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	run("UPDATE "+qc+".t SET n = n + 1 WHERE id <= 5", "DELETE FROM "+qc+".t WHERE id = 40")
	m.marker(dsn, 2)

	// Away, with changes the server sends under the name not captured; then enough WAL of an
	// uncaptured table for idle notes, and until they are seen to happen: the slot must stay
	// before the departure, which no checkpoint carries yet. A control stream of the marker
	// table alone (a publication of its own, so no relation message of the moved table) must
	// see its slot moved past that WAL by an idle note, while the stream's walsender has sent
	// all of it: idle notes were due on both, so the slot staying is not vacuous.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	walLSN := func() pglogrepl.LSN {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		lsn, err := pglogrepl.ParseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	ctlSfx := "c" + suffix(t)
	ctl := p39Source(t, dsn, pgcdc.Options{Name: "p39_" + ctlSfx, Slot: "p39_" + ctlSfx, Publication: "p39_" + ctlSfx,
		Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Schema: capS, Name: "mk"}},
		IdleCheckpointInterval: 200 * time.Millisecond, StatusInterval: 200 * time.Millisecond})
	ctlSt, err := ctl.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctlSt.Close() }()
	departure := walLSN()
	run("ALTER TABLE "+qc+".t SET SCHEMA "+qa, "UPDATE "+qa+".t SET n = n + 100 WHERE id <= 10",
		"DELETE FROM "+qa+".t WHERE id > 35", "INSERT INTO "+qa+".t VALUES (100, 100, 'x')",
		"INSERT INTO "+qa+".other (pad) SELECT repeat('w', 200) FROM generate_series(1, 2000)")
	end := walLSN()
	mainSlot, ctlSlot := slotWatch{conn: conn, slot: src.Slot()}, slotWatch{conn: conn, slot: ctl.Slot()}
	m.until("idle notes past the departure", func() bool {
		if c := mainSlot.confirmed(ctx, t); c >= departure {
			t.Fatalf("slot confirmed %s, at or past the departure at %s that no checkpoint carries", c, departure)
		}
		var sent *string
		if err := conn.QueryRow(ctx, `SELECT r.sent_lsn::text FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, src.Slot()).Scan(&sent); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if sent == nil {
			return false
		}
		if lsn, err := pglogrepl.ParseLSN(*sent); err != nil || lsn < end {
			return false
		}
		return ctlSlot.confirmed(ctx, t) >= end
	})
	_ = ctlSt.Close()
	m.reopen(src)    // restart 1: the departure is decoded again
	m.marker(dsn, 3) // a checkpoint now carries the departure
	if !strings.Contains(string(m.acked), `"rels"`) {
		t.Fatalf("the checkpoint after the departure carries no relation marks: %s", m.acked)
	}
	run("UPDATE " + qa + ".t SET pad = 'moved' WHERE id BETWEEN 11 AND 20")
	m.settle(time.Second)
	m.reopen(src) // restart 2: the departure comes from the checkpoint
	run("DELETE FROM " + qa + ".t WHERE id BETWEEN 21 AND 25")
	m.settle(time.Second)

	// Back under its own name.
	run("ALTER TABLE "+qa+".t SET SCHEMA "+qc, "INSERT INTO "+qc+".t VALUES (101, 101, 'back')")
	m.marker(dsn, 4)
	if want := []string{oid, oid + ".1"}; !slices.Equal(m.idents, want) {
		t.Fatalf("identities %v, want %v", m.idents, want)
	}
	m.settle(time.Second)
	m.marker(dsn, 5)
	m.idx.Equal(t, tableRows(ctx, t, dsn, qc+".t"))
	if m.idx.Reads == 0 {
		t.Fatal("no re-snapshot row reached the index")
	}
	if !strings.Contains(logs.String(), "came back into the captured tables") {
		t.Error("no warning at the return")
	}

	// A new Source (a new process) opened from the last checkpoint keeps the identity.
	src2, err := pgcdc.New(dsn, &pgcdc.Options{Name: src.Name(), Slot: src.Slot(), Publication: src.Publication(),
		Tables: opts.Tables, StatusInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.reopen(src2)
	run("UPDATE " + qc + ".t SET n = 7 WHERE id = 1")
	m.marker(dsn, 6)
	if want := []string{oid, oid + ".1"}; !slices.Equal(m.idents, want) {
		t.Fatalf("identities after a new Source: %v, want %v", m.idents, want)
	}
	if tabs := m.st.(cdc.TableLister).Tables(); !slices.ContainsFunc(tabs, func(s *cdc.TableSchema) bool { return s.Relation == oid+".1" }) {
		t.Errorf("Tables after the return do not carry the new identity")
	}
	m.idx.Equal(t, tableRows(ctx, t, dsn, qc+".t"))
}

// TestPatternOutAndBack: with a pattern (a publication FOR TABLES IN SCHEMA), a table moved out
// of the schema is no longer sent at all, so its return under its own name shows nothing in
// the stream but a repeated relation message; its rewritten catalog entry gives it a new
// identity, and the index, reset and re-read, ends equal to the table.
func TestPatternOutAndBack(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sfx := suffix(t)
	capS, outS := "p39_pc_"+sfx, "p39_po_"+sfx
	qc, qo := quote(capS), quote(outS)
	drops := []string{"DROP SCHEMA IF EXISTS " + qc + " CASCADE", "DROP SCHEMA IF EXISTS " + qo + " CASCADE"}
	dropAtEnd(t, dsn, drops...)
	if err := execSQL(ctx, dsn, false, "CREATE SCHEMA "+qc, "CREATE SCHEMA "+qo,
		"CREATE TABLE "+qc+".t (id int PRIMARY KEY, n int NOT NULL, pad text NOT NULL)",
		"CREATE TABLE "+qc+".mk (id int PRIMARY KEY)",
		"INSERT INTO "+qc+".t SELECT i, i, 'p' || i FROM generate_series(1, 30) i"); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	src := p39Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotInitial, Tables: []pgcdc.Table{{Schema: capS, Name: pgcdc.AllTables}},
		ResnapshotWait: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))}, drops...)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &miniMirror{t: t, ctx: ctx, src: src, st: st, table: capS + ".t", mark: qc + ".mk", idx: cdctest.NewVersionedIndex(0, 1, 2), resnapDone: map[string]bool{}}
	defer func() { _ = m.st.Close() }()
	run := func(stmts ...string) {
		t.Helper()
		if err := execSQL(ctx, dsn, false, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	run("UPDATE " + qc + ".t SET n = 0 WHERE id = 1")
	m.marker(dsn, 1)
	oid := relOID(ctx, t, dsn, capS, "t")
	run("ALTER TABLE "+qc+".t SET SCHEMA "+qo, "UPDATE "+qo+".t SET n = n + 100 WHERE id <= 10",
		"DELETE FROM "+qo+".t WHERE id > 25", "ALTER TABLE "+qo+".t SET SCHEMA "+qc, "INSERT INTO "+qc+".t VALUES (50, 50, 'back')")
	m.marker(dsn, 2)
	if want := []string{oid, oid + ".1"}; !slices.Equal(m.idents, want) {
		t.Fatalf("identities %v, want %v", m.idents, want)
	}
	m.settle(time.Second)
	m.marker(dsn, 3)
	m.idx.Equal(t, tableRows(ctx, t, dsn, qc+".t"))
	if !strings.Contains(logs.String(), "may have been moved out of it and back") {
		t.Error("no warning at the return")
	}
}

// TestDroppedFullTableKey: the changes of a REPLICA IDENTITY FULL table the catalog no longer
// has under their name when the stream reads them. A table the Source knew (listed at Open,
// then renamed and dropped while the stream was closed) keeps its primary key; so does one
// renamed since (the catalog has it under its new name); one it never saw (created, written
// and dropped while the stream was closed) has no known key: its row changes are
// dead-lettered with ErrKeyUnknown, whose text holds no row data.
func TestDroppedFullTableKey(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sch := "p39_full_" + suffix(t)
	qs := quote(sch)
	drop := "DROP SCHEMA IF EXISTS " + qs + " CASCADE"
	dropAtEnd(t, dsn, drop)
	if err := execSQL(ctx, dsn, false, "CREATE SCHEMA "+qs,
		"CREATE TABLE "+qs+".k (n text, id int PRIMARY KEY)", "ALTER TABLE "+qs+".k REPLICA IDENTITY FULL",
		"CREATE TABLE "+qs+".mk (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := p39Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Schema: sch, Name: pgcdc.AllTables}}}, drop)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if err := execSQL(ctx, dsn, false, "INSERT INTO "+qs+".mk VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	ev := cdctest.NextEvent(ctx, t, st)
	if err := st.Ack(ctx, ev.Checkpoint); err != nil {
		t.Fatal(err)
	}
	cp := ev.Checkpoint
	_ = st.Close()
	const secret = "row-data-must-not-leak"
	if err := execSQL(ctx, dsn, false,
		"ALTER TABLE "+qs+".k RENAME TO k2", "INSERT INTO "+qs+".k2 VALUES ('"+secret+"', 7)", "DROP TABLE "+qs+".k2",
		"CREATE TABLE "+qs+".f (n text, id int PRIMARY KEY)", "ALTER TABLE "+qs+".f REPLICA IDENTITY FULL",
		"INSERT INTO "+qs+".f VALUES ('"+secret+"', 8)", "UPDATE "+qs+".f SET n = 'x'", "DELETE FROM "+qs+".f",
		"DROP TABLE "+qs+".f",
		"CREATE TABLE "+qs+".g (n text, id int PRIMARY KEY)", "ALTER TABLE "+qs+".g REPLICA IDENTITY FULL",
		"INSERT INTO "+qs+".g VALUES ('"+secret+"', 9)", "ALTER TABLE "+qs+".g RENAME TO g2",
		"INSERT INTO "+qs+".mk VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if st, err = src.Open(ctx, cp); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		var ev cdc.Event
		select {
		case ev = <-st.Events():
		case <-ctx.Done():
			t.Fatal("timed out")
		}
		if ev.Table.Table == "mk" {
			break
		}
		switch ev.Table.Table {
		case "k2":
			if ev.Malformed != nil || !slices.Equal(ev.Schema.PrimaryKey, []int{1}) {
				t.Errorf("k2 %v: key %v, malformed %v; want the key [1] known from Open", ev.Op, ev.Schema.PrimaryKey, ev.Malformed)
			}
		case "g":
			if ev.Malformed != nil || !slices.Equal(ev.Schema.PrimaryKey, []int{1}) {
				t.Errorf("g %v: key %v, malformed %v; want the key [1] of the catalog's g2", ev.Op, ev.Schema.PrimaryKey, ev.Malformed)
			}
		case "f":
			if !errors.Is(ev.Malformed, pgcdc.ErrKeyUnknown) {
				t.Errorf("f %v: malformed %v, want ErrKeyUnknown (key %v)", ev.Op, ev.Malformed, ev.Schema.PrimaryKey)
			} else if strings.Contains(ev.Malformed.Error(), secret) || strings.Contains(ev.Malformed.Error(), "8") {
				t.Errorf("the reason holds row data: %v", ev.Malformed)
			}
		default:
			t.Errorf("unexpected %v of %s", ev.Op, ev.Table)
		}
		got = append(got, ev.Table.Table+":"+ev.Op.String())
	}
	if want := []string{"k2:insert", "f:insert", "f:update", "f:delete", "g:insert"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
