package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/connecttest"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// debeziumConfig writes a cdcmirror configuration whose pipeline reads Debezium's topic (or
// its native source, when source is not debezium's) into the engine's index mir-dbz-<table>.
func debeziumConfig(t *testing.T, dir string, eng mirrortest.Engine, source string) string {
	return writeCommandConfig(t, dir, eng, commandConfig{Pipeline: "dbz", Source: source, SinkID: "es-dbz",
		Index: "mir-dbz-{table}", Runner: "{batch_max_wait: 50ms, lag_interval: 1s}"})
}

// commandConfig is what the end-to-end tests vary of a one-pipeline configuration.
type commandConfig struct {
	Pipeline  string
	Source    string // the source: YAML, indented for it
	SinkID    string
	Index     string
	SinkExtra string // more sink config lines, indented for them
	Runner    string // the runner: value
}

// writeCommandConfig writes c as dir/cdcmirror.yaml (state and dead-letter file in dir, the
// engine's sink) and drops the pipeline when the test ends; it returns the file's path.
func writeCommandConfig(t *testing.T, dir string, eng mirrortest.Engine, c commandConfig) string {
	t.Helper()
	cfgText := "state: " + filepath.Join(dir, "state.db") + "\npipelines:\n" +
		"  - name: " + c.Pipeline + "\n    source:\n" + c.Source +
		fmt.Sprintf(`    sinks:
      - type: elasticsearch
        config:
          id: %s
          url: "${%s}"
          index: "%s"
          auth: {type: none}
%s%s          number_of_replicas: 0
`, c.SinkID, eng.URLVar, c.Index, c.SinkExtra, eng.MappingYAML("          ")) +
		"    dlq: " + filepath.Join(dir, c.Pipeline+".dlq") + "\n    runner: " + c.Runner + "\n"
	cfgPath := filepath.Join(dir, "cdcmirror.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropAtCleanup(t, cfgPath, c.Pipeline) })
	return cfgPath
}

// dropAtCleanup drops the pipeline's source objects (slot, publication, consumer group) and
// state. Just after a command stops, the server may still hold its slot active for a moment,
// and Drop refuses an active slot (ErrRunning): it is tried again for a minute, and a slot left
// behind fails the test (a leftover slot holds WAL on the shared server for every later test).
func dropAtCleanup(t *testing.T, cfgPath, pipeline string) {
	cfg, err := mirror.LoadConfig(cfgPath)
	if err != nil {
		return // the test never wrote a loadable configuration: nothing was created from it
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = mirror.Drop(ctx, cfg, pipeline, nil)
		cancel()
		if err == nil {
			return
		}
		if !errors.Is(err, mirror.ErrRunning) {
			// Not a slot still held: a source a test made unreachable on purpose, say. Drop
			// repeats nothing then; say so without failing the test.
			t.Logf("cleanup: dropping pipeline %s: %v", pipeline, err)
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cleanup: dropping pipeline %s: %v", pipeline, err)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// debeziumSource is the source: YAML of a debezium pipeline reading topic.
func debeziumSource(topic, name string) string {
	return fmt.Sprintf("      type: debezium\n      name: %s\n      brokers: [\"${TRIBUTARY_KAFKA_BROKERS}\"]\n      topics: [%s]\n"+
		"      session_timeout: 6s\n", name, topic)
}

// TestCommandDebezium runs what the binary runs over Debezium's topics of a PostgreSQL and a
// MariaDB table (two partitions each), captured by real Debezium connectors in Kafka Connect:
// 2000 rows reach the index through the connector's snapshot while a writer updates, deletes
// and inserts rows, and every change after through its stream; at the end the index equals
// the table row by row and nothing was dead-lettered.
func TestCommandDebezium(t *testing.T) {
	conn := connecttest.Require(t)
	partitions := map[string]string{"topic.creation.default.partitions": "2", "topic.creation.default.replication.factor": "1"}
	t.Run("postgres", func(t *testing.T) {
		pgDSN := testenv.Require(t, testenv.PostgresDSN)
		mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
			sfx := estest.RandomHex(t, 4)
			pg := mirrortest.NewPostgres(t, pgDSN, "mir_dbz_"+sfx)
			commandDebezium(t, node, pg, eng, func() string {
				conn.CreatePostgres(t, "mir-dbz-"+sfx, connecttest.PostgresConnector{TopicPrefix: "mirdbz" + sfx,
					Tables: []string{"public." + pg.Name()}, Extra: partitions})
				return "mirdbz" + sfx + ".public." + pg.Name()
			}, func(ctx context.Context) error { return writeRows(ctx, pgDSN, pg.Name()) })
		})
	})
	t.Run("mariadb", func(t *testing.T) {
		myDSN := testenv.Require(t, testenv.MySQLDSN)
		mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
			sfx := estest.RandomHex(t, 4)
			my := mirrortest.NewMySQL(t, myDSN, "mir_dbz_my_"+sfx)
			commandDebezium(t, node, my, eng, func() string {
				conn.CreateMariaDB(t, "mir-dbz-my-"+sfx, connecttest.MariaDBConnector{TopicPrefix: "mirdbzmy" + sfx,
					Tables: []string{my.DSN.DB + "." + my.Name()}, Extra: partitions})
				return "mirdbzmy" + sfx + "." + my.DSN.DB + "." + my.Name()
			}, func(ctx context.Context) error { return writeMySQLRows(ctx, my) })
		})
	})
}

