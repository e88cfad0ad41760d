package mirror_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// reindexSource is one source of TestReindexAlterColumnType: how to change the qty column to
// text, and how to read and write it as text.
type reindexSource struct {
	tb        mirrortest.Table
	table     string // as source.tables spells it
	source    string // the YAML of source:
	readAlias bool   // the sink's read_alias (false: a legacy index the reindex migrates)
	exec      func(t *testing.T, q string)
	qtys      func(t *testing.T) map[int64]string
}

// TestReindexAlterColumnType is the driving case of reindexing: a column's type changes at the
// source while the pipeline streams (qty INT to text), so the index's field (long) rejects the
// new values -- they are dead-lettered. mirror.Reindex builds a new generation with the mapping
// of the new schema while a writer keeps changing rows, and switches the read alias to it;
// a reader counting documents through the read alias all along never sees a partial index;
// at the end every row's qty in the index equals the table's. PostgreSQL into generations from
// the start (read_alias), MariaDB from a legacy index (migrated by the switch), both engines.
func TestReindexAlterColumnType(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
			name := "mir_rx_" + estest.RandomHex(t, 4)
			tb := mirrortest.NewPostgres(t, dsn, name)
			dropSlotAtCleanup(t, dsn, name)
			exec := func(t *testing.T, q string) { tb.Exec(t, q) }
			reindexAlterColumnType(t, eng, node, reindexSource{tb: tb, table: "public." + name, readAlias: true, exec: exec,
				source: fmt.Sprintf("source:\n  type: postgres\n  dsn: \"${%s}\"\n  tables: [public.%s]\n  slot: %s\n  publication: %s\n",
					testenv.PostgresDSN, name, name, name),
				qtys: func(t *testing.T) map[int64]string {
					conn, err := pgx.Connect(context.Background(), dsn)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close(context.Background())
					rows, err := conn.Query(context.Background(), "SELECT id, qty::text FROM "+name)
					if err != nil {
						t.Fatal(err)
					}
					out := map[int64]string{}
					for rows.Next() {
						var id int64
						var q string
						if err := rows.Scan(&id, &q); err != nil {
							t.Fatal(err)
						}
						out[id] = q
					}
					return out
				}}, "ALTER TABLE "+name+" ALTER COLUMN qty TYPE text USING qty::text")
		})
	})
	t.Run("mariadb", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.MySQLDSN)
		mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
			name := "mir_rx_" + estest.RandomHex(t, 4)
			my := mirrortest.NewMySQL(t, dsn, name)
			signal := "mir_rx_sig_" + estest.RandomHex(t, 4)
			t.Cleanup(func() { my.Exec(t, "DROP TABLE IF EXISTS "+signal) })
			exec := func(t *testing.T, q string) { my.Exec(t, q) }
			reindexAlterColumnType(t, eng, node, reindexSource{tb: my, table: name, exec: exec,
				source: fmt.Sprintf("source:\n  type: mysql\n  dsn: \"${%s}\"\n  tables: [%s]\n  server_id: %d\n  signal_table: %s\n",
					testenv.MySQLDSN, name, mirrortest.ServerID(t), signal),
				qtys: func(t *testing.T) map[int64]string {
					c, err := client.ConnectWithContext(context.Background(), my.DSN.Addr, my.DSN.User, my.DSN.Password, my.DSN.DB, 10*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					res, err := c.Execute("SELECT id, CAST(qty AS CHAR) FROM " + name)
					if err != nil {
						t.Fatal(err)
					}
					out := map[int64]string{}
					for i := range res.RowNumber() {
						id, _ := res.GetInt(i, 0)
						q, _ := res.GetString(i, 1)
						out[id] = q
					}
					return out
				}}, "ALTER TABLE "+name+" MODIFY qty VARCHAR(40) NOT NULL")
		})
	})
}

