package mysqlcdc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/internal/faultproxy"
)

// The tests of this file show what a cdc.Runner relies on: a failed stream ends (Events
// closed, Err set) instead of reconnecting by itself, promptly also when the server hangs;
// Close and Lag never hang; failures no reopening cures are permanent.

// TestBlackholedConnectionEndsStream: a binlog connection that goes silent (a black-holed
// network, a stopped server) ends the stream after three heartbeat periods with a retryable
// error; Close returns while the network is still black-holed, and so does an Open, within
// its connect timeout.
func TestBlackholedConnectionEndsStream(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxy, err := faultproxy.NewTCP(s.addr, faultproxy.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	table := "mysu_blackhole_" + suffix()
	if err := s.exec("CREATE TABLE " + quote(table) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	viaProxy := s
	viaProxy.addr = proxy.Addr()
	opts := mysqlcdc.Options{Heartbeat: 200 * time.Millisecond, ConnectTimeout: time.Second}
	src := viaProxy.newSource(t, cdc.SnapshotNever, opts, table)
	open := func() cdc.Stream {
		t.Helper()
		st, err := src.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		// Streaming for sure: a row went through.
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (%d)", quote(table), time.Now().UnixNano()%1e9)); err != nil {
			t.Fatal(err)
		}
		cdctest.NextEvent(ctx, t, st)
		return st
	}

	st := open()
	proxy.SetBlackhole(faultproxy.Both)
	drainUntilClosed(ctx, t, st, nil)
	if err := st.Err(); err == nil || cdc.IsPermanent(err) || !strings.Contains(err.Error(), "no heartbeat") {
		t.Fatalf("the silent stream ended with %v, want a retryable error about the missing heartbeat", err)
	}
	if _, err := src.Open(ctx, nil); err == nil || cdc.IsPermanent(err) {
		t.Fatalf("Open through the black-hole: %v, want a retryable error", err)
	}
	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}

	st = open()
	proxy.SetBlackhole(faultproxy.Both)
	closed := make(chan struct{})
	go func() { _ = st.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close hangs on a black-holed connection")
	}
	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}
}

// TestLagBoundedByContext: Lag on an unresponsive server returns when its ctx ends.
func TestLagBoundedByContext(t *testing.T) {
	s := testServer(t)
	proxy, err := faultproxy.NewTCP(s.addr, faultproxy.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	src, err := mysqlcdc.New(proxy.Addr(), s.user, s.pass, []mysqlcdc.TableName{{Database: s.db, Table: "mysu_lag_unused"}}, &mysqlcdc.Options{ServerID: nextServerID()})
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetBlackhole(faultproxy.Both)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := src.Lag(ctx, nil); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lag: %v, want the context's deadline", err)
		}
	case <-time.After(time.Minute): // generous: the bound under test is the 500 ms context
		t.Fatal("Lag ignores its context")
	}
}

// TestOpenRefusesBadCredentials: a wrong password and an account without replication
// privileges are permanent failures, and no error carries the password.
func TestOpenRefusesBadCredentials(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := "mysu_creds_" + suffix()
	if err := s.exec("CREATE TABLE " + quote(table) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.exec("DROP TABLE IF EXISTS " + quote(table)) })
	tables := []mysqlcdc.TableName{{Database: s.db, Table: table}}

	const wrong = "mysu-wrong-pw-81723"
	src, err := mysqlcdc.New(s.addr, s.user, wrong, tables, &mysqlcdc.Options{ServerID: nextServerID()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Open(ctx, nil)
	if !cdc.IsPermanent(err) || strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("Open with a wrong password: %v, want a permanent refusal without the password", err)
	}
	if _, err := src.Lag(ctx, nil); !cdc.IsPermanent(err) || strings.Contains(err.Error(), wrong) {
		t.Fatalf("Lag with a wrong password: %v", err)
	}

	// An account that may read the table but not the binlog.
	user, pass := "mysu_norepl_"+suffix(), "mysu-pw-"+suffix()
	if err := s.exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, pass),
		fmt.Sprintf("GRANT SELECT ON %s.* TO '%s'@'%%'", quote(s.db), user)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	for _, mode := range []cdc.SnapshotMode{cdc.SnapshotNever, cdc.SnapshotInitial} {
		src, err := mysqlcdc.New(s.addr, user, pass, tables, &mysqlcdc.Options{ServerID: nextServerID(), Snapshot: mode})
		if err != nil {
			t.Fatal(err)
		}
		st, err := src.Open(ctx, nil)
		if err == nil { // refused only when the binlog is read
			drainUntilClosed(ctx, t, st, nil)
			err = st.Err()
			_ = st.Close()
		}
		if !cdc.IsPermanent(err) || strings.Contains(err.Error(), pass) {
			t.Fatalf("snapshot mode %v without replication privileges: %v, want a permanent refusal", mode, err)
		}
	}
}

