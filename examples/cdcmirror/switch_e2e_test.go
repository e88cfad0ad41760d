package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/connecttest"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// hotRows is how many rows the switch tests' writer keeps changing (ids 1..hotRows).
const hotRows = 60

// TestCommandSwitchBack moves one pipeline native -> Debezium -> native on the same index with
// `cdcmirror switch`, on PostgreSQL and MariaDB, while a writer updates, deletes and
// re-inserts hot rows all along: the forward switch after the connector streams
// (snapshot.mode=no_data), the way back with its prepare step while the Debezium pipeline
// runs. A sampler reads the hot rows' document versions throughout: none ever goes backwards.
// The index ends equal to the table row by row, nothing is dead-lettered, and neither
// switch leaves the old path's slot, publication or consumer group behind.
func TestCommandSwitchBack(t *testing.T) {
	conn := connecttest.Require(t)
	eng := mirrortest.Engines[1] // TestCommandSwitchToDebezium takes the other engine
	url := testenv.Require(t, eng.URLVar)
	node := &mirrortest.Node{Node: estest.Connect(t, eng.Name, url)}
	node.EnforceAutoCreateRule(t)
	t.Run("postgres", func(t *testing.T) {
		pgDSN := testenv.Require(t, testenv.PostgresDSN)
		sfx := estest.RandomHex(t, 4)
		pg := mirrortest.NewPostgres(t, pgDSN, "w32_sb_"+sfx)
		slot := "w32_sb_" + sfx
		native := fmt.Sprintf("      type: postgres\n      dsn: \"${%s}\"\n      tables: [public.%s]\n      slot: %s\n      publication: %s\n",
			testenv.PostgresDSN, pg.Name(), slot, slot)
		switchBack(t, conn, node, eng, url, pg, switchCase{
			pipeline: "w32sb" + sfx,
			native:   native,
			connector: func() string {
				conn.CreatePostgres(t, "w32-sb-"+sfx, connecttest.PostgresConnector{TopicPrefix: "w32sb" + sfx,
					Tables: []string{"public." + pg.Name()}, SnapshotMode: "no_data", Slot: "w32_sbd_" + sfx, Publication: "w32_sbd_" + sfx})
				return "w32sb" + sfx + ".public." + pg.Name()
			},
			write: func(ctx context.Context) error { return writeHotPostgres(ctx, pgDSN, pg.Name()) },
			left: func(t *testing.T) string {
				return pgLeft(t, pgDSN, slot)
			},
		})
	})
	t.Run("mariadb", func(t *testing.T) {
		myDSN := testenv.Require(t, testenv.MySQLDSN)
		sfx := estest.RandomHex(t, 4)
		my := mirrortest.NewMySQL(t, myDSN, "w32_sbm_"+sfx)
		native := fmt.Sprintf("      type: mysql\n      dsn: \"${%s}\"\n      tables: [%s]\n      server_id: %d\n",
			testenv.MySQLDSN, my.Name(), mirrortest.ServerID(t))
		switchBack(t, conn, node, eng, url, my, switchCase{
			pipeline: "w32sbm" + sfx,
			native:   native,
			connector: func() string {
				// Other tests' DDL on the shared server that Debezium's parser cannot read (MariaDB's
				// INET6) would stop the connector: skipped, none of it is captured here.
				conn.CreateMariaDB(t, "w32-sbm-"+sfx, connecttest.MariaDBConnector{TopicPrefix: "w32sbm" + sfx,
					Tables: []string{my.DSN.DB + "." + my.Name()}, SnapshotMode: "no_data",
					Extra: map[string]string{"schema.history.internal.skip.unparseable.ddl": "true"}})
				return "w32sbm" + sfx + "." + my.DSN.DB + "." + my.Name()
			},
			write: func(ctx context.Context) error { return writeHotMySQL(ctx, my) },
			left:  func(t *testing.T) string { return "" }, // MariaDB keeps nothing for a binlog reader
		})
	})
}

// switchCase is what TestCommandSwitchBack varies per engine.
type switchCase struct {
	pipeline  string
	native    string        // the native source: YAML
	connector func() string // creates the connector (snapshot.mode=no_data), returns its topic
	write     func(ctx context.Context) error
	left      func(t *testing.T) string // what of the native source is left on its server ("" nothing)
}

