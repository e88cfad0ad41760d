package mysqlcdc_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// Environment of TestMySQLCrashResume's pipeline subprocess.
const (
	myCrashDirEnv    = "MYSQLCDC_CRASH_DIR"
	myCrashRunEnv    = "MYSQLCDC_CRASH_RUN"
	myCrashTableEnv  = "MYSQLCDC_CRASH_TABLE"
	myCrashServerEnv = "MYSQLCDC_CRASH_SERVER_ID"
	myCrashKills     = 5
	myCrashKeys      = 40      // the writer's rows are ids 1..myCrashKeys
	myCrashSentinel  = 1 << 30 // the id of the last row written: once it is in the sink, everything is
)

// TestMySQLCrashResume runs a Runner over the real binlog source, a bbolt state file and a sink
// that appends every applied event to a file, in a subprocess; meanwhile it commits
// transactions of several inserts, updates and deletes, SIGKILLs the subprocess at random
// moments and restarts it from the state file. At the end it checks row by row that every
// committed change reached the sink, that applying the sink log with external-version rules
// gives exactly the table's contents, and that each run delivered exactly the changes after
// the checkpoint it started from, in order: redeliveries only after the stored checkpoint.
func TestMySQLCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns subprocesses")
	}
	s := testServer(t)
	table := "crash_" + suffix()
	if err := s.exec(fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, v BIGINT NOT NULL)", quote(table))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.exec("DROP TABLE IF EXISTS " + quote(table)); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	// A row committed before the first run: the initial snapshot reads it, so the first run
	// stores a checkpoint before any streamed change exists. No run after the first starts
	// without a checkpoint, so no committed change can fall between two snapshots' positions.
	if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (0, 0)", quote(table))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := t.TempDir()
	env := []string{myCrashDirEnv + "=" + dir, myCrashTableEnv + "=" + table,
		myCrashServerEnv + "=" + strconv.FormatUint(uint64(nextServerID()), 10)}

	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := &cdctest.CrashWriter{Table: quote(table), Keys: myCrashKeys, Sentinel: myCrashSentinel, Rows: map[int]int64{0: 0},
		Commit: func(_ context.Context, stmts []string) error {
			for _, st := range append(append([]string{"BEGIN"}, stmts...), "COMMIT") {
				if _, err := c.Execute(st); err != nil {
					return err
				}
			}
			return nil
		}}
	log := cdctest.CrashScenario{
		ChildTest: "^TestMySQLCrashChild$", Env: env, RunEnv: myCrashRunEnv, Dir: dir,
		Kills: myCrashKills, Sentinel: myCrashSentinel, Write: w.Run,
	}.Run(ctx, t)

	final := myTableRows(t, s, table)
	cdctest.CheckCrashSinkLog(t, log, w.Changes, final)
	t.Logf("%d transactions, %d changes, %d kills", w.Txs, len(w.Changes), myCrashKills)
}

// myTableRows reads the table's final contents from the server.
func myTableRows(t *testing.T, s server, table string) map[int]int64 {
	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Execute("SELECT id, v FROM " + quote(table))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int]int64{}
	for i := range res.RowNumber() {
		id, err1 := res.GetInt(i, 0)
		v, err2 := res.GetInt(i, 1)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		rows[int(id)] = v
	}
	return rows
}

// TestMySQLCrashChild is TestMySQLCrashResume's pipeline process; it does nothing in a normal run.
func TestMySQLCrashChild(t *testing.T) {
	dir := os.Getenv(myCrashDirEnv)
	if dir == "" {
		t.Skip("the subprocess of TestMySQLCrashResume")
	}
	s := testServer(t)
	run, _ := strconv.Atoi(os.Getenv(myCrashRunEnv))
	sid, _ := strconv.ParseUint(os.Getenv(myCrashServerEnv), 10, 32)
	table := os.Getenv(myCrashTableEnv)
	src, err := mysqlcdc.New(s.addr, s.user, s.pass, []mysqlcdc.TableName{{Database: s.db, Table: table}}, &mysqlcdc.Options{
		ServerID:   uint32(sid), // the same replica id in every run: a new run displaces a killed one's connection
		SourceName: table,
	})
	if err != nil {
		t.Fatal(err)
	}
	cdctest.RunCrashChild(t, dir, run, src)
}