// TestResumeFromLostBinlogIsPermanent: a checkpoint the server cannot serve -- a binlog file
// older than any it keeps (as after PURGE BINARY LOGS), or a GTID it never logged -- ends the
// stream with a permanent error that says so.
func TestResumeFromLostBinlogIsPermanent(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		table := "mysu_lost_" + suffix()
		if err := s.exec("CREATE TABLE " + quote(table) + " (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Positioning: p}, table)
		oldest, current := binlogFiles(t, s)
		dot := strings.LastIndexByte(oldest, '.')
		n, err := strconv.Atoi(oldest[dot+1:])
		if err != nil || n == 0 {
			t.Fatalf("cannot name a file before %s", oldest)
		}
		before := fmt.Sprintf("%s.%0*d", oldest[:dot], len(oldest)-dot-1, n-1)
		cp := fmt.Sprintf(`{"v":1,"file":%q,"pos":4}`, before)
		if p == mysqlcdc.PositionGTID {
			domain, server, seq := gtidParts(t, s)
			cp = fmt.Sprintf(`{"v":1,"file":%q,"pos":4,"gtid":"%d-%d-%d","use_gtid":true}`, current, domain, server, seq+1e9)
		}
		st, err := src.Open(ctx, cdc.Checkpoint(cp))
		if err == nil {
			drainUntilClosed(ctx, t, st, nil)
			err = st.Err()
			_ = st.Close()
		}
		if !cdc.IsPermanent(err) || !strings.Contains(err.Error(), "no longer has the binlog") {
			t.Fatalf("resume from %s: %v, want a permanent error about the lost binlog", cp, err)
		}
	})
}

