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

// The fault tests stop, restart and kill the PostgreSQL server (testenv.RequireFaults): a
// fast or smart shutdown with a stream connected completes, without the slot ever confirming
// an unacknowledged change; every end of the connection -- those shutdowns, an immediate
// restart (a crash), pg_terminate_backend of the walsender -- ends the stream with a
// retryable error, and a new stream from the stored checkpoint delivers what was not
// acknowledged again.

// shutdownSeconds is how long a shutdown may take with a stream connected: generous, for a
// loaded machine; without the shutdown handshake it takes until the stream goes away. testenv
// escalates a stop that took longer to a kill and fails (exit 4).
const shutdownSeconds = "60"

// shutdownBound bounds a testenv command and the end of a stream.
const shutdownBound = 2 * time.Minute

// faultRig is one test's server control, table, source and stream.
type faultRig struct {
	t   *testing.T
	srv *testenv.Servers
	dsn string
	tb  string
	src *pgcdc.Source
	ctx context.Context
	// down is set while the test has the server stopped; the cleanup starts it again.
	down bool
}

func newFaultRig(t *testing.T, opts pgcdc.Options) *faultRig {
	srv := testenv.RequireFaults(t)
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	r := &faultRig{t: t, srv: srv, dsn: dsn, tb: "pgsd_fault_" + suffix(t), ctx: ctx}
	createTable(ctx, t, dsn, r.tb)
	opts.Slot = "pgsd_"
	opts.Tables = []pgcdc.Table{{Name: r.tb}}
	r.src = newSource(t, dsn, opts)
	// Registered after newSource's cleanup, so it runs first: the source's cleanup drops the
	// slot and the table on a running server.
	t.Cleanup(func() {
		if r.down {
			if out, err := srv.Output("start", "postgres"); err != nil {
				t.Errorf("testenv start postgres: %v\n%s", err, out)
			}
		}
	})
	return r
}

func (r *faultRig) open(cp cdc.Checkpoint) cdc.Stream {
	r.t.Helper()
	st, err := r.src.Open(r.ctx, cp)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = st.Close() })
	return st
}

func (r *faultRig) exec(stmts ...string) {
	r.t.Helper()
	if err := execSQL(r.ctx, r.dsn, false, stmts...); err != nil {
		r.t.Fatal(err)
	}
}

