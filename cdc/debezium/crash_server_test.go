package debezium_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/debezium"
	"github.com/tributary-dev/tributary/internal/connecttest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// Environment of TestCrashResume's pipeline subprocess.
const (
	crashDirEnv   = "DEBEZIUM_CRASH_DIR"
	crashRunEnv   = "DEBEZIUM_CRASH_RUN"
	crashTopicEnv = "DEBEZIUM_CRASH_TOPIC" // topic,group
	crashKills    = 4
	crashKeys     = 40
	crashSentinel = 1 << 30
)

// TestCrashResume SIGKILLs a pipeline reading Debezium's topic (two partitions) through a
// consumer group at random moments while a writer commits changes, restarting it each time:
// every committed change reaches the sink, and the sink log applied with external versions
// is the table. Offsets are committed only past acknowledged events, so a kill repeats what
// was not acknowledged and loses nothing.
func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns subprocesses")
	}
	dsn := testenv.Require(t, testenv.PostgresDSN)
	brokers := testenv.Require(t, "TRIBUTARY_KAFKA_BROKERS")
	conn := connecttest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	table := fmt.Sprintf("dbzcrash_%d", rand.Uint32())
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	for _, s := range []string{
		fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v bigint NOT NULL)", table),
		// The whole old row in a delete: the checker tells committed deletes apart by v.
		fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL", table),
		// Read by the connector's snapshot: the first run stores a checkpoint before any change.
		fmt.Sprintf("INSERT INTO %s VALUES (0, 0)", table),
	} {
		if _, err := db.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { pgDrop(dsn, "DROP TABLE IF EXISTS "+table) })
	prefix := "dbzcrash" + table[len("dbzcrash_"):]
	conn.CreatePostgres(t, table, connecttest.PostgresConnector{TopicPrefix: prefix, Tables: []string{"public." + table},
		Extra: map[string]string{"topic.creation.default.partitions": "2", "topic.creation.default.replication.factor": "1"}})

	dir := t.TempDir()
	group := "dbz-crash-" + table
	env := []string{crashDirEnv + "=" + dir, crashTopicEnv + "=" + prefix + ".public." + table + "," + group,
		"TRIBUTARY_KAFKA_BROKERS=" + brokers}
	w := &cdctest.CrashWriter{Table: table, Keys: crashKeys, Sentinel: crashSentinel, Rows: map[int]int64{0: 0},
		Commit: func(ctx context.Context, stmts []string) error {
			return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
				for _, st := range stmts {
					if _, err := tx.Exec(ctx, st); err != nil {
						return err
					}
				}
				return nil
			})
		}}
	log := cdctest.CrashScenario{
		ChildTest: "^TestCrashChild$", Env: env, RunEnv: crashRunEnv, Dir: dir,
		Kills: crashKills, Sentinel: crashSentinel, Write: w.Run,
	}.Run(ctx, t)
	// The sentinel is the last commit, but the other partition may still have been behind when
	// it arrived: one more run catches up until every committed change is in the log.
	child := cdctest.StartCrashChild(t, "^TestCrashChild$", append(env, crashRunEnv+"="+strconv.Itoa(crashKills+1)))
	for missing := crashMissing(t, dir, w.Changes); missing != ""; missing = crashMissing(t, dir, w.Changes) {
		select {
		case <-ctx.Done():
			t.Fatalf("the last run never delivered %s", missing)
		case <-child.Done():
			t.Fatalf("the last run exited before it delivered %s", missing)
		case <-time.After(50 * time.Millisecond):
		}
	}
	child.Kill(t)
	log = cdctest.ReadFile(t, filepath.Join(dir, "sink.log"))

	final := map[int]int64{}
	rs, err := db.Query(ctx, "SELECT id, v FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	var id int32
	var v int64
	if _, err := pgx.ForEachRow(rs, []any{&id, &v}, func() error { final[int(id)] = v; return nil }); err != nil {
		t.Fatal(err)
	}
	cdctest.CheckCrashSinkLogAtLeastOnce(t, log, w.Changes, final)
	t.Logf("%d transactions, %d changes, %d kills", w.Txs, len(w.Changes), crashKills)
}

// crashMissing names a committed change the sink log lacks, or returns "".
func crashMissing(t *testing.T, dir string, changes []cdctest.CrashChange) string {
	have := map[string]bool{}
	for _, line := range strings.Split(cdctest.ReadFile(t, filepath.Join(dir, "sink.log")), "\n") {
		if f := strings.Fields(line); len(f) == 7 && f[0] == "E" {
			have[f[2]+" "+f[3]+" "+f[5]] = true
		}
	}
	for _, c := range changes {
		if !have[fmt.Sprintf("%d %d %d", c.ID, c.V, c.Op)] {
			return fmt.Sprintf("%+v", c)
		}
	}
	return ""
}

// TestCrashChild is TestCrashResume's pipeline process; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the subprocess of TestCrashResume")
	}
	run, _ := strconv.Atoi(os.Getenv(crashRunEnv))
	topic, group, _ := strings.Cut(os.Getenv(crashTopicEnv), ",")
	brokers := strings.Split(testenv.Require(t, "TRIBUTARY_KAFKA_BROKERS"), ",")
	src, err := debezium.New(func(ctx context.Context) (queue.Consumer, error) {
		// A static member: each run takes the killed one's partitions back at once.
		return kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: brokers, Topics: []string{topic}, Group: group,
			SessionTimeout: 6 * time.Second, InstanceID: "crash-child"}, nil)
	}, &debezium.Options{Name: "pg"})
	if err != nil {
		t.Fatal(err)
	}
	cdctest.RunCrashChild(t, dir, run, src)
}