// TestServerIDConflictIsPermanent: a second reader registering with the same server id
// displaces the first, whose stream ends with a permanent error naming the id; the second
// streams on.
func TestServerIDConflictIsPermanent(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := "mysu_sameid_" + suffix()
	if err := s.exec("CREATE TABLE " + quote(table) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	id := nextServerID()
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{ServerID: id}, table)
	insert := func(n int) {
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (%d)", quote(table), n)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	insert(1)
	cdctest.NextEvent(ctx, t, first)
	second, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	insert(2)
	cdctest.NextEvent(ctx, t, second)
	drainUntilClosed(ctx, t, first, nil)
	if err := first.Err(); !cdc.IsPermanent(err) || !strings.Contains(err.Error(), fmt.Sprint(id)) {
		t.Fatalf("the displaced stream ended with %v, want a permanent error naming server id %d", err, id)
	}
	insert(3)
	if ev := cdctest.NextEvent(ctx, t, second); ev.After[0].(int64) != 3 {
		t.Fatalf("the second stream delivered %v", ev.After)
	}
}

// TestLagMeasuresBinlogPositions: Lag places a checkpoint at the file and offset of its
// commit (GTID checkpoints too: the server maps that position back to the checkpoint's
// GTIDs), counts the bytes to the binlog's end, across a rotation too, and without a
// checkpoint counts the whole binlog. Other tests write to the server meanwhile, so only
// what holds whatever they write is asserted.
func TestLagMeasuresBinlogPositions(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		table := "mysu_lag_" + suffix()
		if err := s.exec("CREATE TABLE " + quote(table) + " (id INT PRIMARY KEY, pad MEDIUMTEXT)"); err != nil {
			t.Fatal(err)
		}
		src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Positioning: p}, table)
		st, err := src.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (1, '')", quote(table))); err != nil {
			t.Fatal(err)
		}
		cp1 := cdctest.NextEvent(ctx, t, st).Checkpoint
		var c struct {
			File string `json:"file"`
			Pos  uint32 `json:"pos"`
			GTID string `json:"gtid"`
		}
		if err := json.Unmarshal(cp1, &c); err != nil {
			t.Fatal(err)
		}
		if p == mysqlcdc.PositionGTID {
			if got := queryString(t, s, fmt.Sprintf("SELECT BINLOG_GTID_POS('%s', %d)", c.File, c.Pos)); got != c.GTID {
				t.Fatalf("the checkpoint's position %s:%d is GTID position %q on the server, the checkpoint says %q", c.File, c.Pos, got, c.GTID)
			}
		}
		index := func(file string) uint64 {
			n, err := strconv.ParseUint(file[strings.LastIndexByte(file, '.')+1:], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		lag, err := src.Lag(ctx, cp1)
		if err != nil {
			t.Fatal(err)
		}
		applied := index(c.File)<<32 | uint64(c.Pos)
		if lag.Applied != applied || lag.Head < lag.Applied || lag.Retained != -1 || lag.Bytes < 0 {
			t.Fatalf("lag %+v, want Applied %d at or below Head", lag, applied)
		}
		if lag.Head>>32 == lag.Applied>>32 && lag.Bytes != int64(lag.Head-lag.Applied) {
			t.Fatalf("lag %+v: within one file, Bytes is the distance", lag)
		}

		// A large transaction after the checkpoint, then a rotation.
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (2, REPEAT('x', 100000))", quote(table)), "FLUSH BINARY LOGS"); err != nil {
			t.Fatal(err)
		}
		lag, err = src.Lag(ctx, cp1)
		if err != nil {
			t.Fatal(err)
		}
		if lag.Head>>32 <= lag.Applied>>32 || lag.Bytes < 100000+int64(lag.Head&(1<<32-1)) {
			t.Fatalf("after the rotation: lag %+v, want the head in a later file and Bytes past the 100 kB row", lag)
		}
		ev := cdctest.NextEvent(ctx, t, st)
		if after, err := src.Lag(ctx, ev.Checkpoint); err != nil || after.Applied <= applied || after.Head < after.Applied {
			t.Fatalf("lag of the next checkpoint %+v (%v), previous Applied %d", after, err, applied)
		}

		whole, err := src.Lag(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if whole.Applied != 0 || whole.Bytes < lag.Bytes || whole.Head < lag.Head {
			t.Fatalf("without a checkpoint: %+v, want Applied 0 and Bytes at least %d", whole, lag.Bytes)
		}
	})
}

