package sink

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/statestore"
)

// offlineSink is a sink that is never meant to reach a cluster.
func offlineSink(t *testing.T, index string, edit func(*Config)) *Sink {
	t.Helper()
	cfg := Config{ID: "chk", URL: "http://127.0.0.1:1", Index: index, Auth: Auth{Type: AuthNone}}
	if edit != nil {
		edit(&cfg)
	}
	k, err := New(cfg, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// startProblems returns the problems of a *cdc.StartError, failing the test for any other error.
func startProblems(t *testing.T, err error) []cdc.StartProblem {
	t.Helper()
	var se *cdc.StartError
	if !errors.As(err, &se) || !errors.Is(err, cdc.ErrStart) {
		t.Fatalf("error %v, want a *cdc.StartError", err)
	}
	return se.Problems
}

func mysqlSchema(table string) *cdc.TableSchema {
	s := ordersSchema(table)
	s.ID = cdc.TableID{Connector: "mysql", Source: "shop", Database: "shop", Table: table}
	return s
}

// TestCheckTables: every configuration that cannot work is refused with one problem per
// table naming the fix; a workable one passes and binds each index to its table.
func TestCheckTables(t *testing.T) {
	ctx := context.Background()
	t.Run("static index, two tables", func(t *testing.T) {
		k := offlineSink(t, "all-orders", nil)
		probs := startProblems(t, k.CheckTables(ctx, []*cdc.TableSchema{ordersSchema("a"), ordersSchema("b")}))
		if len(probs) != 1 || probs[0].Table != ordersSchema("b").ID ||
			!strings.Contains(probs[0].Problem, `index "all-orders"`) || !strings.Contains(probs[0].Problem, ordersSchema("a").ID.String()) ||
			!strings.Contains(probs[0].Fix, "{table}") {
			t.Fatalf("problems %+v", probs)
		}
	})
	t.Run("names differing in case", func(t *testing.T) {
		k := offlineSink(t, "{db}-{table}", nil)
		err := k.CheckTables(ctx, []*cdc.TableSchema{mysqlSchema("MyOrders"), mysqlSchema("myorders")})
		probs := startProblems(t, err)
		if len(probs) != 1 || probs[0].Table.Table != "myorders" || !strings.Contains(err.Error(), "MyOrders") ||
			!strings.Contains(err.Error(), `index "shop-myorders"`) || !strings.Contains(probs[0].Fix, "differ only in case") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("keyless", func(t *testing.T) {
		k := offlineSink(t, "{table}", nil)
		noPK := ordersSchema("history")
		noPK.PrimaryKey = nil
		err := k.CheckTables(ctx, []*cdc.TableSchema{ordersSchema("a"), noPK})
		probs := startProblems(t, err)
		if len(probs) != 1 || probs[0].Table != noPK.ID || !strings.Contains(probs[0].Problem, "no primary key") ||
			!strings.Contains(probs[0].Fix, "keyless: dead_letter") || !strings.Contains(probs[0].Fix, "id_fields") {
			t.Fatalf("problems %+v", probs)
		}
		if !strings.Contains(err.Error(), "history") || !strings.Contains(err.Error(), "keyless: dead_letter") {
			t.Fatalf("the message does not name the table and the fix: %v", err)
		}
		dl := offlineSink(t, "{table}", func(c *Config) { c.Keyless = KeylessDeadLetter })
		if err := dl.CheckTables(ctx, []*cdc.TableSchema{ordersSchema("a"), noPK}); err != nil {
			t.Fatalf("keyless: dead_letter: %v", err)
		}
		// id_fields naming a column one table lacks: that table's rows can get no _id either.
		idf := offlineSink(t, "{table}", func(c *Config) { c.IDFields = []string{"name"} })
		other := ordersSchema("other")
		other.Columns[1].Name = "label"
		probs = startProblems(t, idf.CheckTables(ctx, []*cdc.TableSchema{ordersSchema("a"), other}))
		if len(probs) != 1 || probs[0].Table != other.ID || !strings.Contains(probs[0].Problem, `"name"`) {
			t.Fatalf("id_fields problems %+v", probs)
		}
	})
	t.Run("bad index name and field names, all reported", func(t *testing.T) {
		k := offlineSink(t, "{table}", nil)
		dotted := ordersSchema("dotted")
		dotted.Columns[1].Name = "a.b"
		dotted.Columns[2].Name = "_id"
		err := k.CheckTables(ctx, []*cdc.TableSchema{ordersSchema("bad name"), dotted})
		probs := startProblems(t, err)
		if len(probs) != 3 || !strings.Contains(probs[0].Problem, "space") || !strings.Contains(probs[1].Problem, `"a.b"`) ||
			!strings.Contains(probs[2].Problem, `"_id"`) {
			t.Fatalf("problems %+v", probs)
		}
	})
	t.Run("accepted tables are bound", func(t *testing.T) {
		k := offlineSink(t, "{table}", nil)
		a, b := ordersSchema("a"), ordersSchema("b")
		if err := k.CheckTables(ctx, []*cdc.TableSchema{a, b}); err != nil {
			t.Fatal(err)
		}
		// A table met later that would share a's index is refused before anything is sent
		// (the sink points at a closed port, so a request would fail otherwise).
		intruder := ordersSchema("a")
		intruder.ID.Source = "other-source"
		_, err := k.Write(ctx, []cdc.Event{ev(cdc.Insert, intruder, 1, nil, row(1, "x", 1))})
		var ce *esfence.ConflictError
		if !errors.As(err, &ce) || ce.Class != esfence.BoundToAnotherRelation || ce.Index != "a" || ce.Table != intruder.ID {
			t.Fatalf("Write of a third table into a bound index: %v", err)
		}
		// A later check sees the binding too.
		probs := startProblems(t, k.CheckTables(ctx, []*cdc.TableSchema{intruder}))
		if len(probs) != 1 || probs[0].Table != intruder.ID {
			t.Fatalf("problems %+v", probs)
		}
	})
}

// TestWriteDeadLettersKeylessTableMetLater: under keyless: refuse (the default) a keyless
// table met only in Write (CheckTables refuses it at start) has every row dead-lettered with
// the fix, every later batch too: a table created while the pipeline runs never stops it.
func TestWriteDeadLettersKeylessTableMetLater(t *testing.T) {
	k := offlineSink(t, "{table}", nil)
	noPK := ordersSchema("history")
	noPK.PrimaryKey = nil
	for range 2 {
		dead, err := k.Write(context.Background(), []cdc.Event{ev(cdc.Insert, noPK, 1, nil, row(1, "x", 1)),
			ev(cdc.Insert, noPK, 2, nil, row(2, "y", 2))})
		if err != nil || len(dead) != 2 {
			t.Fatalf("dead %v, err %v", dead, err)
		}
		for _, d := range dead {
			if !strings.HasPrefix(d.Reason, "keyless_table: ") || !strings.Contains(d.Reason, "keyless: dead_letter") ||
				!strings.Contains(d.Reason, "next start") {
				t.Fatalf("reason %q", d.Reason)
			}
		}
	}
}

// TestWriteDeadLettersTableWithBadFieldName: a table met in Write with a column that cannot be
// a document field (CheckTables refuses it at start) has every row dead-lettered, naming the
// column, before anything is sent: with auto_create_index no mapping could be generated for it.
func TestWriteDeadLettersTableWithBadFieldName(t *testing.T) {
	k := offlineSink(t, "{table}", nil)
	dotted := ordersSchema("dotted")
	dotted.Columns[1].Name = "a.b"
	dead, err := k.Write(context.Background(), []cdc.Event{ev(cdc.Insert, dotted, 1, nil, row(1, "x", 1)),
		ev(cdc.Update, dotted, 2, nil, row(1, "y", 1))})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead %v, err %v", dead, err)
	}
	for _, d := range dead {
		if !strings.HasPrefix(d.Reason, "invalid_field_name: ") || !strings.Contains(d.Reason, `"a.b"`) ||
			!strings.Contains(d.Reason, "rename the column") {
			t.Fatalf("reason %q", d.Reason)
		}
	}
}
