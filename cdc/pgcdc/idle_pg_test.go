package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// busyWrites writes WAL the captured tables have no part in and returns the WAL position
// after it.
func busyWrites(ctx context.Context, t *testing.T, dsn, busy string, from int) pglogrepl.LSN {
	t.Helper()
	var stmts []string
	for i := range 3 {
		lo := from + i*20000
		stmts = append(stmts, fmt.Sprintf("INSERT INTO %s SELECT g, g FROM generate_series(%d, %d) g", quote(busy), lo, lo+19999))
	}
	if err := execSQL(ctx, dsn, false, stmts...); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
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

// waitConfirmed waits until the slot's confirmed position reaches at least want.
func (w slotWatch) waitConfirmed(ctx context.Context, t *testing.T, want pglogrepl.LSN) pglogrepl.LSN {
	t.Helper()
	for {
		if c := w.confirmed(ctx, t); c >= want {
			return c
		}
		select {
		case <-ctx.Done():
			t.Fatalf("slot confirmed %s, never reached %s", w.confirmed(context.Background(), t), want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestIdleCheckpointAdvancesSlot: while the captured table is quiet and another table fills
// the WAL, the slot's confirmed position follows the WAL once every delivered change is
// acknowledged -- and never while one is not. A restart from the stored checkpoint, now
// behind the slot, loses nothing; a stale checkpoint (changes after it were acknowledged) is
// still refused.
func TestIdleCheckpointAdvancesSlot(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	idle, busy := "idle_"+suffix(t), "busy_"+suffix(t)
	createTable(ctx, t, dsn, idle)
	createTable(ctx, t, dsn, busy)
	t.Cleanup(func() { _ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(busy)) })
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: idle}},
		StatusInterval: 50 * time.Millisecond, IdleCheckpointInterval: 100 * time.Millisecond})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	w := slotWatch{conn: conn, slot: src.Slot()}

	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	insert := func(id int) {
		t.Helper()
		if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", quote(idle), id, id)); err != nil {
			t.Fatal(err)
		}
	}
	insert(1)
	first := cdctest.NextEvent(ctx, t, st)
	start := w.confirmed(ctx, t)

	// Delivered but not acknowledged: however much WAL goes by and however long the stream
	// idles (many idle intervals of status replies), the slot stays.
	busyWrites(ctx, t, dsn, busy, 0)
	w.replies(ctx, t, 20, start)

	if err := st.Ack(ctx, first.Checkpoint); err != nil {
		t.Fatal(err)
	}
	end := busyWrites(ctx, t, dsn, busy, 100000)
	got := w.waitConfirmed(ctx, t, end)
	t.Logf("acknowledged %s; other tables' WAL up to %s; slot confirmed %s", cpLSN(t, first.Checkpoint), end, got)
	quiet(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart from the stored checkpoint, now behind the slot: nothing is lost.
	insert(2)
	st2 := openAt(ctx, t, src, first.Checkpoint)
	second := wantInsert(ctx, t, st2, 2)
	quiet(t, st2)
	if err := st2.Ack(ctx, second.Checkpoint); err != nil {
		t.Fatal(err)
	}
	w.waitConfirmed(ctx, t, busyWrites(ctx, t, dsn, busy, 200000))
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}

	// A resumed stream that delivers nothing keeps the stored checkpoint valid through
	// another idle period.
	st3 := openAt(ctx, t, src, second.Checkpoint)
	quiet(t, st3)
	w.waitConfirmed(ctx, t, busyWrites(ctx, t, dsn, busy, 300000))
	if err := st3.Close(); err != nil {
		t.Fatal(err)
	}
	insert(3)
	st4 := openAt(ctx, t, src, second.Checkpoint)
	wantInsert(ctx, t, st4, 3)
	if err := st4.Close(); err != nil {
		t.Fatal(err)
	}

	// A checkpoint with acknowledged changes after it is stale: refused, as before.
	if st, err := src.Open(ctx, first.Checkpoint); !errors.Is(err, pgcdc.ErrCheckpointBehindSlot) {
		if err == nil {
			_ = st.Close()
		}
		t.Fatalf("Open from a checkpoint behind acknowledged changes: %v", err)
	}
}

func openAt(ctx context.Context, t *testing.T, src *pgcdc.Source, cp cdc.Checkpoint) cdc.Stream {
	t.Helper()
	st, err := src.Open(ctx, cp)
	if err != nil {
		t.Fatalf("Open from a stored checkpoint behind an idle-advanced slot: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func wantInsert(ctx context.Context, t *testing.T, st cdc.Stream, id int64) cdc.Event {
	t.Helper()
	ev := cdctest.NextEvent(ctx, t, st)
	if ev.Op != cdc.Insert || ev.After[0] != id {
		t.Fatalf("%v of id %v, want the insert of %d", ev.Op, ev.After[0], id)
	}
	return ev
}

// quiet fails when an event arrives within a short while.
func quiet(t *testing.T, st cdc.Stream) {
	t.Helper()
	select {
	case ev, ok := <-st.Events():
		if ok {
			t.Fatalf("unexpected %v at %v", ev.Op, ev.Position)
		}
		t.Fatalf("stream ended: %v", st.Err())
	case <-time.After(300 * time.Millisecond):
	}
}
