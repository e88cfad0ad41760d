package mirror_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
)

// The schema events under load (issue 32; doc.go, "Schema events"): a mirror captures one
// PostgreSQL schema (MariaDB database) whole, writers change rows without pause, and while they
// run a captured table is renamed to another captured name, moved to another schema
// (database), dropped and created again, truncated, and a table is moved in from outside the
// capture. After each, the writers stop and every index must be what the rule says, row by
// row: the table that bears its name now, the last documents of a table that left the
// capture, or nothing when its relation moved to another captured name; a table a relation
// entered is re-snapshotted (the ENTERED report and the request in the log, the rows in the
// index).

// mysqlMovedBackOpen: an open finding of issue 32 (internal/difftest openFindings, movedBack):
// cdc/mysqlcdc gives a relation moved back into the capture a new identity (the DDL's), so the
// index of the name it had before keeps its documents instead of being vacated. Set to false
// once fixed.
const mysqlMovedBackOpen = false

// schemaMaxID bounds the ids the writers touch (and the comparison reads).
const schemaMaxID = 400

func TestSchemaEventsUnderLoadPostgres(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		hex := estest.RandomHex(t, 4)
		s := &pgSchemas{dsn: dsn, ns: [2]string{"g32e_" + hex, "g32o_" + hex}}
		dropSlotAtCleanup(t, dsn, s.ns[0])
		runSchemaEvents(t, eng, node, s, hex, fmt.Sprintf("source:\n  type: postgres\n  dsn: \"${%s}\"\n  tables: [%s.*]\n  slot: %s\n  publication: %s\n",
			testenv.PostgresDSN, s.ns[0], s.ns[0], s.ns[0]))
	})
}

func TestSchemaEventsUnderLoadMySQL(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		hex := estest.RandomHex(t, 4)
		d, err := testenv.ParseMySQLDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		s := &mySchemas{dsn: dsn, d: d, ns: [2]string{"g32e_" + hex, "g32o_" + hex}}
		runSchemaEvents(t, eng, node, s, hex, fmt.Sprintf("source:\n  type: mysql\n  dsn: \"${%s}\"\n  tables: [%s.*]\n  flavor: mariadb\n  server_id: %d\n",
			testenv.MySQLDSN, s.ns[0], mirrortest.ServerID(t)))
	})
}

// schemas is a source server's side of the test: namespace 0 captured, 1 not.
type schemas interface {
	names() [2]string
	exec(t *testing.T, stmts ...string)
	// create creates ns.name with rows 1..n (mirrortest's table).
	create(t *testing.T, ns, name string, n int) mirrortest.Table
	table(ns, name string) mirrortest.Table
	move(fromNS, from, toNS, to string) []string
	// writer opens a connection that writes one random change to a table per call.
	writer(t *testing.T) func(ctx context.Context, table string, r *rand.Rand) error
}

// writers change rows of their tables without pause until stopped.
type writers struct {
	t      *testing.T
	s      schemas
	mu     sync.Mutex
	target map[string]*atomic.Pointer[string] // writer name -> the table it writes to now
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
}

// start starts one writer per target table (qualified names).
func (w *writers) start(targets map[string]string) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.target = map[string]*atomic.Pointer[string]{}
	for name, tbl := range targets {
		p := &atomic.Pointer[string]{}
		p.Store(&tbl)
		w.target[name] = p
		write := w.s.writer(w.t)
		seed := uint64(time.Now().UnixNano())
		w.wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(len(name))))
			for ctx.Err() == nil {
				// Errors are expected while a table is renamed, dropped or re-created: the
				// writer writes to the name it was given and tries again.
				if err := write(ctx, *p.Load(), r); err == nil {
					w.ok.Add(1)
					time.Sleep(time.Millisecond) // load, not all of a shared machine
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

// retarget points writer name at another table.
func (w *writers) retarget(name, tbl string) { w.target[name].Store(&tbl) }

// stop stops every writer and waits for them.
func (w *writers) stop() {
	if w.cancel != nil {
		w.cancel()
		w.wg.Wait()
		w.cancel = nil
	}
}

// logRecords keeps the mirror's log lines (message and attributes as text).
type logRecords struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// has reports whether a line starts with msg and contains every one of parts.
func (l *logRecords) has(msg string, parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if !strings.HasPrefix(line, msg) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line+" ", p)
		}
		if all {
			return true
		}
	}
	return false
}

