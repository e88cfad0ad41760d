package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestResnapshotWhileStreaming re-snapshots a table on the real server while writers update,
// delete and insert its rows (in transactions held open for a while, and beside transactions
// of a table the slot does not capture, which make chunks check themselves against a second
// snapshot), and while the consumer crashes twice -- once right after the request, once in the
// middle -- and resumes from its last acknowledged checkpoint. The stream starts without a
// snapshot, so the rows no writer touched reach the index only through the re-snapshot. At
// the end the index (external-version rules, no tombstones) equals the table row by row.
func TestResnapshotWhileStreaming(t *testing.T) {
	for _, sh := range []resnapShape{
		{name: "int", cols: "id int PRIMARY KEY", keyCols: "id", vals: "$1", nCol: 1},
		// A composite key of an int, a text and a timestamptz: the window compares the keys
		// pgoutput sends with those the chunk's SELECT returns, as text.
		{name: "composite", cols: "id int, k text, at timestamptz, PRIMARY KEY (id, k, at)", keyCols: "id, k, at",
			vals: "$1::int, md5($1::int::text), timestamptz '2020-01-01 00:00:00+00' + $1::int * interval '1 second'", nCol: 3},
	} {
		t.Run(sh.name, func(t *testing.T) { resnapshotWhileStreaming(t, sh) })
	}
}

// resnapShape is the captured table's key: its columns (id first, then n bigint and pad text
// follow), and the key's values for an id ($1).
type resnapShape struct {
	name, cols, keyCols, vals string
	nCol                      int
}

func resnapshotWhileStreaming(t *testing.T, sh resnapShape) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	table, other := "resnap_"+suffix(t), "resnapo_"+suffix(t)
	const rows, keys = 1500, 2000
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("CREATE TABLE %s (%s, n bigint NOT NULL, pad text NOT NULL)", quote(table), sh.cols),
		fmt.Sprintf("INSERT INTO %s SELECT %s, g, 'p' || g FROM generate_series(1, %d) g", quote(table), strings.ReplaceAll(sh.vals, "$1", "(g)"), rows),
		fmt.Sprintf("CREATE TABLE %s (id int, n bigint)", quote(other))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(other)) })
	src := newSource(t, dsn, pgcdc.Options{Tables: []pgcdc.Table{{Name: table}}, Snapshot: cdc.SnapshotNever,
		SnapshotChunk: 50, IdleCheckpointInterval: 300 * time.Millisecond, ResnapshotWait: time.Minute})

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

	// Writers: until stop, transactions of one to three changes of the captured table, some
	// held open, and transactions of the other table alone.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werrMu sync.Mutex
	var werr error
	for w := range 3 {
		r := rand.New(rand.NewPCG(seed, uint64(w)+100))
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				werrMu.Lock()
				werr = err
				werrMu.Unlock()
				return
			}
			defer conn.Close(context.Background())
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := writeTx(ctx, conn, r, sh, table, other, keys); err != nil && ctx.Err() == nil {
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

	idx := cdctest.NewVersionedIndex(0, sh.nCol, sh.nCol+1)
	// consume takes events until until says so; a closed stream is a failure.
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

	consume(func() bool { return len(idx.Docs) > 20 || acked != nil }) // streaming has begun
	id, err := src.Resnapshot(ctx, cdc.ResnapshotRequest{Tables: []string{"public." + table}})
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
	p := st.Progress()
	if p.Error != "" || p.TablesDone != 1 || p.TablesTotal != 1 {
		t.Errorf("re-snapshot ended with %+v", p)
	}
	stopWriters()

	// Everything committed so far is in the index once the sentinel is.
	const sentinel = 1 << 30
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (%s, 0, 's')", quote(table), strings.ReplaceAll(sh.vals, "$1", strconv.Itoa(sentinel)))); err != nil {
		t.Fatal(err)
	}
	consume(func() bool { _, ok := idx.Docs[sentinel]; return ok })

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	want := map[int64]cdctest.IndexDoc{}
	rs, err := conn.Query(ctx, fmt.Sprintf("SELECT id, n, pad FROM %s", quote(table)))
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id int32
		var d cdctest.IndexDoc
		if err := rs.Scan(&id, &d.N, &d.Pad); err != nil {
			t.Fatal(err)
		}
		want[int64(id)] = d
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	idx.Equal(t, want)
	if idx.Reads == 0 {
		t.Fatal("no re-snapshot row reached the index")
	}
	t.Logf("%d rows equal; %d re-snapshot rows applied", len(want), idx.Reads)
}

