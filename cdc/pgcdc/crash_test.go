package pgcdc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
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
	w := &pgCrashWriter{conn: conn, table: table, rows: map[int]int64{0: 0}}
	log := cdctest.CrashScenario{
		ChildTest: "^TestPostgresCrashChild$", Env: env, RunEnv: pgCrashRunEnv, Dir: dir,
		Kills: pgCrashKills, Sentinel: pgCrashSentinel, Write: w.run,
	}.Run(ctx, t)

	final := w.tableRows(ctx, t)
	cdctest.CheckCrashSinkLog(t, log, w.changes, final)
	t.Logf("%d transactions, %d changes, %d kills", w.txs, len(w.changes), pgCrashKills)
}

// pgCrashWriter commits numbered transactions of inserts, updates and deletes and remembers
// every committed change. Each change writes a distinct v (so a change is recognisable in the
// sink by its key, operation and v); deletes are recognised by the v of the row they removed.
type pgCrashWriter struct {
	conn    *pgx.Conn
	table   string
	rows    map[int]int64         // committed contents
	changes []cdctest.CrashChange // committed changes in commit order
	txs     int
}

func (w *pgCrashWriter) run(ctx context.Context, stop <-chan struct{}) error {
	q := quote(w.table)
	for tx := 1; ; tx++ {
		final := false
		select {
		case <-stop:
			final = true
		default:
		}
		rows := map[int]int64{}
		for k, v := range w.rows {
			rows[k] = v
		}
		var stmts []string
		var chs []cdctest.CrashChange
		if final {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", q, pgCrashSentinel, pgCrashSentinel))
			chs = append(chs, cdctest.CrashChange{ID: pgCrashSentinel, Op: cdc.Insert, V: pgCrashSentinel})
		} else {
			for seq := range 2 + rand.IntN(cdctest.CrashMaxTxEvents-1) {
				id := 1 + rand.IntN(pgCrashKeys)
				v := int64(tx)*100 + int64(seq)
				old, exists := rows[id]
				switch {
				case !exists:
					stmts = append(stmts, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", q, id, v))
					chs, rows[id] = append(chs, cdctest.CrashChange{ID: id, Op: cdc.Insert, V: v}), v
				case rand.IntN(3) == 0:
					stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE id = %d", q, id))
					chs = append(chs, cdctest.CrashChange{ID: id, Op: cdc.Delete, V: old})
					delete(rows, id)
				default:
					stmts = append(stmts, fmt.Sprintf("UPDATE %s SET v = %d WHERE id = %d", q, v, id))
					chs, rows[id] = append(chs, cdctest.CrashChange{ID: id, Op: cdc.Update, V: v}), v
				}
			}
		}
		if err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
			for _, st := range stmts {
				if _, err := tx.Exec(ctx, st); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		w.rows, w.changes, w.txs = rows, append(w.changes, chs...), tx
		if final {
			return nil
		}
		// A short pause keeps the volume moderate, so the test stays quick.
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
	}
}

// tableRows reads the table's final contents from the server.
func (w *pgCrashWriter) tableRows(ctx context.Context, t *testing.T) map[int]int64 {
	rs, err := w.conn.Query(ctx, "SELECT id, v FROM "+quote(w.table))
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
	src, err := pgcdc.New(dsn, pgcdc.Options{
		Name: names[0], Slot: names[1], Publication: names[2],
		Tables: []pgcdc.Table{{Name: os.Getenv(pgCrashTableEnv)}},
		// Acks reach the slot promptly, so a killed run's successor finds the slot's confirmed
		// position moving as in production, not stuck at the start.
		StatusInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	cdctest.RunCrashChild(t, dir, run, src)
}