func runSchemaEvents(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node, s schemas, hex, source string) {
	ns := s.names()
	for _, n := range ns {
		s.exec(t, createNS(s, n))
	}
	t.Cleanup(func() {
		for _, n := range ns {
			s.exec(t, dropNS(s, n))
		}
	})
	prefix := "g32e-" + hex
	node.DeleteAtCleanup(t, prefix+"-*")
	index := func(name string) string { return prefix + "-" + name }
	cfg := writeConfig(t, t.TempDir(), "g32e", source, eng, prefix+"-{table}")

	s.create(t, ns[0], "a", 200)
	s.create(t, ns[0], "b", 200)
	logs := &logRecords{}
	run := startWith(t, cfg, &mirror.Options{Logger: slog.New(logs)})
	w := &writers{t: t, s: s}
	t.Cleanup(w.stop)

	// converge stops the writers and waits until every index is what want says: a table
	// (row by row), frozen rows, or nothing (nil).
	converge := func(what string, want map[string]func() map[int64]mirrortest.Row) {
		t.Helper()
		w.stop()
		run.wait(what, func() string {
			for name, rows := range want {
				docs, err := node.Docs(t, index(name), schemaMaxID)
				if err != nil {
					return name + ": " + err.Error()
				}
				var expected map[int64]mirrortest.Row
				if rows != nil {
					expected = rows()
				}
				if d := mirrortest.Diff(expected, docs); d != "" {
					return name + ": " + d
				}
			}
			return ""
		})
	}
	rowsOf := func(tb mirrortest.Table) func() map[int64]mirrortest.Row {
		return func() map[int64]mirrortest.Row { return tb.Rows(t) }
	}
	frozen := func(rows map[int64]mirrortest.Row) func() map[int64]mirrortest.Row {
		return func() map[int64]mirrortest.Row { return rows }
	}
	// entered waits for the ENTERED report of name's index and the re-snapshot request that
	// followed it (any cause: PostgreSQL's identity follows a relation through renames --
	// "renamed" --, MariaDB's is the DDL's -- "replaced").
	entered := func(name string) {
		t.Helper()
		tbl := ns[0] + "." + name + " "
		run.wait("the ENTERED report and re-snapshot request of "+name, func() string {
			if !logs.has("a relation entered the table's index", " index="+index(name)+" ") {
				return "no ENTERED report for " + name
			}
			if !logs.has("re-snapshot requested for a table a relation entered", tbl) {
				return "no re-snapshot request for " + name
			}
			return ""
		})
	}
	pause := func() { time.Sleep(1500 * time.Millisecond) } // the writers write meanwhile

	w.start(map[string]string{"a": s.table(ns[0], "a").Name(), "b": s.table(ns[0], "b").Name()})
	pause()
	converge("the snapshot under load", map[string]func() map[int64]mirrortest.Row{
		"a": rowsOf(s.table(ns[0], "a")), "b": rowsOf(s.table(ns[0], "b"))})

	// RENAME to a captured name, the table's writer running: a's index is vacated, c's
	// re-snapshotted.
	w.start(map[string]string{"a": s.table(ns[0], "a").Name(), "b": s.table(ns[0], "b").Name()})
	pause()
	s.exec(t, s.move(ns[0], "a", ns[0], "c")...)
	w.retarget("a", s.table(ns[0], "c").Name())
	pause()
	converge("a rename to a captured name", map[string]func() map[int64]mirrortest.Row{
		"a": nil, "b": rowsOf(s.table(ns[0], "b")), "c": rowsOf(s.table(ns[0], "c"))})
	entered("c")

	// A move to another schema (database) -- an uncaptured name: c's index keeps the
	// documents it had. The moved table's writer pauses around the move (so that its rows at
	// the move are known), then goes on writing to it outside the capture.
	w.start(map[string]string{"b": s.table(ns[0], "b").Name()})
	pause()
	atMove := s.table(ns[0], "c").Rows(t)
	s.exec(t, s.move(ns[0], "c", ns[1], "c")...)
	w.stop()
	w.start(map[string]string{"b": s.table(ns[0], "b").Name(), "c": s.table(ns[1], "c").Name()})
	pause()
	converge("a move out of the capture", map[string]func() map[int64]mirrortest.Row{
		"a": nil, "b": rowsOf(s.table(ns[0], "b")), "c": frozen(atMove)})

	// DROP and CREATE of the same name, its writer writing to the name throughout.
	w.start(map[string]string{"b": s.table(ns[0], "b").Name(), "c": s.table(ns[1], "c").Name()})
	pause()
	s.exec(t, "DROP TABLE "+s.table(ns[0], "b").Name())
	s.create(t, ns[0], "b", 50)
	pause()
	converge("DROP and CREATE of one name", map[string]func() map[int64]mirrortest.Row{
		"a": nil, "b": rowsOf(s.table(ns[0], "b")), "c": frozen(atMove)})
	if _, ok := s.(*pgSchemas); ok {
		// PostgreSQL's stream says nothing of the DROP and CREATE: the new relation's first
		// change shows another identity, and the rows written before it come from the
		// re-snapshot. MariaDB's CREATE is in the stream (a Truncate with the new identity,
		// cdc/mysqlcdc doc.go, Schema events): every row of the new table follows it in the
		// stream, and no re-snapshot is needed.
		entered("b")
	}

	// TRUNCATE under load.
	w.start(map[string]string{"b": s.table(ns[0], "b").Name(), "c": s.table(ns[1], "c").Name()})
	pause()
	s.exec(t, "TRUNCATE TABLE "+s.table(ns[0], "b").Name())
	pause()
	converge("TRUNCATE", map[string]func() map[int64]mirrortest.Row{
		"a": nil, "b": rowsOf(s.table(ns[0], "b")), "c": frozen(atMove)})

	// The table moved out comes back under another captured name, with the changes made
	// outside: d is re-snapshotted, and its rows move with it -- c's index is vacated.
	w.start(map[string]string{"b": s.table(ns[0], "b").Name(), "c": s.table(ns[1], "c").Name()})
	pause()
	s.exec(t, s.move(ns[1], "c", ns[0], "d")...)
	w.retarget("c", s.table(ns[0], "d").Name())
	pause()
	want := map[string]func() map[int64]mirrortest.Row{
		"a": nil, "b": rowsOf(s.table(ns[0], "b")), "c": nil, "d": rowsOf(s.table(ns[0], "d"))}
	if _, ok := s.(*mySchemas); ok && mysqlMovedBackOpen {
		t.Log("c's index is not checked: open finding, MariaDB does not vacate the index of a relation moved back in under another name")
		delete(want, "c")
	}
	converge("a move into the capture", want)
	entered("d")

	st := run.status()
	if !st.Health.Healthy || len(st.Incomplete) != 0 || st.Progress.DeadLetters != 0 {
		t.Errorf("status at the end: health %+v, incomplete %+v, %d dead letters", st.Health, st.Incomplete, st.Progress.DeadLetters)
	}
	if w.ok.Load() == 0 {
		t.Error("the writers wrote nothing")
	}
	t.Logf("%d writes by the writers", w.ok.Load())
}

