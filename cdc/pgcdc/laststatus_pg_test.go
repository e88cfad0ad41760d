package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestResumeAfterLateLastStatus: the walsender of a stream just closed may apply its last
// status update after the next Open read the slot (Close sends it and does not wait). When
// that update moves the slot to a later idle note's start, the reopened stream -- resuming
// from a stored checkpoint behind the slot -- must verify against where the slot is once it
// holds it, not refuse a sound checkpoint as behind the slot. The late update is played by
// a replication connection of the test that holds the slot while Open waits for it, and
// moves the slot to an idle note it wrote (Start past the slot, base at the checkpoint).
func TestResumeAfterLateLastStatus(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	idle, busy := "p32_late_"+suffix(t), "p32_latebusy_"+suffix(t)
	createTable(ctx, t, dsn, idle)
	createTable(ctx, t, dsn, busy)
	t.Cleanup(func() { _ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(busy)) })
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Slot: "p32_late_", Tables: []pgcdc.Table{{Name: idle}},
		StatusInterval: 50 * time.Millisecond, IdleCheckpointInterval: 100 * time.Millisecond, SlotBusyTimeout: 2 * time.Minute})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	w := slotWatch{conn: conn, slot: src.Slot()}

	// A stored checkpoint behind a slot an idle note moved.
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", quote(idle))); err != nil {
		t.Fatal(err)
	}
	first := wantInsert(ctx, t, st, 1)
	if err := st.Ack(ctx, first.Checkpoint); err != nil {
		t.Fatal(err)
	}
	c1 := w.waitConfirmed(ctx, t, busyWrites(ctx, t, dsn, busy, 0))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	c1 = w.confirmed(ctx, t) // Close's last update may have moved it further
	base := cpLSN(t, first.Checkpoint)

	// The late status update's side: a walsender holding the slot, and the idle note it
	// will confirm.
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(context.Background())
	if err := pglogrepl.StartReplication(ctx, repl, src.Slot(), c1, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '\"" + src.Publication() + "\"'", "messages 'true'"},
	}); err != nil {
		t.Fatal(err)
	}
	busyWrites(ctx, t, dsn, busy, 100000)
	var insert string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&insert); err != nil {
		t.Fatal(err)
	}
	c2, err := pglogrepl.ParseLSN(insert)
	if err != nil {
		t.Fatal(err)
	}
	note := fmt.Sprintf(`{"slot":%q,"nonce":"p32late","start":%q,"base":%q}`, src.Slot(), c2.String(), base.String())
	if _, err := conn.Exec(ctx, `SELECT pg_logical_emit_message(false, 'tributary.pgcdc.idle', $1::text)`, note); err != nil {
		t.Fatal(err)
	}

	// Open reads the slot (at c1), then waits for the slot: it is in START_REPLICATION's
	// retry once a walsender other than the test's (and the closed stream's, which may still
	// be exiting) has run the command.
	starting := func() []int32 {
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender'
			AND pid <> $1 AND query LIKE 'START_REPLICATION SLOT %' AND position($2 in query) > 0`, repl.PID(), src.Slot())
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	before := starting()
	type opened struct {
		st  cdc.Stream
		err error
	}
	res := make(chan opened, 1)
	go func() {
		st, err := src.Open(ctx, first.Checkpoint)
		res <- opened{st, err}
	}()
	for waiting := false; !waiting; {
		for _, pid := range starting() {
			waiting = waiting || !slices.Contains(before, pid)
		}
		if waiting {
			break
		}
		select {
		case r := <-res:
			t.Fatalf("Open returned while the slot was held: %v", r.err)
		case <-ctx.Done():
			t.Fatal("Open never tried to start replication")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The late update: the slot moves to the note's start while Open waits.
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{WALWritePosition: c2}); err != nil {
		t.Fatal(err)
	}
	w.waitConfirmed(ctx, t, c2)
	_ = repl.Close(ctx)

	r := <-res
	if r.err != nil {
		if errors.Is(r.err, pgcdc.ErrCheckpointBehindSlot) {
			t.Fatalf("a sound checkpoint refused after a late status update: %v", r.err)
		}
		t.Fatal(r.err)
	}
	st = r.st
	t.Cleanup(func() { _ = st.Close() })
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (2, 2)", quote(idle))); err != nil {
		t.Fatal(err)
	}
	wantInsert(ctx, t, st, 2)
	quiet(t, st)
}