func reindexAlterColumnType(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node, src reindexSource, alter string) {
	const rows = 1500
	index := "mir-rx-" + src.tb.Name()
	node.DeleteAtCleanup(t, index+"*")
	dir := t.TempDir()
	const pipeline = "rx"
	cfg := writeConfig(t, dir, pipeline, src.source, eng, "mir-rx-{table}")
	cfg.Pipelines[0].Sink.ReadAlias = src.readAlias
	src.tb.Exec(t, src.tb.Insert(1, rows)...)
	run := start(t, cfg)
	count := func() (int64, error) {
		var ans struct {
			Count int64 `json:"count"`
		}
		res := node.Do(t, esapi.CountRequest{Index: []string{index}})
		if res.Status != 200 {
			return 0, fmt.Errorf("_count on %s: status %d", index, res.Status)
		}
		res.Decode(t, &ans)
		return ans.Count, nil
	}
	run.wait("the snapshot", func() string {
		node.Do(t, esapi.IndicesRefreshRequest{Index: []string{index}})
		if n, err := count(); err != nil || n != rows {
			return fmt.Sprintf("%d documents (%v)", n, err)
		}
		return ""
	})
	if types := node.FieldTypes(t, index); types["qty"] != "long" && types["qty"] != "integer" {
		t.Fatalf("qty is mapped as %q before the change", types["qty"])
	}

	// The column becomes text and takes values the field cannot: they are dead-lettered.
	src.exec(t, alter)
	src.exec(t, "UPDATE "+src.tb.Name()+" SET qty = CONCAT('q-', id) WHERE id <= 10")
	run.wait("the first dead letters", func() string {
		if n := run.status().Progress.DeadLetters; n < 10 {
			return fmt.Sprintf("%d dead letters", n)
		}
		return ""
	})

	// A writer changes qty of random rows, and a reader counts the documents through the
	// read alias, until the reindex is done and a while after.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var writes, reads, partial, failed atomic.Int64
	var switched atomic.Bool // Reindex returned: the read alias is on the new generation
	var readErr atomic.Value
	wg.Add(2)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
		for i := 0; ctx.Err() == nil; i++ {
			id := 1 + r.IntN(rows)
			src.exec(t, "UPDATE "+src.tb.Name()+" SET qty = 'w-"+strconv.Itoa(i)+"' WHERE id = "+strconv.Itoa(id))
			writes.Add(1)
			time.Sleep(3 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			after := switched.Load() // a read that started before the switch may meet it
			n, err := count()
			switch {
			case err != nil && !src.readAlias && !after:
				// Replacing a legacy index deletes it: a search in flight at that instant
				// fails (OpenSearch answers 503). It is counted, never a partial answer; a read
				// started after the switch was made may not fail.
				failed.Add(1)
			case err != nil:
				readErr.Store(err)
			case n != rows:
				partial.Add(1)
				readErr.Store(fmt.Errorf("a count through the read alias saw %d documents of %d", n, rows))
			}
			reads.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()

	rctx, rcancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
	defer rcancel()
	rep, err := run.m.Reindex(rctx, pipeline, src.table)
	switched.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reindex: %+v", rep)
	wantGen, wantReplaced := index+"-g2", index+"-g1"
	if !src.readAlias {
		wantGen, wantReplaced = index+"-g1", index
	}
	if rep.Generation != wantGen || rep.Replaced != wantReplaced || rep.Rows < rows {
		t.Errorf("reindex report %+v, want generation %s replacing %s", rep, wantGen, wantReplaced)
	}
	// Reads after the switch too, for at most WaitBound.
	for start, end := reads.Load(), time.Now().Add(mirrortest.WaitBound); reads.Load() < start+20 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if err, _ := readErr.Load().(error); err != nil {
		t.Fatalf("the reader (%d queries, %d partial): %v", reads.Load(), partial.Load(), err)
	}
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatalf("%d reads, %d writes during the reindex", reads.Load(), writes.Load())
	}

	// Every row's qty, text now, in the new generation.
	run.wait("convergence after the reindex", func() string {
		docs, err := node.Docs(t, index, rows)
		if err != nil {
			return err.Error()
		}
		want := src.qtys(t)
		bad := 0
		var first string
		for id, q := range want {
			if got := fmt.Sprint(docs[id]["qty"]); got != q {
				if bad++; bad == 1 {
					first = fmt.Sprintf("row %d: qty %q in the table, %q in the index", id, q, got)
				}
			}
		}
		if bad > 0 || len(docs) != len(want) {
			return fmt.Sprintf("%d rows differ (%d documents, %d rows); %s", bad, len(docs), len(want), first)
		}
		return ""
	})
	if types := node.FieldTypes(t, index); types["qty"] == "long" || types["qty"] == "integer" {
		t.Fatalf("qty is still mapped as %q after the reindex", types["qty"])
	}
	if src.readAlias {
		if !node.IndexExists(t, wantReplaced) {
			t.Fatalf("the replaced generation %s is gone before its retire_after", wantReplaced)
		}
	} else if got := node.FieldTypes(t, index); len(got) == 0 {
		t.Fatal("the legacy index's name (the read alias now) has no mapping")
	}
	t.Logf("%d rows equal; %d queries through the read alias during the reindex, none partial, %d failed; %d writes",
		rows, reads.Load(), failed.Load(), writes.Load())
}

// TestReindexResumes cuts a reindex short while its re-snapshot runs (its context ends, then
// the mirror stops), starts the mirror again -- it writes every change to both generations
// from its first claim, the state store says a reindex is filling -- and calls Reindex again:
// it resumes the same generation and switches; the index then equals the table.
func TestReindexResumes(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		name := "mir_rr_" + estest.RandomHex(t, 4)
		tb := mirrortest.NewPostgres(t, dsn, name)
		dropSlotAtCleanup(t, dsn, name)
		index := "mir-rr-" + name
		node.DeleteAtCleanup(t, index+"*")
		const rows = 3000
		cfg := writeConfig(t, t.TempDir(), "rr", fmt.Sprintf("source:\n  type: postgres\n  dsn: \"${%s}\"\n  tables: [public.%s]\n  slot: %s\n  publication: %s\n  snapshot_chunk: 50\n",
			testenv.PostgresDSN, name, name, name), eng, "mir-rr-{table}")
		cfg.Pipelines[0].Sink.ReadAlias = true
		tb.Exec(t, tb.Insert(1, rows)...)
		run := start(t, cfg)
		run.wait("the snapshot", node.Converged(t, index, tb, rows+10))

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := run.m.Reindex(ctx, "rr", "public."+name); done <- err }()
		run.wait("the reindex's re-snapshot", func() string {
			if p := run.status().Progress.Resnapshot; !p.Active || p.RowsDone == 0 {
				return fmt.Sprintf("%+v", p)
			}
			return ""
		})
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a reindex whose context ended switched")
		}
		run.stop()
		if err := run.m.Close(); err != nil {
			t.Fatal(err)
		}
		if !node.IndexExists(t, index+"-g2") {
			t.Fatal("the new generation is gone after the interrupted reindex")
		}

		run = start(t, cfg)
		tb.Exec(t, "UPDATE "+name+" SET name = 'after restart' WHERE id <= 5") // the sink meets the table again
		run.wait("the change in the generation being filled", func() string {
			docs, err := node.Docs(t, index+"-g2", 5) // written there by the restarted sink itself
			if err != nil {
				return err.Error()
			}
			for id := int64(1); id <= 5; id++ {
				if docs[id]["name"] != "after restart" {
					return fmt.Sprintf("row %d in %s-g2: %v", id, index, docs[id])
				}
			}
			return ""
		})
		rctx, rcancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
		defer rcancel()
		rep, err := run.m.Reindex(rctx, "rr", "public."+name)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Generation != index+"-g2" || rep.Replaced != index+"-g1" {
			t.Fatalf("the resumed reindex: %+v, want generation 2 replacing 1", rep)
		}
		run.wait("convergence", node.Converged(t, index, tb, rows+10))
		if got := node.FieldTypes(t, index); len(got) == 0 {
			t.Fatal("no mapping through the read alias")
		}
	})
}
