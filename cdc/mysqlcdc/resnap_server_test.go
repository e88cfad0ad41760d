package mysqlcdc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// resnapShape is the captured table's key: its columns (then n BIGINT and pad VARCHAR), the
// key's values for an id (?), and where id and n are in a row (pad follows n).
type resnapShape struct {
	name, cols, vals string
	idCol, nCol      int
}

// TestResnapshotWhileStreaming re-snapshots a table on the real MariaDB server while writers
// update, delete and insert its rows (in transactions held open a while, and beside
// transactions of a table the source does not capture), and while the consumer crashes
// twice -- once right after the request, once in the middle -- and resumes from its last
// acknowledged checkpoint. The stream starts without a snapshot, so the rows no writer
// touched reach the index only through the re-snapshot. At the end the index (external
// versions, no tombstones) equals the table row by row. Both positionings, two key shapes.
func TestResnapshotWhileStreaming(t *testing.T) {
	for _, sh := range []resnapShape{
		{name: "int", cols: "id INT NOT NULL PRIMARY KEY", vals: "?", idCol: 0, nCol: 1},
		// A key led by a case-insensitive string, then a TIMESTAMP(6) and the id: the chunks'
		// bounds must compare under the column's collation (binary order differs), and the
		// window must match the binlog's keys with the chunk's.
		{name: "composite", cols: "k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, at TIMESTAMP(6) NOT NULL, id INT NOT NULL, PRIMARY KEY (k, at, id), KEY (id)",
			vals: "ELT(1 + ? % 4, 'apple', 'Banana', 'cherry', 'Date'), TIMESTAMP('2020-01-01 00:00:00') + INTERVAL (? % 7) SECOND, ?", idCol: 2, nCol: 3},
	} {
		t.Run(sh.name, func(t *testing.T) {
			eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
				resnapshotWhileStreaming(ctx, t, s, p, sh)
			})
		})
	}
}

