package pgcdc_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// Environment of TestPostgresCrashResume's pipeline subprocess.
const (
	pgCrashDirEnv   = "PGCDC_CRASH_DIR"
	pgCrashRunEnv   = "PGCDC_CRASH_RUN"
	pgCrashTableEnv = "PGCDC_CRASH_TABLE"
	pgCrashNameEnv  = "PGCDC_CRASH_NAME" // source name, slot and publication, comma-separated
	pgCrashKills    = 5
	pgCrashKeys     = 40      // the writer's rows are ids 1..pgCrashKeys
	pgCrashSentinel = 1 << 30 // the id of the last row written: once it is in the sink, everything is
)

// TestPostgresCrashResume runs a Runner over the real logical replication source, a bbolt
// state file and a sink that appends every applied event to a file, in a subprocess;
// meanwhile it commits transactions of several inserts, updates and deletes, SIGKILLs the
// subprocess at random moments and restarts it from the state file. At the end it checks row
// by row that every committed change reached the sink, that applying the sink log with
// external-version rules gives exactly the table's contents, and that each run delivered
// exactly the changes after the checkpoint it started from, in order: redeliveries only after
// the stored checkpoint.
func TestPostgresCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns subprocesses")
	}
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	table := "crash_" + suffix(t)
	// REPLICA IDENTITY FULL: a delete carries the whole old row, so the checker can tell which
	// committed delete it is by the v it removed.
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v bigint NOT NULL)", quote(table)),
		fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL", quote(table)),
		// A row committed before the first run: the initial snapshot reads it, so the first run
		// stores a checkpoint before any streamed change exists. No run after the first starts
		// without a checkpoint, so no committed change can fall between two snapshots.
		fmt.Sprintf("INSERT INTO %s VALUES (0, 0)", quote(table))); err != nil {
		t.Fatal(err)
	}
	// newSource picks unique slot and publication names and drops them and the table at
	// cleanup, after the children's cleanups (registered later) killed them.
	src := newSource(t, dsn, pgcdc.Options{Tables: []pgcdc.Table{{Name: table}}})
	dir := t.TempDir()
	env := []string{pgCrashDirEnv + "=" + dir, pgCrashTableEnv + "=" + table,
		pgCrashNameEnv + "=" + src.Name() + "," + src.Slot() + "," + src.Publication()}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Quiet spells of the captured table while another one writes, longer than the child's
	// idle-checkpoint interval: kills also land after an idle note moved the slot past the
	// stored checkpoint, and the restart must prove that sound.
	other := "crashother_" + suffix(t)
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("CREATE TABLE %s (id int, v bigint)", quote(other))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(other)) })
	w := &cdctest.CrashWriter{Table: quote(table), Keys: pgCrashKeys, Sentinel: pgCrashSentinel, Rows: map[int]int64{0: 0},
		Quiet: func(ctx context.Context) error {
			if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT g, g FROM generate_series(1, 2000) g", quote(other))); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(300 * time.Millisecond):
				return nil
			}
		},
		Commit: func(ctx context.Context, stmts []string) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				for _, st := range stmts {
					if _, err := tx.Exec(ctx, st); err != nil {
						return err
					}
				}
				return nil
			})
		}}
	log := cdctest.CrashScenario{
		ChildTest: "^TestPostgresCrashChild$", Env: env, RunEnv: pgCrashRunEnv, Dir: dir,
		Kills: pgCrashKills, Sentinel: pgCrashSentinel, Write: w.Run,
	}.Run(ctx, t)

	final := pgTableRows(ctx, t, conn, table)
	cdctest.CheckCrashSinkLog(t, log, w.Changes, final)
	t.Logf("%d transactions, %d changes, %d kills", w.Txs, len(w.Changes), pgCrashKills)
}

// pgTableRows reads the table's final contents from the server.
func pgTableRows(ctx context.Context, t *testing.T, conn *pgx.Conn, table string) map[int]int64 {
	rs, err := conn.Query(ctx, "SELECT id, v FROM "+quote(table))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int]int64{}
	var id int32
	var v int64
	if _, err := pgx.ForEachRow(rs, []any{&id, &v}, func() error { rows[int(id)] = v; return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestPostgresCrashChild is TestPostgresCrashResume's pipeline process; it does nothing in a
// normal run.
func TestPostgresCrashChild(t *testing.T) {
	dir := os.Getenv(pgCrashDirEnv)
	if dir == "" {
		t.Skip("the subprocess of TestPostgresCrashResume")
	}
	dsn := testenv.Require(t, testenv.PostgresDSN)
	run, _ := strconv.Atoi(os.Getenv(pgCrashRunEnv))
	names := strings.Split(os.Getenv(pgCrashNameEnv), ",")
	if len(names) != 3 {
		t.Fatalf("%s: want name,slot,publication", pgCrashNameEnv)
	}
	src, err := pgcdc.New(dsn, &pgcdc.Options{
		Name: names[0], Slot: names[1], Publication: names[2],
		Tables: []pgcdc.Table{{Name: os.Getenv(pgCrashTableEnv)}},
		// Acks reach the slot promptly, so a killed run's successor finds the slot's confirmed
		// position moving as in production, not stuck at the start.
		StatusInterval: 20 * time.Millisecond,
		// Shorter than the writer's quiet spells (CrashWriter.IdlePause).
		IdleCheckpointInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	cdctest.RunCrashChild(t, dir, run, src)
}