func commandDebezium(t *testing.T, node *mirrortest.Node, tb mirrortest.Table, eng mirrortest.Engine, connector func() string,
	write func(ctx context.Context) error) {
	index := "mir-dbz-" + tb.Name()
	node.DeleteAtCleanup(t, index)
	tb.Exec(t, tb.Insert(1, 2000)...) // the connector's snapshot reads these

	// The writer starts with the connector, so changes race its snapshot.
	stopWriter := startWriter(t, write)
	topic := connector()
	dir := t.TempDir()
	cfgPath := debeziumConfig(t, dir, eng, debeziumSource(topic, "shop"))
	run := startCommand(t, cfgPath)
	run.waitFor("documents", func() string {
		if docs, err := node.Docs(t, index, 3100); err != nil || len(docs) < 1000 {
			return fmt.Sprintf("%d documents (%v)", len(docs), err)
		}
		return ""
	})
	stopWriter()
	tb.Exec(t, mirrortest.Changes(tb, 3101, 3200)...)
	run.waitFor("convergence", node.Converged(t, index, tb, 3200))
	// The group's lag behind the topic: measured, and nothing left once everything is applied.
	run.waitFor("no lag", func() string {
		doc, err := liveStatus(context.Background(), run.addr)
		if err != nil || len(doc.Pipelines) != 1 || doc.Pipelines[0].Lag == nil {
			return fmt.Sprintf("no lag reported (%v)", err)
		}
		if l := doc.Pipelines[0].Lag; l.Error != "" || l.Bytes != 0 {
			return fmt.Sprintf("lag %+v", *l)
		}
		return ""
	})
	status := run.admin("status", "--config", cfgPath, "--metrics-addr", run.addr)
	if !strings.Contains(status, "lag: the consumer group is 0 records behind its topics' ends") {
		t.Errorf("status:\n%s", status)
	}
	run.stop()
	if b, err := os.ReadFile(filepath.Join(dir, "dbz.dlq")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		t.Errorf("dead letters:\n%s", b)
	}
	// drop deletes the consumer group with its offsets: the next run reads the topic anew.
	if out := run.admin("drop", "--config", cfgPath, "--indices"); !strings.Contains(out, "deleted consumer group tributary-dbz and its offsets") {
		t.Errorf("drop printed:\n%s", out)
	}
}

