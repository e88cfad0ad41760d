package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
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

func createTable(ctx context.Context, t *testing.T, dsn, tb string) {
	t.Helper()
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, n int)", quote(tb))); err != nil {
		t.Fatal(err)
	}
}

func cpLSN(t *testing.T, cp cdc.Checkpoint) pglogrepl.LSN {
	t.Helper()
	lsn, err := pgcdc.CheckpointLSN(cp)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// slotWatch reads the slot's confirmed position and how many status replies the server has
// processed, so tests wait for evidence instead of for time.
type slotWatch struct {
	conn *pgx.Conn
	slot string
}

func (w slotWatch) confirmed(ctx context.Context, t *testing.T) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := w.conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, w.slot).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// replies waits until the walsender of the slot has processed n more status replies (its
// reply_time moved n times), checking after each that the slot never confirmed more than max.
func (w slotWatch) replies(ctx context.Context, t *testing.T, n int, max pglogrepl.LSN) {
	t.Helper()
	var last *time.Time
	for seen := 0; seen < n; {
		var rt *time.Time
		err := w.conn.QueryRow(ctx, `SELECT r.reply_time FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, w.slot).Scan(&rt)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if rt != nil && (last == nil || rt.After(*last)) {
			if last != nil {
				seen++
			}
			last = rt
		}
		if c := w.confirmed(ctx, t); c > max {
			t.Fatalf("slot confirmed %s, only %s was acknowledged", c, max)
		}
		select {
		case <-ctx.Done():
			t.Fatal("no status replies before the deadline")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestFlushNeverExceedsAck: the slot's confirmed_flush_lsn moves only to acknowledged
// checkpoints, however many changes were received and however often status is reported.
func TestFlushNeverExceedsAck(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := "flush_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	// Idle checkpoints off: they confirm more than was acknowledged by design
	// (TestIdleCheckpointAdvancesSlot checks that they never pass an unacknowledged change).
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}, StatusInterval: 30 * time.Millisecond, IdleCheckpointInterval: -1})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	w := slotWatch{conn: conn, slot: src.Slot()}
	start := w.confirmed(ctx, t)

	var stmts []string
	for i := 1; i <= 5; i++ {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", quote(tb), i, i))
	}
	if err := execSQL(ctx, dsn, false, stmts...); err != nil {
		t.Fatal(err)
	}
	var cps []cdc.Checkpoint
	for range 5 {
		cps = append(cps, cdctest.NextEvent(ctx, t, st).Checkpoint)
	}
	w.replies(ctx, t, 3, start)

	if err := st.Ack(ctx, cps[1]); err != nil {
		t.Fatal(err)
	}
	for w.confirmed(ctx, t) != cpLSN(t, cps[1]) {
		w.replies(ctx, t, 1, cpLSN(t, cps[1]))
	}
	w.replies(ctx, t, 3, cpLSN(t, cps[1]))

	// An older checkpoint never moves the slot back; an unknown one is refused.
	if err := st.Ack(ctx, cps[0]); err != nil {
		t.Fatal(err)
	}
	beyond := []byte(fmt.Sprintf(`{"v":1,"lsn":"%s"}`, cpLSN(t, cps[4])+1000))
	if err := st.Ack(ctx, beyond); err == nil {
		t.Fatal("Ack accepted a checkpoint beyond everything delivered")
	}
	if err := st.Ack(ctx, cps[4]); err != nil {
		t.Fatal(err)
	}
	for w.confirmed(ctx, t) != cpLSN(t, cps[4]) {
		w.replies(ctx, t, 1, cpLSN(t, cps[4]))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Ack(ctx, cps[4]); !errors.Is(err, cdc.ErrSourceClosed) {
		t.Fatalf("Ack after Close: %v", err)
	}
	if st.Err() != nil {
		t.Fatalf("Err after Close: %v", st.Err())
	}
}

// TestResumeAfterReconnectNoLoss: a writer commits while the reader closes and reopens from
// its last stored checkpoint again and again; every committed row arrives, replays only
// repeat what came after the stored checkpoint, and a replayed change keeps its version.
func TestResumeAfterReconnectNoLoss(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := "reconnect_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}})

	const total = 300
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	writerDone := make(chan error, 1)
	go func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			writerDone <- err
			return
		}
		defer conn.Close(context.Background())
		for id := 1; id <= total; {
			// Transactions of one to three rows, some updating the row again.
			batch := &pgx.Batch{}
			n := 1 + id%3
			for k := 0; k < n && id <= total; k++ {
				batch.Queue(fmt.Sprintf("INSERT INTO %s VALUES (%d, 0)", quote(tb), id))
				if id%5 == 0 {
					batch.Queue(fmt.Sprintf("UPDATE %s SET n = n + 1 WHERE id = %d", quote(tb), id))
				}
				id++
			}
			tx, err := conn.Begin(ctx)
			if err == nil {
				err = tx.SendBatch(ctx, batch).Close()
			}
			if err == nil {
				err = tx.Commit(ctx)
			}
			if err != nil {
				writerDone <- err
				return
			}
		}
		writerDone <- nil
	}()

	seen := map[int64]int64{} // id -> version of its insert
	var stored cdc.Checkpoint
	sinceStored := map[int64]bool{}
	events, reopens := 0, 0
	for len(seen) < total {
		ev := cdctest.NextEvent(ctx, t, st)
		events++
		id := ev.After[0].(int64)
		if ev.Op == cdc.Insert {
			if v, ok := seen[id]; ok {
				if !sinceStored[id] {
					t.Fatalf("id %d replayed although its transaction was before the stored checkpoint", id)
				}
				if v != ev.Position.Version() {
					t.Fatalf("replayed insert of %d has version %d, first %d", id, ev.Position.Version(), v)
				}
			}
			seen[id] = ev.Position.Version()
			sinceStored[id] = true
		}
		if ev.Checkpoint != nil && events%4 == 0 {
			stored = ev.Checkpoint // "stored durably" by the test's runner
			clear(sinceStored)
			if err := st.Ack(ctx, stored); err != nil {
				t.Fatal(err)
			}
		}
		if events%37 == 0 {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			reopens++
			if st, err = src.Open(ctx, stored); err != nil {
				t.Fatalf("reopen %d: %v", reopens, err)
			}
			reopened := st
			t.Cleanup(func() { _ = reopened.Close() })
		}
	}
	_ = st.Close()
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	if reopens < 3 {
		t.Fatalf("only %d reopens", reopens)
	}
}

// TestSnapshotResumesAndConverges interrupts a chunked snapshot, changes rows while nothing
// reads, resumes from the stored snapshot checkpoint and applies every event the way
// Elasticsearch's external versioning would: the result must equal the table.
func TestSnapshotResumesAndConverges(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := "snapresume_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s SELECT g, g FROM generate_series(1, 25) g", quote(tb))); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotInitial, Tables: []pgcdc.Table{{Name: tb}}, SnapshotChunk: 4})

	type doc struct {
		version int64
		n       cdc.Value
		deleted bool
	}
	index := map[int64]doc{}
	apply := func(ev cdc.Event) {
		row, deleted := ev.After, false
		if ev.Op == cdc.Delete {
			row, deleted = ev.Before, true
		}
		id := row[0].(int64)
		if d, ok := index[id]; ok && d.version >= ev.Position.Version() {
			return // a 409: superseded
		}
		index[id] = doc{version: ev.Position.Version(), n: row[1], deleted: deleted}
	}

	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := st
	t.Cleanup(func() { _ = first.Close() })
	var stored cdc.Checkpoint
	for i := 0; i < 10; i++ {
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Op != cdc.Read {
			t.Fatalf("event %d is %v", i, ev.Op)
		}
		apply(ev)
		if ev.Checkpoint != nil {
			stored = ev.Checkpoint
			if err := st.Ack(ctx, stored); err != nil {
				t.Fatal(err)
			}
		}
	}
	if stored == nil {
		t.Fatal("no checkpoint in the first 10 snapshot rows with chunks of 4")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("UPDATE %s SET n = 100 WHERE id = 2", quote(tb)),  // read before the stop
		fmt.Sprintf("DELETE FROM %s WHERE id = 20", quote(tb)),        // not read yet
		fmt.Sprintf("UPDATE %s SET n = 200 WHERE id = 21", quote(tb)), // not read yet
		fmt.Sprintf("INSERT INTO %s VALUES (30, 30)", quote(tb)),
		fmt.Sprintf("DELETE FROM %s WHERE id = 3", quote(tb)),
	); err != nil {
		t.Fatal(err)
	}
	st, err = src.Open(ctx, stored)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	// The rest of the snapshot (rows 9..25 as they are now, less 20, plus 30) and then the
	// five changes, though some of them are already in what the resumed snapshot read.
	reads, changes := 0, 0
	for changes < 5 {
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Op == cdc.Read {
			reads++
			if changes > 0 {
				t.Fatal("a snapshot row after streamed changes")
			}
		} else {
			changes++
		}
		apply(ev)
	}
	if reads != 17 {
		t.Fatalf("resumed snapshot read %d rows, want 17", reads)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT id, n FROM %s", quote(tb)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int64{}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		want[id] = n
	}
	live := 0
	for id, d := range index {
		if d.deleted {
			if _, ok := want[id]; ok {
				t.Errorf("row %d deleted in the index, present in the table", id)
			}
			continue
		}
		live++
		if n, ok := want[id]; !ok || d.n != n {
			t.Errorf("row %d: index n=%v, table n=%d (present %v)", id, d.n, n, ok)
		}
	}
	if live != len(want) {
		t.Errorf("index holds %d rows, table %d", live, len(want))
	}
}

// TestOpenRefusesLostHistory: a checkpoint behind the slot, or one whose slot is gone, cannot
// resume without silently skipping changes, so Open refuses it.
func TestOpenRefusesLostHistory(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := "lost_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}, StatusInterval: 20 * time.Millisecond})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", quote(tb)), fmt.Sprintf("INSERT INTO %s VALUES (2, 2)", quote(tb))); err != nil {
		t.Fatal(err)
	}
	first, second := cdctest.NextEvent(ctx, t, st), cdctest.NextEvent(ctx, t, st)
	if err := st.Ack(ctx, second.Checkpoint); err != nil {
		t.Fatal(err)
	}
	// The slot must show the acknowledgement before the stale checkpoint can be behind it.
	// The status updates of the open stream report it; Close's last one is only sent, not
	// awaited (doc.go, Acknowledgements), so the test waits for the slot, not for Close.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	slotWatch{conn: conn, slot: src.Slot()}.waitConfirmed(ctx, t, cpLSN(t, second.Checkpoint))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := src.Open(ctx, first.Checkpoint); !errors.Is(err, pgcdc.ErrCheckpointBehindSlot) {
		if err == nil {
			_ = st.Close()
		}
		t.Fatalf("Open behind the slot: %v", err)
	}
	if err := src.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Open(ctx, second.Checkpoint); !errors.Is(err, pgcdc.ErrSlotMissing) {
		t.Fatalf("Open without the slot: %v", err)
	}
	if _, err := src.Open(ctx, cdc.Checkpoint("garbage")); !errors.Is(err, pgcdc.ErrBadCheckpoint) {
		t.Fatalf("Open with garbage: %v", err)
	}
}

// TestUnchangedToast: an update that leaves TOASTed values alone (text, jsonb and bytea of
// random content, stored out of line) does not resend them; with REPLICA IDENTITY FULL the old
// row fills them in, with the default identity they are cdc.Unchanged{} -- never a nil that
// would pass for NULL -- and an update that does change one sends the new value.
func TestUnchangedToast(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full, plain := "h2toast_full_"+suffix(t), "h2toast_plain_"+suffix(t)
	for _, tb := range []string{full, plain} {
		if err := execSQL(ctx, dsn, false, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, n int, big text, doc jsonb, raw bytea)", quote(tb))); err != nil {
			t.Fatal(err)
		}
	}
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL", quote(full))); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Slot: "h2toast_", Tables: []pgcdc.Table{{Name: full}, {Name: plain}}})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	// 2000 md5 digests: 64000 characters no compression brings under the TOAST threshold.
	const random = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 2000))"
	var stmts []string
	for _, tb := range []string{full, plain} {
		stmts = append(stmts,
			fmt.Sprintf("INSERT INTO %s SELECT 1, 1, %s, jsonb_build_object('k', %s), decode(%s, 'hex')", quote(tb), random, random, random),
			fmt.Sprintf("UPDATE %s SET n = 2 WHERE id = 1", quote(tb)))
	}
	stmts = append(stmts, fmt.Sprintf("UPDATE %s SET n = 3, big = 'small now' WHERE id = 1", quote(plain)))
	if err := execSQL(ctx, dsn, false, stmts...); err != nil {
		t.Fatal(err)
	}
	ins := cdctest.NextEvent(ctx, t, st)
	big, _ := ins.After[2].(string)
	doc, _ := ins.After[3].(cdc.RawJSON)
	raw, _ := ins.After[4].(cdc.Base64)
	if len(big) != 64000 || len(doc) < 64000 || len(raw) < 40000 {
		t.Fatalf("insert: big %d, doc %d, raw %d bytes", len(big), len(doc), len(raw))
	}
	upd := cdctest.NextEvent(ctx, t, st)
	if upd.After[1] != int64(2) || upd.After[2] != big || string(upd.After[3].(cdc.RawJSON)) != string(doc) || upd.After[4] != raw {
		t.Fatalf("REPLICA IDENTITY FULL update: %s", shapes(upd.After))
	}
	if ins = cdctest.NextEvent(ctx, t, st); ins.Op != cdc.Insert {
		t.Fatalf("default identity insert: %v", ins.Op)
	}
	upd = cdctest.NextEvent(ctx, t, st) // fails on a Malformed event
	want := []cdc.Value{int64(1), int64(2), cdc.Unchanged{}, cdc.Unchanged{}, cdc.Unchanged{}}
	if upd.Op != cdc.Update || upd.Before != nil || !reflect.DeepEqual(upd.After, want) {
		t.Fatalf("default identity update: %v, before %v, after %s", upd.Op, upd.Before, shapes(upd.After))
	}
	if upd.Checkpoint == nil {
		t.Fatal("the update lost its transaction's checkpoint")
	}
	upd = cdctest.NextEvent(ctx, t, st)
	want = []cdc.Value{int64(1), int64(3), "small now", cdc.Unchanged{}, cdc.Unchanged{}}
	if !reflect.DeepEqual(upd.After, want) {
		t.Fatalf("default identity update of big: %s", shapes(upd.After))
	}
}

// shapes describes a row by its value types and sizes, for failure messages that would
// otherwise print 64 KB values.
func shapes(row []cdc.Value) string {
	var b strings.Builder
	for i, v := range row {
		if i > 0 {
			b.WriteString(", ")
		}
		switch x := v.(type) {
		case string:
			fmt.Fprintf(&b, "string(%d)", len(x))
		case cdc.RawJSON:
			fmt.Fprintf(&b, "json(%d)", len(x))
		case cdc.Base64:
			fmt.Fprintf(&b, "base64(%d)", len(x))
		default:
			fmt.Fprintf(&b, "%T(%v)", v, v)
		}
	}
	return b.String()
}

// TestSlowConsumerKeepsConnection: with a wal_sender_timeout of one second, a consumer that
// stops reading for longer does not lose the stream, because the source keeps reporting
// status while it waits to deliver.
func TestSlowConsumerKeepsConnection(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// %20, not the '+' url.Values would write: libpq URLs do not read '+' as a space.
	u.RawQuery += "&options=-c%20wal_sender_timeout%3D1000"
	tb := "slow_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	src := newSource(t, u.String(), pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}, StatusInterval: 200 * time.Millisecond})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const rows = 500 // far more than the stream buffers
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s SELECT g, g FROM generate_series(1, %d) g", quote(tb), rows)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // three timeouts' worth of not reading
	for range rows {
		cdctest.NextEvent(ctx, t, st)
	}
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (%d, 0)", quote(tb), rows+1)); err != nil {
		t.Fatal(err)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.After[0] != int64(rows+1) {
		t.Fatalf("after the pause: id %v", ev.After[0])
	}
}

// TestSnapshotProgress: while a snapshot is read, Progress names the table and counts the rows
// the reader has taken, against the catalog's estimate; it goes quiet once the snapshot is read.
func TestSnapshotProgress(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := "progress_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	const rows = 300 // far more than the stream buffers, so the reader waits on the test
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s SELECT g, g FROM generate_series(1, %d) g", quote(tb), rows),
		"ANALYZE "+quote(tb)); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotInitial, Tables: []pgcdc.Table{{Name: tb}}, SnapshotChunk: 16})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for range 10 {
		cdctest.NextEvent(ctx, t, st)
	}
	p := st.Progress()
	if !p.Active || p.Table.Table != tb || p.TablesTotal != 1 || p.TablesDone != 0 || p.RowsEstimated != rows || p.RowsDone < 9 || p.RowsDone > 10 {
		t.Fatalf("progress after 10 rows: %+v", p)
	}
	for range rows - 10 {
		cdctest.NextEvent(ctx, t, st)
	}
	for st.Progress().Active {
		select {
		case <-ctx.Done():
			t.Fatal("progress still active after the whole snapshot was read")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