func switchBack(t *testing.T, conn *connecttest.Connect, node *mirrortest.Node, eng mirrortest.Engine, url string, tb mirrortest.Table, c switchCase) {
	index := "w32-sb-" + tb.Name()
	node.DeleteAtCleanup(t, index)
	tb.Exec(t, tb.Insert(1, 1000)...)
	dir := t.TempDir()
	group := c.pipeline + "-group"
	nativePath := writeCommandConfig(t, dir, eng, commandConfig{Pipeline: c.pipeline, Source: c.native, SinkID: "es-w32",
		Index: "w32-sb-{table}", Runner: "{batch_max_wait: 50ms, lag_interval: 1s}"})
	run := startCommand(t, nativePath)
	run.waitFor("the native snapshot", node.Converged(t, index, tb, 3200))

	samples := startVersionSampler(t, url, index)
	stopWriter := startWriter(t, c.write)
	// Native -> Debezium: the connector streams while the native pipeline runs.
	topic := c.connector()
	waitTopic(t, conn.Brokers, topic)
	dbzSource := debeziumSource(topic, sourceNameOf(c.native)) + "      group: " + group + "\n"
	dbzPath := filepath.Join(dir, "debezium.yaml")
	if err := os.WriteFile(dbzPath, []byte(strings.Replace(readFile(t, nativePath), c.native, dbzSource, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Refused while the native pipeline runs (its state file is held).
	if err := command(context.Background(), []string{"switch", "--config", dbzPath, "--from", nativePath}, io.Discard, io.Discard, nil); err == nil ||
		!strings.Contains(err.Error(), "the pipeline is running") {
		t.Fatalf("switch beside the running native pipeline: %v", err)
	}
	run.stop()
	out := run.admin("switch", "--config", dbzPath, "--from", nativePath)
	if !strings.Contains(out, "reset the "+sourceTypeOf(c.native)+" checkpoint") {
		t.Errorf("switch to debezium printed:\n%s", out)
	}
	if left := c.left(t); left != "" {
		t.Errorf("after the switch to debezium the native source left %s\n%s", left, out)
	}
	run = startCommand(t, dbzPath)
	run.waitFor("the debezium pipeline applying", func() string {
		if doc, err := liveStatus(context.Background(), run.addr); err != nil || len(doc.Pipelines) != 1 || doc.Pipelines[0].Events < 500 {
			return fmt.Sprintf("not yet (%v)", err)
		}
		return ""
	})

	// Debezium -> native: prepared while the Debezium pipeline runs, switched once it applied a
	// change committed after the prepare step (one partition: everything before it too).
	if err := command(context.Background(), []string{"switch", "--config", nativePath, "--from", dbzPath}, io.Discard, io.Discard, nil); err == nil {
		t.Fatal("switch beside the running debezium pipeline accepted")
	}
	out = run.admin("switch", "--config", nativePath, "--from", dbzPath, "--prepare")
	if !strings.Contains(out, "next: wait until") {
		t.Errorf("switch --prepare printed:\n%s", out)
	}
	tb.Exec(t, tb.Insert(4001, 4001)...)
	run.waitFor("a change after the prepare step", func() string {
		if docs, err := node.Docs(t, index, 4001); err != nil || docs[4001] == nil {
			return fmt.Sprintf("row 4001 not in the index (%v)", err)
		}
		return ""
	})
	run.stop()
	out = run.admin("switch", "--config", nativePath, "--from", dbzPath)
	if !strings.Contains(out, "deleted consumer group "+group) {
		t.Errorf("switch to native printed:\n%s", out)
	}
	run = startCommand(t, nativePath)
	run.waitFor("the native pipeline applying", func() string {
		if doc, err := liveStatus(context.Background(), run.addr); err != nil || len(doc.Pipelines) != 1 || doc.Pipelines[0].Events < 500 {
			return fmt.Sprintf("not yet (%v)", err)
		}
		return ""
	})
	stopWriter()
	tb.Exec(t, mirrortest.Changes(tb, 3101, 3200)...)
	run.waitFor("convergence", node.Converged(t, index, tb, 4001))
	run.stop()
	n, backwards := samples()
	if backwards != "" {
		t.Errorf("a document's version went backwards: %s", backwards)
	}
	if n < 1000 {
		t.Errorf("only %d version samples", n)
	}
	t.Logf("%d version samples of %d hot rows, none backwards", n, hotRows)
	if b, err := os.ReadFile(filepath.Join(dir, c.pipeline+".dlq")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		t.Errorf("dead letters:\n%s", b)
	}
	if groupExists(t, conn.Brokers, topic, group) {
		t.Errorf("consumer group %s left behind", group)
	}
	// drop takes the native pipeline's own slot and publication; nothing of the test is left.
	run.admin("drop", "--config", nativePath, "--indices")
	if left := c.left(t); left != "" {
		t.Errorf("after drop: %s left", left)
	}
}

// sourceNameOf is the name a source: YAML gives its source (its type without name:).
func sourceNameOf(source string) string { return sourceTypeOf(source) }

func sourceTypeOf(source string) string {
	_, rest, _ := strings.Cut(source, "type: ")
	typ, _, _ := strings.Cut(rest, "\n")
	return typ
}

// pgLeft names the slot and publication called name that exist ("" none).
func pgLeft(t *testing.T, dsn, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var slots, pubs int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_publication WHERE pubname = $1", name).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	var left []string
	if slots > 0 {
		left = append(left, "replication slot "+name)
	}
	if pubs > 0 {
		left = append(left, "publication "+name)
	}
	return strings.Join(left, " and ")
}

// groupExists says whether the consumer group exists (deleting it when it does, without
// members: the question is only asked once nothing may use it).
func groupExists(t *testing.T, brokers []string, topic, group string) bool {
	t.Helper()
	mon, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: brokers, Topics: []string{topic}, Group: group}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	ctx, cancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
	defer cancel()
	deleted, err := mon.DeleteGroup(ctx)
	if err != nil {
		t.Fatalf("consumer group %s: %v", group, err)
	}
	return deleted
}

// startVersionSampler reads the hot rows' documents (real time _mget) until the returned
// function is called, which reports how many versions it read and the first that went
// backwards ("" none). It uses plain HTTP: it runs on a goroutine of its own.
func startVersionSampler(t *testing.T, url, index string) func() (int, string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n int
	var backwards string
	ids := make([]string, hotRows)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	body, _ := json.Marshal(map[string]any{"ids": ids})
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := map[string]int64{}
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(url, "/")+"/"+index+"/_mget?realtime=true", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				var ans struct {
					Docs []estest.Doc `json:"docs"`
				}
				if res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(&ans) == nil {
					for _, d := range ans.Docs {
						if !d.Found {
							continue
						}
						n++
						if v, seen := last[d.ID]; seen && d.Version < v && backwards == "" {
							backwards = fmt.Sprintf("document %s: version %d after %d", d.ID, d.Version, v)
						}
						last[d.ID] = max(last[d.ID], d.Version)
					}
				}
				res.Body.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() (int, string) {
		cancel()
		wg.Wait()
		return n, backwards
	}
}

// writeHotPostgres updates, deletes and re-inserts rows 1..hotRows until ctx ends.
func writeHotPostgres(ctx context.Context, dsn, table string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for ctx.Err() == nil {
		id := 1 + r.IntN(hotRows)
		var q string
		switch r.IntN(5) {
		case 0:
			q = "DELETE FROM " + table + " WHERE id = $1"
		case 1:
			q = "INSERT INTO " + table + " (id, name, qty, price, active, doc) VALUES ($1, 'again', 1, 1.5, true, '{}') ON CONFLICT (id) DO NOTHING"
		default:
			q = "UPDATE " + table + " SET qty = qty + 1, name = left(name, 40) || '+' WHERE id = $1"
		}
		if _, err := conn.Exec(ctx, q, id); err != nil && ctx.Err() == nil {
			return err
		}
		time.Sleep(3 * time.Millisecond)
	}
	return nil
}

// writeHotMySQL is writeHotPostgres on MariaDB.
func writeHotMySQL(ctx context.Context, my *mirrortest.MySQL) error {
	c, err := client.ConnectWithContext(ctx, my.DSN.Addr, my.DSN.User, my.DSN.Password, my.DSN.DB, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for ctx.Err() == nil {
		id := 1 + r.IntN(hotRows)
		var q string
		switch r.IntN(5) {
		case 0:
			q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", my.Table, id)
		case 1:
			q = fmt.Sprintf("INSERT IGNORE INTO %s (id, name, qty, price, views, active, doc) VALUES (%d, 'again', 1, 1.5, %d, true, '{}')",
				my.Table, id, mirrortest.ViewsOf(id))
		default:
			q = fmt.Sprintf("UPDATE %s SET qty = qty + 1, name = CONCAT(LEFT(name, 40), '+') WHERE id = %d", my.Table, id)
		}
		if _, err := c.Execute(q); err != nil && ctx.Err() == nil {
			return err
		}
		time.Sleep(3 * time.Millisecond)
	}
	return nil
}