func (r *faultRig) insert(id int) {
	r.t.Helper()
	r.exec(fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", quote(r.tb), id, id))
}

// otherWAL writes WAL the stream does not capture, so that the walsender's sent position
// lies beyond every commit the stream saw: the case in which reporting only acknowledged
// positions held a shutdown up.
func (r *faultRig) otherWAL() {
	r.t.Helper()
	other := quote(r.tb + "_other")
	r.exec("CREATE TABLE "+other+" (id int)", "INSERT INTO "+other+" VALUES (1)", "DROP TABLE "+other)
}

// confirmed reads the slot's confirmed position.
func (r *faultRig) confirmed() pglogrepl.LSN {
	r.t.Helper()
	conn, err := pgx.Connect(r.ctx, r.dsn)
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	return slotWatch{conn: conn, slot: r.src.Slot()}.confirmed(r.ctx, r.t)
}

// waitConfirmed waits until the slot confirmed lsn (the stream reports acknowledgements every
// StatusInterval), failing should it ever confirm more.
func (r *faultRig) waitConfirmed(lsn pglogrepl.LSN) {
	r.t.Helper()
	for {
		c := r.confirmed()
		if c > lsn {
			r.t.Fatalf("slot confirmed %s, only %s was acknowledged", c, lsn)
		}
		if c == lsn {
			return
		}
		select {
		case <-r.ctx.Done():
			r.t.Fatalf("the slot never confirmed %s (at %s)", lsn, c)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// control runs `testenv ARGS...` and returns how long it took. It fails the test when the
// command fails (a stop beyond shutdownSeconds) or is still running after shutdownBound --
// then once the stream is closed (which ends any wait for it) and the command has returned.
func (r *faultRig) control(st cdc.Stream, args ...string) time.Duration {
	r.t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = r.srv.Output(args...)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			r.t.Fatalf("testenv %v: %v\n%s", args, err, out)
		}
		return time.Since(start)
	case <-time.After(shutdownBound):
		_ = st.Close()
		<-done
		r.t.Fatalf("testenv %v did not complete within %s with a stream connected", args, shutdownBound)
		return 0
	}
}

// stop stops the server and records that it is down.
func (r *faultRig) stop(st cdc.Stream, mode string) {
	r.t.Helper()
	r.down = true
	took := r.control(st, "stop", "postgres", "--mode", mode, "--timeout", shutdownSeconds)
	r.t.Logf("%s shutdown with a stream connected: %s", mode, took)
}

func (r *faultRig) start() {
	r.t.Helper()
	r.srv.Run("start", "postgres")
	r.down = false
}

// ended waits for the stream to end (draining what it still delivers) and returns its error,
// which must be retryable.
func (r *faultRig) ended(st cdc.Stream) error {
	r.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range st.Events() {
		}
	}()
	select {
	case <-done:
	case <-time.After(shutdownBound):
		r.t.Fatal("the stream did not end")
	}
	err := st.Err()
	if err == nil || cdc.IsPermanent(err) {
		r.t.Fatalf("stream ended with %v, want a retryable failure", err)
	}
	return err
}

// TestFaultFastShutdownIdle: a fast shutdown with a stream connected and every delivered
// change acknowledged completes, the stream ends with ErrServerShuttingDown (retryable), the
// slot stays at the acknowledged position, and a new stream from it continues.
func TestFaultFastShutdownIdle(t *testing.T) {
	r := newFaultRig(t, pgcdc.Options{Snapshot: cdc.SnapshotNever, StatusInterval: 50 * time.Millisecond, IdleCheckpointInterval: -1})
	st := r.open(nil)
	r.insert(1)
	ev := cdctest.NextEvent(r.ctx, t, st)
	if err := st.Ack(r.ctx, ev.Checkpoint); err != nil {
		t.Fatal(err)
	}
	acked := cpLSN(t, ev.Checkpoint)
	r.waitConfirmed(acked)
	r.otherWAL()

	r.stop(st, "fast")
	if err := r.ended(st); !errors.Is(err, pgcdc.ErrServerShuttingDown) {
		t.Errorf("stream ended with %v, want ErrServerShuttingDown", err)
	}
	r.start()
	// At most what was acknowledged; PostgreSQL 15 may even have forgotten the last
	// confirmation (it writes a slot at the shutdown checkpoint only when more than its
	// confirmed position changed), which costs a replay, never a change.
	if c := r.confirmed(); c > acked {
		t.Errorf("after the restart the slot confirmed %s, only %s was acknowledged", c, acked)
	}
	st = r.open(ev.Checkpoint)
	r.insert(2)
	if ev := cdctest.NextEvent(r.ctx, t, st); ev.Op != cdc.Insert || ev.After[0] != int64(2) {
		t.Fatalf("after the restart: %v %v", ev.Op, ev.After)
	}
}

// TestFaultFastShutdownUnacknowledged: a fast shutdown while a delivered change waits for its
// acknowledgement completes, the slot never confirms that change, and a new stream from the
// stored (acknowledged) checkpoint delivers it again, at the same position.
func TestFaultFastShutdownUnacknowledged(t *testing.T) {
	r := newFaultRig(t, pgcdc.Options{Snapshot: cdc.SnapshotNever, StatusInterval: 50 * time.Millisecond, IdleCheckpointInterval: -1})
	st := r.open(nil)
	r.insert(1)
	first := cdctest.NextEvent(r.ctx, t, st)
	if err := st.Ack(r.ctx, first.Checkpoint); err != nil {
		t.Fatal(err)
	}
	acked := cpLSN(t, first.Checkpoint)
	r.waitConfirmed(acked)
	r.insert(2)
	second := cdctest.NextEvent(r.ctx, t, st) // delivered, never acknowledged
	r.otherWAL()

	r.stop(st, "fast")
	r.ended(st)
	r.start()
	if c := r.confirmed(); c > acked {
		t.Fatalf("after the restart the slot confirmed %s; %s was acknowledged, %s not", c, acked, cpLSN(t, second.Checkpoint))
	}
	st = r.open(first.Checkpoint)
	again := cdctest.NextEvent(r.ctx, t, st)
	if again.Op != cdc.Insert || again.After[0] != int64(2) || again.Position.Version() != second.Position.Version() {
		t.Fatalf("replayed %v %v at %v, want the unacknowledged insert at %v", again.Op, again.After, again.Position, second.Position)
	}
}

// TestFaultSmartShutdown: a smart shutdown, which waits for every regular session, completes
// with a stream connected, with a change delivered and not acknowledged; the stream ends with
// a retryable error and the change comes again.
func TestFaultSmartShutdown(t *testing.T) {
	r := newFaultRig(t, pgcdc.Options{Snapshot: cdc.SnapshotNever, StatusInterval: 50 * time.Millisecond, IdleCheckpointInterval: -1})
	st := r.open(nil)
	r.insert(1)
	ev := cdctest.NextEvent(r.ctx, t, st)
	r.otherWAL()

	r.stop(st, "smart")
	r.ended(st)
	r.start()
	st = r.open(nil) // nothing was acknowledged: the slot is where the first stream started
	if again := cdctest.NextEvent(r.ctx, t, st); again.Position.Version() != ev.Position.Version() {
		t.Fatalf("replayed %v, want %v", again.Position, ev.Position)
	}
}

// TestFaultSmartShutdownDuringSnapshot: a smart shutdown does not wait for an initial
// snapshot either -- here one whose consumer takes nothing, which would otherwise hold its
// transaction forever: the stream notices the server refusing new connections and ends with
// ErrServerShuttingDown.
func TestFaultSmartShutdownDuringSnapshot(t *testing.T) {
	r := newFaultRig(t, pgcdc.Options{Snapshot: cdc.SnapshotInitial, SnapshotChunk: 10})
	r.exec(fmt.Sprintf("INSERT INTO %s SELECT g, g FROM generate_series(1, 1000) g", quote(r.tb)))
	st := r.open(nil)
	cdctest.NextEvent(r.ctx, t, st) // the snapshot runs; nothing more is taken

	r.stop(st, "smart")
	if err := r.ended(st); !errors.Is(err, pgcdc.ErrServerShuttingDown) {
		t.Errorf("stream ended with %v, want ErrServerShuttingDown", err)
	}
	r.start()
}

// TestFaultImmediateRestart: a crash (immediate shutdown) ends the stream with a retryable
// error; a new stream from the checkpoint continues.
func TestFaultImmediateRestart(t *testing.T) {
	r := newFaultRig(t, pgcdc.Options{Snapshot: cdc.SnapshotNever})
	st := r.open(nil)
	r.insert(1)
	ev := cdctest.NextEvent(r.ctx, t, st)

	r.control(st, "restart", "postgres", "--mode", "immediate", "--timeout", shutdownSeconds)
	r.ended(st)
	st = r.open(ev.Checkpoint)
	r.insert(2)
	if ev := cdctest.NextEvent(r.ctx, t, st); ev.After[0] != int64(2) {
		t.Fatalf("after the restart: %v", ev.After)
	}
}

// TestFaultTerminateWalsender: pg_terminate_backend of the stream's walsender ends the
// stream with a retryable error, and a stream reopened at once gets the slot (its walsender
// releasing it a moment later: START_REPLICATION retries meanwhile).
func TestFaultTerminateWalsender(t *testing.T) {
	r := newFaultRig(t, pgcdc.Options{Snapshot: cdc.SnapshotNever})
	st := r.open(nil)
	r.insert(1)
	ev := cdctest.NextEvent(r.ctx, t, st)
	r.exec(fmt.Sprintf("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '%s'", r.src.Slot()))
	r.ended(st)
	st = r.open(ev.Checkpoint)
	r.insert(2)
	if ev := cdctest.NextEvent(r.ctx, t, st); ev.After[0] != int64(2) {
		t.Fatalf("after the walsender's end: %v", ev.After)
	}
}