func createNS(s schemas, ns string) string {
	if _, ok := s.(*pgSchemas); ok {
		return "CREATE SCHEMA " + ns
	}
	return "CREATE DATABASE " + ns
}

func dropNS(s schemas, ns string) string {
	if _, ok := s.(*pgSchemas); ok {
		return "DROP SCHEMA IF EXISTS " + ns + " CASCADE"
	}
	return "DROP DATABASE IF EXISTS " + ns
}

// pgSchemas is the PostgreSQL side: schemas.
type pgSchemas struct {
	dsn string
	ns  [2]string
}

func (p *pgSchemas) names() [2]string { return p.ns }
func (p *pgSchemas) exec(t *testing.T, stmts ...string) {
	t.Helper()
	(&mirrortest.Postgres{DSN: p.dsn}).Exec(t, stmts...)
}
func (p *pgSchemas) create(t *testing.T, ns, name string, n int) mirrortest.Table {
	tb := mirrortest.NewPostgres(t, p.dsn, ns+"."+name)
	// A writer may be writing to the name already.
	tb.Exec(t, tb.Insert(1, n)[0]+" ON CONFLICT (id) DO NOTHING")
	return tb
}
func (p *pgSchemas) table(ns, name string) mirrortest.Table {
	return &mirrortest.Postgres{DSN: p.dsn, Table: ns + "." + name}
}
func (p *pgSchemas) move(fromNS, from, toNS, to string) []string {
	if fromNS == toNS {
		return []string{"ALTER TABLE " + fromNS + "." + from + " RENAME TO " + to}
	}
	stmts := []string{"ALTER TABLE " + fromNS + "." + from + " SET SCHEMA " + toNS}
	if to != from {
		stmts = append(stmts, "ALTER TABLE "+toNS+"."+from+" RENAME TO "+to)
	}
	return stmts
}
func (p *pgSchemas) writer(t *testing.T) func(ctx context.Context, table string, r *rand.Rand) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return func(ctx context.Context, table string, r *rand.Rand) error {
		id := 1 + r.IntN(schemaMaxID)
		var q string
		switch r.IntN(4) {
		case 0:
			q = fmt.Sprintf("INSERT INTO %s (id, name, qty, price) VALUES (%d, 'w %d', %d, %d.5) ON CONFLICT (id) DO NOTHING", table, id, id, id, id)
		case 1:
			q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, id)
		default:
			q = fmt.Sprintf("UPDATE %s SET qty = qty + 1, price = price + 1 WHERE id = %d", table, id)
		}
		_, err := conn.Exec(ctx, q)
		return err
	}
}