func resnapshotWhileStreaming(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning, sh resnapShape) {
	// Each chunk's window stays open a while after its rows were read: the writers' changes
	// (deletes above all: no tombstone keeps an older row out) race the rows in every chunk.
	defer mysqlcdc.SetChunkDelay(25 * time.Millisecond)()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	table, other, signal := "resnap_"+suffix(), "resnapo_"+suffix(), "resnaps_"+suffix()
	q := quote(s.db) + "." + quote(table)
	const rows, keys = 1500, 2000
	stmts := []string{
		fmt.Sprintf("CREATE TABLE %s (%s, n BIGINT NOT NULL, pad VARCHAR(400) NOT NULL)", q, sh.cols),
		fmt.Sprintf("CREATE TABLE %s (id INT, n BIGINT)", quote(other)),
	}
	for i := 1; i <= rows; i += 100 {
		var vals []string
		for j := i; j < i+100 && j <= rows; j++ {
			vals = append(vals, "("+keyValues(sh, j)+fmt.Sprintf(", %d, 'p%d')", j, j))
		}
		stmts = append(stmts, fmt.Sprintf("INSERT INTO %s VALUES %s", q, strings.Join(vals, ", ")))
	}
	if err := s.exec(stmts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.exec("DROP TABLE IF EXISTS "+quote(other), "DROP TABLE IF EXISTS "+quote(signal))
	})
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Positioning: p, SnapshotChunk: 50,
		SignalTable: mysqlcdc.TableName{Database: s.db, Table: signal}}, table)

	var acked cdc.Checkpoint
	open := func() cdc.Stream {
		t.Helper()
		st, err := src.Open(ctx, acked)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return st
	}
	st := open()
	defer func() { _ = st.Close() }()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werrMu sync.Mutex
	var werr error
	for w := range 3 {
		r := rand.New(rand.NewPCG(seed, uint64(w)+100))
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := s.conn()
			if err != nil {
				werrMu.Lock()
				werr = err
				werrMu.Unlock()
				return
			}
			defer conn.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := writeTx(ctx, conn, r, sh, q, quote(other), keys); err != nil && ctx.Err() == nil {
					werrMu.Lock()
					werr = err
					werrMu.Unlock()
					return
				}
			}
		}()
	}
	stopWriters := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
		if werr != nil {
			t.Fatalf("writer: %v", werr)
		}
	}
	defer stopWriters()

	idx := cdctest.NewVersionedIndex(sh.idCol, sh.nCol, sh.nCol+1)
	consume := func(until func() bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !until() {
			select {
			case ev, ok := <-st.Events():
				if !ok {
					t.Fatalf("stream ended: %v", st.Err())
				}
				idx.Apply(t, ev)
				if ev.Checkpoint != nil {
					if err := st.Ack(ctx, ev.Checkpoint); err != nil {
						t.Fatal(err)
					}
					acked = ev.Checkpoint
				}
			case <-tick.C:
			case <-ctx.Done():
				t.Fatalf("timed out; progress %+v", st.Progress())
			}
		}
	}
	crash := func() {
		t.Helper()
		_ = st.Close()
		st = open()
	}

	consume(func() bool { return len(idx.Docs) > 20 && acked != nil }) // streaming has begun
	id, err := src.Resnapshot(ctx, cdc.ResnapshotRequest{Tables: []string{s.db + "." + table}})
	if err != nil {
		t.Fatal(err)
	}
	if rng.IntN(2) == 0 {
		crash() // before or just after the stream decoded the request: it must not be lost
	}
	consume(func() bool { p := st.Progress(); return p.Resnapshot == id && p.RowsDone > rows/3 })
	t.Logf("crash in the middle: %+v", st.Progress())
	crash()
	consume(func() bool { p := st.Progress(); return p.Resnapshot == id && !p.Active })
	if p := st.Progress(); p.Error != "" || p.TablesDone != 1 || p.TablesTotal != 1 {
		t.Errorf("re-snapshot ended with %+v", p)
	}
	stopWriters()

	// Everything committed so far is in the index once the sentinel is.
	const sentinel = 1 << 30
	if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (%s, 0, 's')", q, keyValues(sh, sentinel))); err != nil {
		t.Fatal(err)
	}
	consume(func() bool { _, ok := idx.Docs[sentinel]; return ok })

	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Execute(fmt.Sprintf("SELECT id, n, pad FROM %s", q))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]cdctest.IndexDoc{}
	for i := 0; i < res.RowNumber(); i++ {
		id, _ := res.GetInt(i, 0)
		n, _ := res.GetInt(i, 1)
		pad, _ := res.GetString(i, 2)
		want[id] = cdctest.IndexDoc{N: n, Pad: pad}
	}
	idx.Equal(t, want)
	if idx.Reads == 0 {
		t.Fatal("no re-snapshot row reached the index")
	}
	t.Logf("%d rows equal; %d re-snapshot rows applied", len(want), idx.Reads)
}

// keyValues are the key columns' values of row id, as SQL.
func keyValues(sh resnapShape, id int) string {
	return strings.ReplaceAll(sh.vals, "?", fmt.Sprint(id))
}