// TestDatabasePatterns: "db.*" captures every table of the database -- those of Open, which
// the snapshot reads and Tables lists in name order, and tables created later, whose schema
// is loaded on their first row -- and nothing of other databases; a database without tables
// is accepted, a missing one or one spelled in another case is refused at Open.
func TestDatabasePatterns(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix()
	db, empty := "mysu_db_"+sfx, "mysu_empty_"+sfx
	t.Cleanup(func() { _ = s.exec("DROP DATABASE IF EXISTS "+quote(db), "DROP DATABASE IF EXISTS "+quote(empty)) })
	if err := s.exec("CREATE DATABASE "+quote(db), "CREATE DATABASE "+quote(empty),
		"CREATE TABLE "+quote(db)+".b (id INT PRIMARY KEY, v TEXT)",
		"CREATE TABLE "+quote(db)+".a (id INT PRIMARY KEY)",
		"INSERT INTO "+quote(db)+".a VALUES (1)",
		"CREATE TABLE mysu_outside_"+sfx+" (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	outside := "mysu_outside_" + sfx
	var logs bytes.Buffer
	var logMu sync.Mutex
	opts := mysqlcdc.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	whole := []mysqlcdc.TableName{{Database: db, Table: mysqlcdc.AllTables}, {Database: empty, Table: mysqlcdc.AllTables}}
	src := s.newSourceAfter(t, cdc.SnapshotInitial, opts, whole, outside) // outside: dropped at cleanup, and captured by name
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var listed []string
	for _, ts := range st.(cdc.TableLister).Tables() {
		listed = append(listed, ts.ID.Database+"."+ts.ID.Table)
	}
	if want := []string{db + ".a", db + ".b", s.db + "." + outside}; fmt.Sprint(listed) != fmt.Sprint(want) {
		t.Fatalf("Tables() = %v, want %v", listed, want)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Op != cdc.Read || ev.Table.Database != db || ev.Table.Table != "a" {
		t.Fatalf("snapshot event %v of %v, want the row of %s.a", ev.Op, ev.Table, db)
	}

	if err := s.exec("CREATE TABLE "+quote(db)+".c (id INT PRIMARY KEY, name VARCHAR(10))",
		"INSERT INTO "+quote(db)+".c VALUES (7, 'seven')",
		"CREATE TABLE "+quote(empty)+".x (id INT PRIMARY KEY)",
		"INSERT INTO "+quote(empty)+".x VALUES (8)",
		"INSERT INTO "+quote(db)+".b VALUES (9, 'nine')"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		db, table string
		id        int64
		columns   int
	}{{db, "c", 7, 2}, {empty, "x", 8, 1}, {db, "b", 9, 2}} {
		ev := cdctest.NextEvent(ctx, t, st)
		if want.table != "b" {
			// A created table of a captured database starts empty with a new relation: a
			// Truncate carrying its identity comes first (see Schema events).
			if ev.Op != cdc.Truncate || ev.Table.Table != want.table || ev.Schema == nil || ev.Schema.Relation == "" {
				t.Fatalf("event %v of %v (schema %v), want the truncate of the created %s.%s", ev.Op, ev.Table, ev.Schema, want.db, want.table)
			}
			ev = cdctest.NextEvent(ctx, t, st)
		}
		if ev.Op != cdc.Insert || ev.Table.Database != want.db || ev.Table.Table != want.table || ev.Schema == nil ||
			len(ev.Schema.Columns) != want.columns || ev.After[0].(int64) != want.id {
			t.Fatalf("event %v of %v with %v, want the insert of %d into %s.%s", ev.Op, ev.Table, ev.After, want.id, want.db, want.table)
		}
	}
	logMu.Lock()
	if !strings.Contains(logs.String(), "appeared after the stream opened") || !strings.Contains(logs.String(), db+".c") {
		t.Errorf("no log line tells that %s.c is captured from now on:\n%s", db, logs.String())
	}
	logMu.Unlock()

	for _, c := range []struct{ db, fix string }{
		{"mysu_nosuchdb_" + sfx, "create it"},
		{strings.ToUpper(db), "did you mean " + quote(db) + ".*?"},
	} {
		bad, err := mysqlcdc.New(s.addr, s.user, s.pass, []mysqlcdc.TableName{{Database: c.db, Table: mysqlcdc.AllTables}}, &mysqlcdc.Options{ServerID: nextServerID()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Open(ctx, nil)
		var se *cdc.StartError
		if !errors.As(err, &se) || len(se.Problems) != 1 || !strings.Contains(se.Problems[0].Problem, "database does not exist") ||
			!strings.Contains(se.Problems[0].Fix, c.fix) {
			t.Fatalf("Open with %s.*: %v, want a *cdc.StartError with the fix %q", c.db, err, c.fix)
		}
	}
}

// TestStatementLoggedChangeIsReported: a session that logs its changes as statements (not
// refused by Open, which sees the global setting) produces a warning, once: its rows cannot
// be captured.
func TestStatementLoggedChangeIsReported(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := "mysu_stmt_" + suffix()
	if err := s.exec("CREATE TABLE " + quote(table) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))}, table)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ins := func(n int) string { return fmt.Sprintf("INSERT INTO %s VALUES (%d)", quote(table), n) }
	if err := s.exec("SET SESSION binlog_format = 'STATEMENT'", ins(1), ins(2), "SET SESSION binlog_format = 'ROW'", ins(3)); err != nil {
		t.Fatal(err)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.After[0].(int64) != 3 {
		t.Fatalf("first event %v, want the row logged as a row", ev.After)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logs.String(), "logged as a statement"); n != 1 {
		t.Fatalf("%d warnings about statement-logged changes, want 1:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// binlogFiles returns the server's oldest and current binlog files.
func binlogFiles(t *testing.T, s server) (oldest, current string) {
	t.Helper()
	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Execute("SHOW BINARY LOGS")
	if err != nil || r.RowNumber() == 0 {
		t.Fatalf("SHOW BINARY LOGS: %v", err)
	}
	oldest, _ = r.GetString(0, 0)
	current, _ = r.GetString(r.RowNumber()-1, 0)
	return oldest, current
}

// gtidParts splits the server's gtid_binlog_pos (one domain) into its numbers.
func gtidParts(t *testing.T, s server) (domain, server, seq uint64) {
	t.Helper()
	pos := queryString(t, s, "SELECT @@GLOBAL.gtid_binlog_pos")
	if _, err := fmt.Sscanf(pos, "%d-%d-%d", &domain, &server, &seq); err != nil || strings.Contains(pos, ",") {
		t.Fatalf("gtid_binlog_pos %q: want one domain", pos)
	}
	return domain, server, seq
}

func queryString(t *testing.T, s server, q string) string {
	t.Helper()
	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	v, _ := r.GetString(0, 0)
	return v
}

// TestLagIdleStreamCaughtUp: an open stream whose delivered changes are all acknowledged has
// passed the transactions of other tables the binlog holds after them, although no checkpoint
// moves: Applied reaches a position taken after such a write. An unacknowledged change holds
// Applied at its checkpoint until it is acknowledged, then the writes passed meanwhile count;
// so does a rotation. Without that, a quiet pipeline on a server with other traffic would
// look ever further behind.
func TestLagIdleStreamCaughtUp(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		table, noise := "mysu_lagidle_"+suffix(), "mysu_lagnoise_"+suffix()
		if err := s.exec("CREATE TABLE "+quote(table)+" (id INT PRIMARY KEY)", "CREATE TABLE "+quote(noise)+" (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.exec("DROP TABLE IF EXISTS "+quote(table), "DROP TABLE IF EXISTS "+quote(noise)) })
		src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Positioning: p}, table)
		st, err := src.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (1)", quote(table))); err != nil {
			t.Fatal(err)
		}
		cp := cdctest.NextEvent(ctx, t, st).Checkpoint
		if err := st.Ack(ctx, cp); err != nil {
			t.Fatal(err)
		}
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (1)", quote(noise))); err != nil {
			t.Fatal(err)
		}
		l0, err := src.Lag(ctx, cp)
		if err != nil {
			t.Fatal(err)
		}
		if l := waitApplied(ctx, t, src, cp, l0.Head, "the other table's write"); l.Bytes > int64(l.Head-l0.Head)+int64(l0.Head&(1<<32-1)) && l.Head>>32 == l0.Head>>32 {
			t.Fatalf("Bytes %d beyond what followed the noise: %+v (head then %d)", l.Bytes, l, l0.Head)
		}
		// Delivered and not acknowledged: later writes of other tables prove nothing.
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (2)", quote(table))); err != nil {
			t.Fatal(err)
		}
		cp2 := cdctest.NextEvent(ctx, t, st).Checkpoint
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (2)", quote(noise))); err != nil {
			t.Fatal(err)
		}
		l1, err := src.Lag(ctx, cp2)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the reader passes the noise meanwhile; it must not count
		if l, err := src.Lag(ctx, cp2); err != nil || l.Applied >= l1.Head {
			t.Fatalf("Lag %+v, %v: Applied passed a write behind an unacknowledged change (head then %d)", l, err, l1.Head)
		}
		// Acknowledged later, with nothing else happening (issue 31): the noise the reader
		// passed meanwhile is passed by the pipeline too.
		if err := st.Ack(ctx, cp2); err != nil {
			t.Fatal(err)
		}
		waitApplied(ctx, t, src, cp2, l1.Head, "the other table's write once the change before it was acknowledged")
		// A rotation while idle (FLUSH LOGS, a restart) adds a new file's header events and no
		// transaction: the pipeline has passed them too.
		if err := s.exec("FLUSH BINARY LOGS"); err != nil {
			t.Fatal(err)
		}
		l2, err := src.Lag(ctx, cp2)
		if err != nil {
			t.Fatal(err)
		}
		waitApplied(ctx, t, src, cp2, l2.Head, "a rotation")
	})
}

