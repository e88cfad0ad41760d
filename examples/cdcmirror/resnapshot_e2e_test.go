package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestCommandResnapshot runs what the binary runs over a PostgreSQL and a MariaDB pipeline
// that start without a snapshot, so the rows already in the table reach the index only
// through a re-snapshot: `cdcmirror resnapshot` asks the running mirror (POST
// /admin/resnapshot) while a writer updates, deletes and inserts rows; /status, `status` and
// /metrics follow it; at the end the index equals the table row by row.
func TestCommandResnapshot(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		pgDSN := testenv.Require(t, testenv.PostgresDSN)
		mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
			sfx := estest.RandomHex(t, 4)
			pg := mirrortest.NewPostgres(t, pgDSN, "mir_rs_"+sfx)
			slot := "mir_rs_" + sfx
			source := fmt.Sprintf("      type: postgres\n      dsn: \"${%s}\"\n      tables: [public.%s]\n      slot: %s\n      publication: %s\n",
				testenv.PostgresDSN, pg.Name(), slot, slot)
			commandResnapshot(t, eng, node, pg, "public."+pg.Name(), source, func(ctx context.Context) error {
				return writeRows(ctx, pgDSN, pg.Name())
			})
		})
	})
	t.Run("mariadb", func(t *testing.T) {
		myDSN := testenv.Require(t, testenv.MySQLDSN)
		mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
			sfx := estest.RandomHex(t, 4)
			my := mirrortest.NewMySQL(t, myDSN, "mir_rs_my_"+sfx)
			signal := "mir_rs_sig_" + sfx
			t.Cleanup(func() { my.Exec(t, "DROP TABLE IF EXISTS "+signal) })
			source := fmt.Sprintf("      type: mysql\n      dsn: \"${%s}\"\n      tables: [%s]\n      server_id: %d\n      signal_table: %s\n",
				testenv.MySQLDSN, my.Name(), mirrortest.ServerID(t), signal)
			commandResnapshot(t, eng, node, my, my.DSN.DB+"."+my.Name(), source, func(ctx context.Context) error {
				return writeMySQLRows(ctx, my)
			})
		})
	})
}

// commandResnapshot is TestCommandResnapshot with one source: source is the YAML of its
// settings (indented for source:), table its qualified name, write the writer.
func commandResnapshot(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node, tb mirrortest.Table, table, source string,
	write func(ctx context.Context) error) {
	index := "mir-rs-" + tb.Name()
	node.DeleteAtCleanup(t, index)
	dir := t.TempDir()
	cfgPath := writeCommandConfig(t, dir, eng, commandConfig{Pipeline: "pg", Source: source + "      snapshot: never\n      snapshot_chunk: 64\n",
		SinkID: "es-rs", Index: "mir-rs-{table}", Runner: "{batch_max_wait: 50ms}"})
	tb.Exec(t, tb.Insert(1, 3000)...) // before the stream starts: not streamed

	run := startCommand(t, cfgPath)
	// The slot is created after the command listens: rows go in until one is streamed.
	next := 3001
	run.waitFor("streaming", func() string {
		if docs, err := node.Docs(t, index, 4000); err == nil && len(docs) > 0 {
			return ""
		}
		if next <= 3050 {
			tb.Exec(t, tb.Insert(next, next)...)
			next++
		}
		return "no document streamed yet"
	})

	// A writer changes rows all through the re-snapshot.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		werr = write(ctx)
	}()
	defer func() { cancel(); wg.Wait() }()

	out := run.admin("resnapshot", "--config", cfgPath, "--metrics-addr", run.addr, "--table", table)
	if !strings.HasPrefix(out, "re-snapshot ") || !strings.Contains(out, "requested for pipeline pg") {
		t.Fatalf("resnapshot printed %q", out)
	}
	id := strings.Fields(out)[1]
	run.waitFor("the re-snapshot to end", func() string {
		doc, err := liveStatus(context.Background(), run.addr)
		if err != nil {
			return err.Error()
		}
		rs := doc.Pipelines[0].Resnapshot
		if rs == nil || rs.ID != id || rs.Active {
			return fmt.Sprintf("%+v", rs)
		}
		if rs.Error != "" || rs.TablesDone != 1 || rs.RowsDone < 2000 {
			t.Fatalf("re-snapshot ended with %+v", rs)
		}
		return ""
	})
	cancel()
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	run.waitFor("convergence", node.Converged(t, index, tb, 4000))

	status := run.admin("status", "--config", cfgPath, "--metrics-addr", run.addr)
	if !strings.Contains(status, "live re-snapshot "+id+": done,") {
		t.Errorf("status lacks the re-snapshot:\n%s", status)
	}
	_, text := run.get("/metrics")
	m := parseMetrics(t, strings.NewReader(text))
	if m[`cdcmirror_resnapshot_active{pipeline="pg"}`] != 0 || m[`cdcmirror_resnapshot_tables_done{pipeline="pg"}`] != 1 ||
		m[`cdcmirror_resnapshot_rows_done{pipeline="pg"}`] < 2000 {
		t.Errorf("re-snapshot metrics: active %v, tables %v, rows %v", m[`cdcmirror_resnapshot_active{pipeline="pg"}`],
			m[`cdcmirror_resnapshot_tables_done{pipeline="pg"}`], m[`cdcmirror_resnapshot_rows_done{pipeline="pg"}`])
	}
	// A request the source refuses is a usage error that says why.
	var errOut strings.Builder
	err := command(context.Background(), []string{"resnapshot", "--config", cfgPath, "--metrics-addr", run.addr, "--table", "nope.nope"},
		&strings.Builder{}, &errOut, nil)
	if err == nil || exitStatus(&strings.Builder{}, err) != 2 || !strings.Contains(err.Error(), "not captured") {
		t.Errorf("resnapshot of a table not captured: %v", err)
	}
	run.stop()
}

