package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// TestSinkPostgresSchemaPattern runs a PostgreSQL source capturing a whole schema (schema.*)
// through the cdc.Runner into the sink: a table created in the schema while the pipeline runs
// reaches the index with its inserts, updates and deletes, like the table the snapshot read;
// a table created there whose name can be no index has its rows dead-lettered, and the
// pipeline goes on.
func TestSinkPostgresSchemaPattern(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		sfx := estest.RandomHex(t, 5)
		schema := "pgtb_snk_" + sfx
		q := `"` + schema + `"`
		pgExec(t, dsn, "CREATE SCHEMA "+q,
			"CREATE TABLE "+q+".first (id bigint PRIMARY KEY, name text)",
			"INSERT INTO "+q+".first VALUES (1, 'one')")
		src, err := pgcdc.New(dsn, &pgcdc.Options{Name: "shop", Slot: "pgtb_snk_" + sfx, Publication: "pgtb_snk_" + sfx,
			StatusInterval: 200 * time.Millisecond, Tables: []pgcdc.Table{{Schema: schema, Name: pgcdc.AllTables}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
			defer cancel()
			if err := src.Drop(ctx); err != nil {
				t.Errorf("drop slot: %v", err)
			}
			pgExec(t, dsn, "DROP SCHEMA IF EXISTS "+q+" CASCADE")
		})
		k, _, stop := runPipeline(t, s, src, statestore.NewMemory(), "pat")
		defer stop() // reports Run's error, should the runner have stopped
		// Not runPipeline's done: waitDocs would take Run's result from it, and stop wait forever.
		var done <-chan error
		index := func(table string) string {
			t.Helper()
			n, err := IndexName(k.cfg.Index, cdc.TableID{Database: "postgres", Schema: schema, Table: table})
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		waitDocs(t, s, done, index("first"), []string{"1"}, "snapshot", func(d map[string]map[string]any) bool {
			return d["1"]["name"] == "one"
		})

		pgExec(t, dsn,
			"CREATE TABLE "+q+".later (id bigint PRIMARY KEY, name text, qty integer)",
			"INSERT INTO "+q+".later VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
			"UPDATE "+q+".later SET name = 'b2', qty = 22 WHERE id = 2",
			"DELETE FROM "+q+".later WHERE id = 3",
			"CREATE TABLE "+q+`."bad name" (id int PRIMARY KEY)`,
			"INSERT INTO "+q+`."bad name" VALUES (1)`,
			"INSERT INTO "+q+".first VALUES (2, 'two')")
		docs := waitDocs(t, s, done, index("later"), []string{"1", "2", "3"}, "the later table", func(d map[string]map[string]any) bool {
			return len(d) == 2 && d["2"]["name"] == "b2"
		})
		if docs["1"]["name"] != "a" || jsonNum(docs["1"]["qty"]) != "1" || jsonNum(docs["2"]["qty"]) != "22" || docs["3"] != nil {
			t.Fatalf("documents of the later table: %v", docs)
		}
		// The first table's row written after the bad one shows the pipeline went on.
		waitDocs(t, s, done, index("first"), []string{"2"}, "after the bad table", func(d map[string]map[string]any) bool {
			return d["2"]["name"] == "two"
		})
		// The runner writes a batch's dead letters after its documents are visible: wait.
		recs := k.dlqForTest.waitRecords(t, 1)
		if len(recs) != 1 || recs[0].Event.Table.Table != "bad name" || !strings.HasPrefix(recs[0].Reason, "invalid_index_name: ") {
			t.Fatalf("dead letters %+v, want the one row of the table named %q", recs, "bad name")
		}
	})
}