// TestCommandSwitchToDebezium moves a running native PostgreSQL pipeline to Debezium on the
// same index, the documented way: the connector starts with snapshot.mode=no_data while the
// native pipeline runs; once it streams, the native pipeline stops, `cdcmirror switch` resets
// its checkpoint and drops its slot and publication, and the same pipeline (same name, state
// and source name) restarts as type debezium. A writer runs all along; the index ends equal to
// the table row by row, with no refusal and no dead letter, and neither the native slot nor
// the consumer group is left behind.
func TestCommandSwitchToDebezium(t *testing.T) {
	conn := connecttest.Require(t)
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	eng := mirrortest.Engines[0]
	url := testenv.Require(t, eng.URLVar)
	node := &mirrortest.Node{Node: estest.Connect(t, eng.Name, url)}
	node.EnforceAutoCreateRule(t)
	sfx := estest.RandomHex(t, 4)
	pg := mirrortest.NewPostgres(t, pgDSN, "mir_sw_"+sfx)
	index := "mir-dbz-" + pg.Name()
	node.DeleteAtCleanup(t, index)
	pg.Exec(t, pg.Insert(1, 1000)...)
	dir := t.TempDir()
	slot := "mir_sw_" + sfx
	native := fmt.Sprintf("      type: postgres\n      dsn: \"${%s}\"\n      tables: [public.%s]\n      slot: %s\n      publication: %s\n",
		testenv.PostgresDSN, pg.Name(), slot, slot)
	cfgPath := debeziumConfig(t, dir, eng, native)
	run := startCommand(t, cfgPath)
	run.waitFor("the native snapshot", node.Converged(t, index, pg, 3200))

	stopWriter := startWriter(t, func(ctx context.Context) error { return writeRows(ctx, pgDSN, pg.Name()) })
	conn.CreatePostgres(t, "mir-sw-"+sfx, connecttest.PostgresConnector{TopicPrefix: "mirsw" + sfx,
		Tables: []string{"public." + pg.Name()}, SnapshotMode: "no_data", Slot: "mir_swd_" + sfx, Publication: "mir_swd_" + sfx})
	topic := "mirsw" + sfx + ".public." + pg.Name()
	// The connector streams once the writer's changes reach its topic.
	waitTopic(t, conn.Brokers, topic)
	run.stop()

	// The same pipeline, state and source name ("postgres", the native source's default):
	// the same index, claimed by the same owner. switch resets the native checkpoint and drops
	// the native slot and publication, which would hold WAL for nobody.
	group := "mir-sw-" + sfx
	dbzPath := filepath.Join(dir, "debezium.yaml")
	if err := os.WriteFile(dbzPath, []byte(strings.Replace(readFile(t, cfgPath), native, debeziumSource(topic, "postgres")+"      group: "+group+"\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := run.admin("switch", "--config", dbzPath, "--from", cfgPath)
	if !strings.Contains(out, "dropped replication slot "+slot) || !strings.Contains(out, "dropped publication "+slot) {
		t.Errorf("switch printed:\n%s", out)
	}
	if left := pgLeft(t, pgDSN, slot); left != "" {
		t.Errorf("after the switch: %s left", left)
	}
	run = startCommand(t, dbzPath)
	run.waitFor("the switched pipeline", func() string {
		doc, err := liveStatus(context.Background(), run.addr)
		if err != nil || len(doc.Pipelines) != 1 || doc.Pipelines[0].Events == 0 {
			return fmt.Sprintf("%v", err)
		}
		return ""
	})
	stopWriter()
	pg.Exec(t, mirrortest.Changes(pg, 3101, 3200)...)
	run.waitFor("convergence", node.Converged(t, index, pg, 3200))
	run.stop()
	if b, err := os.ReadFile(filepath.Join(dir, "dbz.dlq")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		t.Errorf("dead letters:\n%s", b)
	}
	if out := run.admin("drop", "--config", dbzPath, "--indices"); !strings.Contains(out, "deleted consumer group "+group) {
		t.Errorf("drop printed:\n%s", out)
	}
}

// startWriter runs write until the returned stop is called (or the test ends); stop fails t
// when the writer failed.
func startWriter(t *testing.T, write func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var err error
	wg.Add(1)
	go func() {
		defer wg.Done()
		err = write(ctx)
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() {
		t.Helper()
		cancel()
		wg.Wait()
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitTopic waits (bounded) until topic exists and holds a record. The consumer group it reads
// with is deleted when the test ends.
func waitTopic(t *testing.T, brokers []string, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
	defer cancel()
	t.Cleanup(func() { deleteGroupAtEnd(t, brokers, topic, "wait-"+topic) })
	for {
		c, err := kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: brokers, Topics: []string{topic}, Group: "wait-" + topic}, nil)
		if err == nil {
			msgs, err := c.Fetch(ctx)
			c.Close()
			if err == nil && len(msgs) > 0 {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %s: no record within %v (%v)", topic, mirrortest.WaitBound, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deleteGroupAtEnd deletes a consumer group the test made, waiting (bounded) for members that
// just left to be gone.
func deleteGroupAtEnd(t *testing.T, brokers []string, topic, group string) {
	mon, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: brokers, Topics: []string{topic}, Group: group}, nil)
	if err != nil {
		t.Errorf("consumer group %s: %v", group, err)
		return
	}
	defer mon.Close()
	ctx, cancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
	defer cancel()
	for {
		_, err := mon.DeleteGroup(ctx)
		if err == nil {
			return
		}
		if !errors.Is(err, kafkaqueue.ErrGroupInUse) || ctx.Err() != nil {
			t.Errorf("deleting consumer group %s: %v", group, err)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestCommandDebeziumScaleOut runs two cdcmirror processes of one pipeline (their own state
// files, one consumer group, one sink shared_owner) over a topic of four partitions while a
// writer changes the table: both write the same index; one stops and its partitions move to
// the other, then it comes back and takes a share again. The index ends equal to the table row
// by row, and each process applied events.
func TestCommandDebeziumScaleOut(t *testing.T) {
	conn := connecttest.Require(t)
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	eng := mirrortest.Engines[1]
	url := testenv.Require(t, eng.URLVar)
	node := &mirrortest.Node{Node: estest.Connect(t, eng.Name, url)}
	node.EnforceAutoCreateRule(t)
	sfx := estest.RandomHex(t, 4)
	pg := mirrortest.NewPostgres(t, pgDSN, "mir_so_"+sfx)
	index := "mir-dbz-" + pg.Name()
	node.DeleteAtCleanup(t, index)
	pg.Exec(t, pg.Insert(1, 2000)...)
	conn.CreatePostgres(t, "mir-so-"+sfx, connecttest.PostgresConnector{TopicPrefix: "mirso" + sfx,
		Tables: []string{"public." + pg.Name()},
		Extra:  map[string]string{"topic.creation.default.partitions": "4", "topic.creation.default.replication.factor": "1"}})
	topic := "mirso" + sfx + ".public." + pg.Name()
	source := debeziumSource(topic, "shop") + "      group: mir-so-" + sfx + "\n"
	var cfgs [2]string
	for i := range cfgs {
		cfgs[i] = debeziumConfig(t, t.TempDir(), eng, source)
		text := strings.Replace(readFile(t, cfgs[i]), "          id: es-dbz\n", "          id: es-dbz\n          shared_owner: mir-so-"+sfx+"\n", 1)
		if err := os.WriteFile(cfgs[i], []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	stopWriter := startWriter(t, func(ctx context.Context) error { return writeRows(ctx, pgDSN, pg.Name()) })
	a := startCommand(t, cfgs[0])
	b := startCommand(t, cfgs[1])
	events := func(r *commandRun) int64 {
		doc, err := liveStatus(context.Background(), r.addr)
		if err != nil || len(doc.Pipelines) != 1 {
			return -1
		}
		return doc.Pipelines[0].Events
	}
	both := func() string {
		if ea, eb := events(a), events(b); ea <= 0 || eb <= 0 {
			return fmt.Sprintf("events: %d and %d", ea, eb)
		}
		return ""
	}
	a.waitFor("both processes applying events", both)
	a.stop() // its partitions move to b
	// Rows inserted now reach the index through b alone.
	before := events(b)
	pg.Exec(t, pg.Insert(5001, 5010)...)
	b.waitFor("the other process taking over", func() string {
		docs, err := node.Docs(t, index, 5010)
		if err != nil {
			return err.Error()
		}
		for id := int64(5001); id <= 5010; id++ {
			if docs[id] == nil {
				return fmt.Sprintf("document %d missing", id)
			}
		}
		if events(b) <= before {
			return "b applied nothing new"
		}
		return ""
	})
	a = startCommand(t, cfgs[0]) // back: the group gives it a share again
	// Rows for it to apply until it does, ids 6001..7990 at most however long the rejoin takes
	// (the writer's ids stay below 3101, the last changes' are 8001..8100).
	next := 6001
	a.waitFor("the returning process applying events", func() string {
		if events(a) <= 0 {
			if next < 8000 {
				pg.Exec(t, pg.Insert(next, next+9)...)
				next += 10
			}
			return "no events yet"
		}
		return ""
	})
	stopWriter()
	pg.Exec(t, mirrortest.Changes(pg, 8001, 8100)...)
	a.waitFor("convergence", node.Converged(t, index, pg, 8100))
	a.stop()
	b.stop()
}