// writeMySQLRows is writeRows on the MariaDB table.
func writeMySQLRows(ctx context.Context, my *mirrortest.MySQL) error {
	c, err := client.ConnectWithContext(ctx, my.DSN.Addr, my.DSN.User, my.DSN.Password, my.DSN.DB, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for ctx.Err() == nil {
		id := 1 + r.IntN(3100)
		var q string
		switch r.IntN(4) {
		case 0:
			q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", my.Table, id)
		case 1:
			q = fmt.Sprintf("INSERT IGNORE INTO %s (id, name, qty, price, views, active, doc) VALUES (%d, 'again', 1, 1.5, %d, true, '{}')",
				my.Table, id, mirrortest.ViewsOf(id))
		default:
			q = fmt.Sprintf("UPDATE %s SET qty = qty + 1, name = CONCAT(name, '+') WHERE id = %d", my.Table, id)
		}
		if _, err := c.Execute(q); err != nil && ctx.Err() == nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// writeRows updates, deletes and re-inserts random rows of 1..3100 until ctx ends.
func writeRows(ctx context.Context, dsn, table string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for ctx.Err() == nil {
		id := 1 + r.IntN(3100)
		var q string
		switch r.IntN(4) {
		case 0:
			q = "DELETE FROM " + table + " WHERE id = $1"
		case 1:
			q = "INSERT INTO " + table + " (id, name, qty, price, active, doc) VALUES ($1, 'again', 1, 1.5, true, '{}') ON CONFLICT (id) DO NOTHING"
		default:
			q = "UPDATE " + table + " SET qty = qty + 1, name = name || '+' WHERE id = $1"
		}
		if _, err := conn.Exec(ctx, q, id); err != nil && ctx.Err() == nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// TestCommandReindex runs what the binary runs over a PostgreSQL pipeline whose sink creates
// indices behind a read alias: the qty column becomes text at the source (the long field
// dead-letters the new values), `cdcmirror reindex` (POST /admin/reindex, then /status until it
// is done) rebuilds the index with the new mapping, and `status` reports it; readers of the
// alias see every row with its text qty.
func TestCommandReindex(t *testing.T) {
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		sfx := estest.RandomHex(t, 4)
		pg := mirrortest.NewPostgres(t, pgDSN, "mir_rx_"+sfx)
		slot := "mir_rx_" + sfx
		index := "mir-rx-" + pg.Name()
		node.DeleteAtCleanup(t, index+"*")
		dir := t.TempDir()
		source := fmt.Sprintf("      type: postgres\n      dsn: \"${%s}\"\n      tables: [public.%s]\n      slot: %s\n      publication: %s\n",
			testenv.PostgresDSN, pg.Name(), slot, slot)
		cfgPath := writeCommandConfig(t, dir, eng, commandConfig{Pipeline: "pg", Source: source, SinkID: "es-rx", Index: "mir-rx-{table}",
			SinkExtra: "          read_alias: true\n          retire_after: 10m\n", Runner: "{batch_max_wait: 50ms}"})
		pg.Exec(t, pg.Insert(1, 500)...)
		run := startCommand(t, cfgPath)
		run.waitFor("the snapshot", node.Converged(t, index, pg, 600))
		pg.Exec(t, "ALTER TABLE "+pg.Name()+" ALTER COLUMN qty TYPE text USING qty::text",
			"UPDATE "+pg.Name()+" SET qty = 'q-' || id WHERE id <= 20")

		out := run.admin("reindex", "--config", cfgPath, "--metrics-addr", run.addr, "--table", "public."+pg.Name())
		if !strings.Contains(out, "reindex of public."+pg.Name()+" done") || !strings.Contains(out, "readers see "+index+"-g2 (was "+index+"-g1)") {
			t.Fatalf("reindex printed %q", out)
		}
		if typ := node.FieldTypes(t, index)["qty"]; typ == "long" || typ == "integer" {
			t.Fatalf("qty is mapped as %q after the reindex", typ)
		}
		run.waitFor("the text values", func() string {
			docs, err := node.Docs(t, index, 600)
			if err != nil {
				return err.Error()
			}
			if len(docs) != 500 {
				return fmt.Sprintf("%d documents", len(docs))
			}
			for id := int64(1); id <= 500; id++ {
				want := fmt.Sprint(id * 3)
				if id <= 20 {
					want = fmt.Sprintf("q-%d", id)
				}
				if got := fmt.Sprint(docs[id]["qty"]); got != want {
					return fmt.Sprintf("row %d: qty %q, want %q", id, got, want)
				}
			}
			return ""
		})
		status := run.admin("status", "--config", cfgPath, "--metrics-addr", run.addr)
		if !strings.Contains(status, "live reindex public."+pg.Name()+": done") {
			t.Errorf("status lacks the reindex:\n%s", status)
		}
		run.stop()
	})
}