// writeTx commits one random transaction: changes of the captured table (a delete, an update,
// an upsert of a key that may be gone), sometimes held open a while, or a write of the other
// table alone.
func writeTx(ctx context.Context, conn *client.Conn, r *rand.Rand, sh resnapShape, table, other string, keys int) error {
	if _, err := conn.Execute("BEGIN"); err != nil {
		return err
	}
	rollback := func() { _, _ = conn.Execute("ROLLBACK") }
	if r.IntN(4) == 0 {
		if _, err := conn.Execute(fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", other, r.IntN(keys), r.Int64())); err != nil {
			rollback()
			return err
		}
	} else {
		for range 1 + r.IntN(3) {
			k := 1 + r.IntN(keys)
			var q string
			switch r.IntN(5) {
			case 0:
				q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, k)
			case 1, 2:
				q = fmt.Sprintf("UPDATE %s SET n = n + 1, pad = CONCAT(pad, 'u') WHERE id = %d", table, k)
			default:
				q = fmt.Sprintf("INSERT INTO %s VALUES (%s, 0, 'i') ON DUPLICATE KEY UPDATE n = n + 10", table, keyValues(sh, k))
			}
			if _, err := conn.Execute(q); err != nil {
				rollback()
				var me *mysql.MyError
				if errors.As(err, &me) && (me.Code == mysql.ER_LOCK_DEADLOCK || me.Code == mysql.ER_LOCK_WAIT_TIMEOUT) {
					return nil // the transaction is rolled back
				}
				return err
			}
		}
	}
	if r.IntN(8) == 0 {
		select {
		case <-ctx.Done():
			rollback()
			return ctx.Err()
		case <-time.After(time.Duration(r.IntN(300)) * time.Millisecond):
		}
	}
	_, err := conn.Execute("COMMIT")
	return err
}

