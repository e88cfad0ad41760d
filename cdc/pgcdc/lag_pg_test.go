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

// walNow is the server's current WAL write position, read on conn after its last commit.
func walNow(ctx context.Context, t *testing.T, conn *pgx.Conn) pglogrepl.LSN {
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

// slotConfirmed is the slot's confirmed_flush_lsn (0 when it has none).
func slotConfirmed(ctx context.Context, t *testing.T, conn *pgx.Conn, slot string) pglogrepl.LSN {
	t.Helper()
	var s *string
	if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s); err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return 0
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func measure(ctx context.Context, t *testing.T, src *pgcdc.Source, cp cdc.Checkpoint) cdc.SourceLag {
	t.Helper()
	l, err := src.Lag(ctx, cp)
	if err != nil {
		t.Fatalf("Lag: %v", err)
	}
	if (cp != nil && l.Bytes != max(int64(l.Head)-int64(l.Applied), 0)) || (l.Retained >= 0 && l.Retained < l.Bytes) {
		t.Fatalf("inconsistent measurement %+v", l)
	}
	return l
}

// TestLag: Lag before the slot exists (nothing retained), with an open stream, after writes to
// a table the pipeline does not capture (Bytes grows by at least their WAL: the checkpoint
// trails them), after the checkpoint is acknowledged and an idle note moved the slot past those
// writes (Applied reaches them although the checkpoint stays where it was), with the stream
// closed, and after the slot is gone (permanent for a checkpoint; nothing retained without one).
// Other tests share the server, so only bounds that concurrent WAL cannot break are asserted.
func TestLag(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	captured, noise := "pgtb_lag_"+sfx, "pgtb_lagnoise_"+sfx
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+quote(captured)+" (id int PRIMARY KEY)",
		"CREATE TABLE "+quote(noise)+" (id int PRIMARY KEY, pad text)"); err != nil {
		t.Fatal(err)
	}
	src := pgtbSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, IdleCheckpointInterval: 100 * time.Millisecond,
		Tables: []pgcdc.Table{{Name: captured}}}, "DROP TABLE IF EXISTS "+quote(captured), "DROP TABLE IF EXISTS "+quote(noise))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	before := walNow(ctx, t, conn)
	if l := measure(ctx, t, src, nil); l.Retained != -1 || l.Bytes != 0 || l.Applied != 0 || l.Head < uint64(before) {
		t.Fatalf("Lag without a slot: %+v (WAL at %s before)", l, before)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Without a checkpoint, what the slot retains lies ahead -- until the stream streams: it
	// has handed out nothing, so it has passed where it started.
	if l := measure(ctx, t, src, nil); l.Retained < 0 || (l.Applied == 0 && l.Bytes != l.Retained) ||
		(l.Applied != 0 && l.Bytes != max(int64(l.Head)-int64(l.Applied), 0)) {
		t.Fatalf("Lag of a new slot without a checkpoint: %+v", l)
	}

	if _, err := conn.Exec(ctx, "INSERT INTO "+quote(captured)+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	ev := cdctest.NextEvent(ctx, t, st)
	cp := ev.Checkpoint
	l0 := measure(ctx, t, src, cp)
	if l0.Applied != uint64(cpLSN(t, cp)) {
		t.Fatalf("Applied %s, want the unacknowledged checkpoint's %s", pglogrepl.LSN(l0.Applied), cpLSN(t, cp))
	}
	x0 := walNow(ctx, t, conn)
	if _, err := conn.Exec(ctx, "INSERT INTO "+quote(noise)+" SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g"); err != nil {
		t.Fatal(err)
	}
	x1 := walNow(ctx, t, conn)
	l1 := measure(ctx, t, src, cp)
	if l1.Applied != l0.Applied || l1.Bytes < int64(x1)-int64(l1.Applied) || l1.Bytes < l0.Bytes+int64(x1-x0) || l1.Head < uint64(x1) {
		t.Fatalf("after %d bytes of uncaptured WAL: %+v, before them %+v", x1-x0, l1, l0)
	}

	// Acknowledged, the stream goes idle and its idle note proves the noise free of captured
	// changes: the slot, and with it Applied, moves past it.
	if err := st.Ack(ctx, cp); err != nil {
		t.Fatal(err)
	}
	for {
		l := measure(ctx, t, src, cp)
		// The open stream's keepalives may show it first; the slot itself must follow.
		if l.Applied >= uint64(x1) && slotConfirmed(ctx, t, conn, src.Slot()) >= x1 {
			if l.Bytes > int64(l.Head)-int64(x1) {
				t.Fatalf("Bytes %d beyond the WAL after the noise: %+v", l.Bytes, l)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Applied never passed the uncaptured writes at %s: %+v", x1, l)
		case <-time.After(50 * time.Millisecond):
		}
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if l := measure(ctx, t, src, cp); l.Applied < uint64(x1) || l.Retained < 0 {
		t.Fatalf("Lag with the stream closed: %+v", l)
	}
	if err := src.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Lag(ctx, cp); !cdc.IsPermanent(err) || !errors.Is(err, pgcdc.ErrSlotMissing) {
		t.Fatalf("Lag of a checkpoint whose slot is gone: %v", err)
	}
	if l := measure(ctx, t, src, nil); l.Retained != -1 || l.Bytes != 0 {
		t.Fatalf("Lag without slot or checkpoint: %+v", l)
	}
}

// TestLagIdleStreamCaughtUp: an open stream with every delivered change acknowledged has
// passed what the server sent since, even when nothing moves the checkpoint or the slot (idle
// notes off, a write too small for one): Applied reaches the server's position of after the
// write once a keepalive arrived in order behind it -- when the change before it is
// acknowledged only later, from then on. Without that, a quiet pipeline on a server with
// other traffic would look ever further behind.
func TestLagIdleStreamCaughtUp(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	captured, noise := "pgtb_lagidle_"+sfx, "pgtb_lagidlenoise_"+sfx
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+quote(captured)+" (id int PRIMARY KEY)",
		"CREATE TABLE "+quote(noise)+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := pgtbSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, IdleCheckpointInterval: -1,
		StatusInterval: 100 * time.Millisecond, Tables: []pgcdc.Table{{Name: captured}}},
		"DROP TABLE IF EXISTS "+quote(captured), "DROP TABLE IF EXISTS "+quote(noise))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := conn.Exec(ctx, "INSERT INTO "+quote(captured)+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	cp := cdctest.NextEvent(ctx, t, st).Checkpoint
	if err := st.Ack(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+quote(noise)+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	x := walNow(ctx, t, conn)
	for {
		l := measure(ctx, t, src, cp)
		if l.Applied >= uint64(x) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Applied %s never passed the uncaptured write at %s (checkpoint %s)", pglogrepl.LSN(l.Applied), x, cpLSN(t, cp))
		case <-time.After(50 * time.Millisecond):
		}
	}
	// An unacknowledged change holds Applied at the checkpoint: a keepalive then proves nothing.
	if _, err := conn.Exec(ctx, "INSERT INTO "+quote(captured)+" VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	cp2 := cdctest.NextEvent(ctx, t, st).Checkpoint
	if _, err := conn.Exec(ctx, "INSERT INTO "+quote(noise)+" VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	y := walNow(ctx, t, conn)
	time.Sleep(500 * time.Millisecond) // several keepalives; none may count
	if l := measure(ctx, t, src, cp2); l.Applied >= uint64(y) {
		t.Fatalf("Applied %s passed a write behind an unacknowledged change (checkpoint %s)", pglogrepl.LSN(l.Applied), cpLSN(t, cp2))
	}
	// Acknowledged later, with nothing else written (issue 31): the keepalives that came
	// meanwhile, or the next one, count.
	if err := st.Ack(ctx, cp2); err != nil {
		t.Fatal(err)
	}
	for {
		l := measure(ctx, t, src, cp2)
		if l.Applied >= uint64(y) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Applied %s never passed the uncaptured write at %s once the change before it was acknowledged (checkpoint %s)", pglogrepl.LSN(l.Applied), y, cpLSN(t, cp2))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestLagAfterSnapshotCaughtUp (issue 31): a pipeline whose snapshot found nothing has no
// checkpoint, yet an open stream has passed where it started and what the server sent since:
// Applied reaches a write of another table. One whose snapshot delivered a row has passed
// nothing until that row's checkpoint is acknowledged. Without that, a new pipeline on empty
// tables looked ever further behind until a captured row changed.
func TestLagAfterSnapshotCaughtUp(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	empty, one, noise := "pgtb_lagsnapempty_"+sfx, "pgtb_lagsnapone_"+sfx, "pgtb_lagsnapnoise_"+sfx
	if err := execSQL(ctx, dsn, false,
		"CREATE TABLE "+quote(empty)+" (id int PRIMARY KEY)",
		"CREATE TABLE "+quote(one)+" (id int PRIMARY KEY)", "INSERT INTO "+quote(one)+" VALUES (1)",
		"CREATE TABLE "+quote(noise)+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(empty), "DROP TABLE IF EXISTS "+quote(one), "DROP TABLE IF EXISTS "+quote(noise))
	})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	n := 0
	write := func() pglogrepl.LSN {
		t.Helper()
		n++
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%d)", quote(noise), n)); err != nil {
			t.Fatal(err)
		}
		return walNow(ctx, t, conn)
	}
	reaches := func(src *pgcdc.Source, cp cdc.Checkpoint, what string) {
		t.Helper()
		x := write()
		for {
			l := measure(ctx, t, src, cp)
			if l.Applied >= uint64(x) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: Applied %s never passed the other table's write at %s", what, pglogrepl.LSN(l.Applied), x)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	opts := pgcdc.Options{IdleCheckpointInterval: -1, StatusInterval: 100 * time.Millisecond}

	opts.Tables = []pgcdc.Table{{Name: empty}}
	src := pgtbSource(t, dsn, opts)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	reaches(src, nil, "an empty snapshot")
	_ = st.Close()

	opts.Tables = []pgcdc.Table{{Name: one}}
	src = pgtbSource(t, dsn, opts)
	st, err = src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp := cdctest.NextEvent(ctx, t, st).Checkpoint
	y := write()
	time.Sleep(500 * time.Millisecond) // several keepalives; none may count
	if l := measure(ctx, t, src, nil); l.Applied >= uint64(y) || l.Applied != 0 {
		t.Fatalf("Applied %s without a checkpoint and with the snapshot's row not acknowledged, want 0", pglogrepl.LSN(l.Applied))
	}
	if err := st.Ack(ctx, cp); err != nil {
		t.Fatal(err)
	}
	reaches(src, cp, "a snapshot of one row, acknowledged")
}