// mySchemas is the MariaDB side: databases.
type mySchemas struct {
	dsn string
	d   testenv.MySQL
	ns  [2]string
}

func (m *mySchemas) names() [2]string { return m.ns }
func (m *mySchemas) exec(t *testing.T, stmts ...string) {
	t.Helper()
	// DDL commits on its own in MariaDB: one statement at a time.
	for _, s := range stmts {
		(&mirrortest.MySQL{DSN: m.d}).Exec(t, s)
	}
}
func (m *mySchemas) create(t *testing.T, ns, name string, n int) mirrortest.Table {
	tb := mirrortest.NewMySQL(t, m.dsn, ns+"."+name)
	// A writer may be writing to the name already.
	tb.Exec(t, strings.Replace(tb.Insert(1, n)[0], "INSERT INTO", "INSERT IGNORE INTO", 1))
	return tb
}
func (m *mySchemas) table(ns, name string) mirrortest.Table {
	return &mirrortest.MySQL{DSN: m.d, Table: ns + "." + name}
}
func (m *mySchemas) move(fromNS, from, toNS, to string) []string {
	return []string{"RENAME TABLE " + fromNS + "." + from + " TO " + toNS + "." + to}
}
func (m *mySchemas) writer(t *testing.T) func(ctx context.Context, table string, r *rand.Rand) error {
	c, err := client.ConnectWithContext(context.Background(), m.d.Addr, m.d.User, m.d.Password, m.d.DB, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.ReadTimeout, c.WriteTimeout = time.Minute, time.Minute
	t.Cleanup(func() { c.Close() })
	return func(_ context.Context, table string, r *rand.Rand) error {
		id := 1 + r.IntN(schemaMaxID)
		var q string
		switch r.IntN(4) {
		case 0:
			q = fmt.Sprintf("INSERT IGNORE INTO %s (id, name, qty, price, views) VALUES (%d, 'w %d', %d, %d.5, %d)", table, id, id, id, id, mirrortest.ViewsOf(id))
		case 1:
			q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, id)
		default:
			q = fmt.Sprintf("UPDATE %s SET qty = qty + 1, price = price + 1 WHERE id = %d", table, id)
		}
		_, err := c.Execute(q)
		return err
	}
}