// TestResnapshotRequests checks what a request may say on the real server: a condition reads
// only the rows it selects, a request naming no table reads every captured one with a key, a
// request written into the signal table with SQL alone is carried out, and requests that
// cannot work are refused with cdc.ErrResnapshotRefused before anything is written.
func TestResnapshotRequests(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table, nokey, floaty, signal := "resnapq_"+suffix(), "resnapnk_"+suffix(), "resnapf_"+suffix(), "resnapsq_"+suffix()
	q := quote(s.db) + "." + quote(table)
	var vals []string
	for i := 1; i <= 300; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'p')", i, i))
	}
	if err := s.exec(
		fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL, pad VARCHAR(10) NOT NULL)", q),
		fmt.Sprintf("INSERT INTO %s VALUES %s", q, strings.Join(vals, ", ")),
		fmt.Sprintf("CREATE TABLE %s (id INT, n BIGINT)", quote(nokey)),
		fmt.Sprintf("CREATE TABLE %s (f DOUBLE NOT NULL PRIMARY KEY)", quote(floaty))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.exec("DROP TABLE IF EXISTS " + quote(signal)) })
	sig := mysqlcdc.TableName{Database: s.db, Table: signal}
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{SnapshotChunk: 40, SignalTable: sig}, table, nokey, floaty)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for _, bad := range []cdc.ResnapshotRequest{
		{Tables: []string{s.db + "." + nokey}},              // no primary key
		{Tables: []string{s.db + "." + floaty}},             // a key of approximate numbers
		{Tables: []string{s.db + ".no_such_table"}},         // not captured
		{Tables: []string{table}, Where: "no_such_col = 1"}, // the server refuses the condition
		{Tables: []string{table}, Where: "id = = 1"},
	} {
		if _, err := src.Resnapshot(ctx, bad); !errors.Is(err, cdc.ErrResnapshotRefused) {
			t.Errorf("Resnapshot(%+v) = %v, want cdc.ErrResnapshotRefused", bad, err)
		}
	}
	my, err := mysqlcdc.New(s.addr, s.user, s.pass, []mysqlcdc.TableName{{Database: s.db, Table: table}}, &mysqlcdc.Options{Flavor: mysqlcdc.MySQL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := my.Resnapshot(ctx, cdc.ResnapshotRequest{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Resnapshot on the MySQL flavor = %v, want errors.ErrUnsupported", err)
	}

	idx := cdctest.NewVersionedIndex(0, 1, 2)
	wait := func(id string) {
		t.Helper()
		if p := cdctest.AwaitResnapshot(ctx, t, st, id, func(ev cdc.Event) { idx.Apply(t, ev) }); p.Error != "" {
			t.Fatalf("re-snapshot %s: %s", id, p.Error)
		}
	}
	id, err := src.Resnapshot(ctx, cdc.ResnapshotRequest{Tables: []string{table}, Where: "id % 3 = 0 AND id > 30"})
	if err != nil {
		t.Fatal(err)
	}
	wait(id)
	for i := int64(1); i <= 300; i++ {
		if _, ok := idx.Docs[i]; ok != (i%3 == 0 && i > 30) {
			t.Fatalf("row %d in the index: %v, after a re-snapshot of id %% 3 = 0 AND id > 30", i, ok)
		}
	}
	// Every captured table: those without a rangeable key are left out.
	id, err = src.Resnapshot(ctx, cdc.ResnapshotRequest{ID: "all"})
	if err != nil {
		t.Fatal(err)
	}
	wait(id)
	if p := st.Progress(); p.TablesTotal != 1 || p.TablesDone != 1 || p.RowsDone != 300 {
		t.Fatalf("a re-snapshot of every table: %+v, want the one table with a key, 300 rows", p)
	}
	if len(idx.Docs) != 300 || idx.Reads != 300+90 {
		t.Fatalf("after a full re-snapshot: %d documents, %d reads; want 300, 390", len(idx.Docs), idx.Reads)
	}
	// Through SQL alone: a malformed request is dropped (the stream goes on), a good one read.
	sq := quote(s.db) + "." + quote(signal)
	if err := s.exec(
		fmt.Sprintf(`INSERT INTO %s (id, kind, body) VALUES ('junk', 'resnapshot', 'not json')`, sq),
		fmt.Sprintf(`INSERT INTO %s (id, kind, body) VALUES ('by-sql', 'resnapshot', '{"tables": ["%s.%s"], "where": "id <= 10"}')`, sq, s.db, table)); err != nil {
		t.Fatal(err)
	}
	wait("by-sql")
	if idx.Reads != 400 {
		t.Fatalf("after a request through SQL for 10 rows: %d reads, want 400", idx.Reads)
	}
}

// TestResnapshotAcrossDDL adds a column to the table in the middle of its re-snapshot: the
// chunk whose window saw the statement is read again, every row arrives, and the rows read
// after the statement carry the new column.
func TestResnapshotAcrossDDL(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer mysqlcdc.SetChunkDelay(30 * time.Millisecond)()
	table, signal := "resnapd_"+suffix(), "resnapsd_"+suffix()
	q := quote(s.db) + "." + quote(table)
	var vals []string
	for i := 1; i <= 600; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'p')", i, i))
	}
	if err := s.exec(
		fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL, pad VARCHAR(10) NOT NULL)", q),
		fmt.Sprintf("INSERT INTO %s VALUES %s", q, strings.Join(vals, ", "))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.exec("DROP TABLE IF EXISTS " + quote(signal)) })
	// A small read-ahead keeps the re-snapshot within a few chunks of what the test consumed,
	// so the ALTER lands in its middle however the machine schedules the two.
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{SnapshotChunk: 50, Buffer: 16,
		SignalTable: mysqlcdc.TableName{Database: s.db, Table: signal}}, table)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, err := src.Resnapshot(ctx, cdc.ResnapshotRequest{Tables: []string{table}})
	if err != nil {
		t.Fatal(err)
	}
	idx := cdctest.NewVersionedIndex(0, 1, 2)
	altered, widest := false, 0
	p := cdctest.AwaitResnapshot(ctx, t, st, id, func(ev cdc.Event) {
		idx.Apply(t, ev)
		if ev.Op == cdc.Read && altered {
			widest = max(widest, len(ev.After))
		}
		if !altered && idx.Reads >= 100 {
			altered = true
			if err := s.exec(fmt.Sprintf("ALTER TABLE %s ADD COLUMN extra INT NOT NULL DEFAULT 5", q)); err != nil {
				t.Fatal(err)
			}
		}
	})
	if p.Error != "" || p.RowsDone < 600 {
		t.Fatalf("re-snapshot ended with %+v", p)
	}
	if len(idx.Docs) != 600 {
		t.Fatalf("%d rows reached the index, want 600", len(idx.Docs))
	}
	if widest != 4 {
		t.Fatalf("rows read after the ALTER have %d columns, want 4", widest)
	}
}