// writeTx commits one random transaction: changes of the captured table (an update, a delete,
// an upsert of a key that may be gone), sometimes held open a while, or a write of the other
// table alone.
func writeTx(ctx context.Context, conn *pgx.Conn, r *rand.Rand, sh resnapShape, table, other string, keys int) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if r.IntN(4) == 0 {
		if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES ($1, $2)", quote(other)), r.IntN(keys), r.Int64()); err != nil {
			return err
		}
	} else {
		for range 1 + r.IntN(3) {
			k := 1 + r.IntN(keys)
			var q string
			switch r.IntN(5) {
			case 0:
				q = fmt.Sprintf("DELETE FROM %s WHERE id = $1", quote(table))
			case 1, 2:
				q = fmt.Sprintf("UPDATE %s SET n = n + 1, pad = pad || 'u' WHERE id = $1", quote(table))
			default:
				q = fmt.Sprintf("INSERT INTO %s VALUES (%s, 0, 'i') ON CONFLICT (%s) DO UPDATE SET n = %s.n + 10", quote(table), sh.vals, sh.keyCols, quote(table))
			}
			if _, err := tx.Exec(ctx, q, k); err != nil {
				var pgErr interface{ SQLState() string }
				if errors.As(err, &pgErr) && pgErr.SQLState() == "40P01" {
					return nil // a deadlock between writers: this transaction is rolled back
				}
				return err
			}
		}
	}
	if r.IntN(8) == 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(r.IntN(300)) * time.Millisecond):
		}
	}
	return tx.Commit(ctx)
}

// TestResnapshotRequests checks what a request may say on the real server: a condition reads
// only the rows it selects, a request naming no table reads every captured one, and requests
// that cannot work are refused with ErrResnapshotRequest before anything is written.
func TestResnapshotRequests(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table, nokey := "resnapq_"+suffix(t), "resnapnk_"+suffix(t)
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, n bigint NOT NULL, pad text NOT NULL)", quote(table)),
		fmt.Sprintf("INSERT INTO %s SELECT g, g, 'p' FROM generate_series(1, 300) g", quote(table)),
		fmt.Sprintf("CREATE TABLE %s (id int, n bigint)", quote(nokey))); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, dsn, pgcdc.Options{Tables: []pgcdc.Table{{Name: table}, {Name: nokey}}, Snapshot: cdc.SnapshotNever, SnapshotChunk: 40})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for _, bad := range []cdc.ResnapshotRequest{
		{Tables: []string{"public." + nokey}},               // no primary key
		{Tables: []string{"public.no_such_table"}},          // not captured
		{Tables: []string{table}, Where: "no_such_col = 1"}, // the server refuses the condition
		{Tables: []string{table}, Where: "id = 'x'"},
	} {
		if _, err := src.Resnapshot(ctx, bad); !errors.Is(err, pgcdc.ErrResnapshotRequest) {
			t.Errorf("Resnapshot(%+v) = %v, want ErrResnapshotRequest", bad, err)
		}
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
	// Every captured table: the one without a primary key is left out.
	id, err = src.Resnapshot(ctx, cdc.ResnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wait(id)
	if p := st.Progress(); p.TablesTotal != 1 || p.TablesDone != 1 {
		t.Fatalf("a re-snapshot of every table: %+v, want the one table with a key", p)
	}
	if len(idx.Docs) != 300 || idx.Reads != 300+90 {
		t.Fatalf("after a full re-snapshot: %d documents, %d reads; want 300, 390", len(idx.Docs), idx.Reads)
	}
	// Through SQL alone: a malformed request is dropped (the stream goes on), a good one read.
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("SELECT pg_logical_emit_message(true, %s, 'not json')", "'"+pgcdc.ResnapshotPrefix+"'"),
		fmt.Sprintf(`SELECT pg_logical_emit_message(true, %s, '{"id": "by-sql", "tables": ["public.%s"], "where": "id <= 10"}')`,
			"'"+pgcdc.ResnapshotPrefix+"'", table)); err != nil {
		t.Fatal(err)
	}
	wait("by-sql")
	if idx.Reads != 400 {
		t.Fatalf("after a request through SQL for 10 rows: %d reads, want 400", idx.Reads)
	}
}