// waitApplied polls src's lag at cp until Applied reaches head (what passed it, for the
// failure) and returns that lag; ctx bounds the wait.
func waitApplied(ctx context.Context, t *testing.T, src *mysqlcdc.Source, cp cdc.Checkpoint, head uint64, what string) cdc.SourceLag {
	t.Helper()
	for {
		l, err := src.Lag(ctx, cp)
		if err != nil {
			t.Fatal(err)
		}
		if l.Applied >= head {
			return l
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Applied never passed %s: %+v, head after it %d", what, l, head)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestLagAfterSnapshotCaughtUp (issue 31): a pipeline whose snapshot found nothing has no
// checkpoint, yet an open stream has passed where it started and the other tables' writes
// since: Applied reaches them. One whose snapshot delivered a row has passed nothing until
// that row's checkpoint is acknowledged, then the same. Without that, a new pipeline on empty
// tables looked ever further behind until a captured row changed.
func TestLagAfterSnapshotCaughtUp(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	noise := "mysu_lagsnapnoise_" + suffix()
	if err := s.exec("CREATE TABLE " + quote(noise) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.exec("DROP TABLE IF EXISTS " + quote(noise)) })
	reaches := func(src *mysqlcdc.Source, cp cdc.Checkpoint, what string) {
		t.Helper()
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (%d)", quote(noise), time.Now().UnixNano()%1e9)); err != nil {
			t.Fatal(err)
		}
		l0, err := src.Lag(ctx, cp)
		if err != nil {
			t.Fatal(err)
		}
		waitApplied(ctx, t, src, cp, l0.Head, what+": the other table's write")
	}

	empty := "mysu_lagsnapempty_" + suffix()
	if err := s.exec("CREATE TABLE " + quote(empty) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := s.newSource(t, cdc.SnapshotInitial, mysqlcdc.Options{}, empty)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	reaches(src, nil, "an empty snapshot")
	_ = st.Close()

	one := "mysu_lagsnapone_" + suffix()
	if err := s.exec("CREATE TABLE "+quote(one)+" (id INT PRIMARY KEY)", fmt.Sprintf("INSERT INTO %s VALUES (1)", quote(one))); err != nil {
		t.Fatal(err)
	}
	src = s.newSource(t, cdc.SnapshotInitial, mysqlcdc.Options{}, one)
	st, err = src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp := cdctest.NextEvent(ctx, t, st).Checkpoint
	if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (%d)", quote(noise), time.Now().UnixNano()%1e9+1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the reader passes the write meanwhile; it must not count
	if l, err := src.Lag(ctx, nil); err != nil || l.Applied != 0 {
		t.Fatalf("Lag %+v, %v: without a checkpoint and with the snapshot's row not acknowledged, Applied must be 0", l, err)
	}
	if err := st.Ack(ctx, cp); err != nil {
		t.Fatal(err)
	}
	reaches(src, cp, "a snapshot of one row, acknowledged")
}
