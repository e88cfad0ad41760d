package sink

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// addColumns is the orders schema with price (DECIMAL) and placed (DATETIME) added: two
// columns dynamic mapping would get wrong.
func addColumns(sch *cdc.TableSchema) *cdc.TableSchema {
	n := *sch
	n.Columns = append(append([]cdc.Column(nil), sch.Columns...),
		cdc.Column{Name: "price", Kind: cdc.KindDecimal, Precision: 10, Scale: 2, SourceType: "numeric(10,2)", Nullable: true},
		cdc.Column{Name: "placed", Kind: cdc.KindDateTime, SourceType: "timestamp", Nullable: true})
	return &n
}

func wideRow(id int64) []cdc.Value {
	return append(row(id, "w", id), "12.50", "2026-11-30 08:00:00")
}

// A column added at the source gets its generated mapping before the first document that
// carries it, through the write alias, without touching the marker; a schema without new
// columns costs no mapping request; a later session finds what an earlier one added.
func TestSchemaChangeAddsFields(t *testing.T) {
	f := newFakeCluster(t)
	st := statestore.NewMemory()
	k := fakeSink(t, f, Config{}, st, Options{})
	ctx := context.Background()
	v1 := ordersSchema("orders")
	if _, err := k.Write(ctx, fakeEvents(v1, 1, 2)); err != nil {
		t.Fatal(err)
	}
	idx := indexOf(t, k, "orders")
	alias := k.claims[idx].WriteAlias()

	puts := func() (n int) {
		for _, r := range f.requestLines() {
			if strings.HasPrefix(r, "PUT /") && strings.HasSuffix(r, "/_mapping") {
				if r != "PUT /"+alias+"/_mapping" {
					t.Fatalf("mapping update %q does not go through the write alias %s", r, alias)
				}
				n++
			}
		}
		return n
	}

	// The same columns under a new schema value (the source reloaded its catalog): no update.
	same := *v1
	if _, err := k.Write(ctx, []cdc.Event{ev(cdc.Update, &same, 3, nil, row(1, "again", 3))}); err != nil {
		t.Fatal(err)
	}
	if n := puts(); n != 0 {
		t.Fatalf("%d mapping updates for a schema without new columns", n)
	}

	v2 := addColumns(v1)
	if _, err := k.Write(ctx, []cdc.Event{ev(cdc.Insert, v2, 4, nil, wideRow(3)), ev(cdc.Insert, v1, 5, nil, row(4, "old", 4))}); err != nil {
		t.Fatal(err)
	}
	ix := f.Index(idx)
	if len(ix.Dynamic) != 0 {
		t.Fatalf("fields %v were mapped dynamically", ix.Dynamic)
	}
	wantPrice, _ := FieldMapping(&v2.Columns[4], MappingOptions{Engine: Elasticsearch})
	if got := ix.Props["price"]; string(got) != string(wantPrice) || ix.Props["placed"] == nil {
		t.Fatalf("price mapped as %s, want %s; placed %s", got, wantPrice, ix.Props["placed"])
	}
	if n := puts(); n != 1 {
		t.Fatalf("%d mapping updates, want 1", n)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(ix.Mappings["_meta"], &meta); err != nil || meta["deltaforge"] == nil {
		t.Fatalf("the marker is gone: %s", ix.Mappings["_meta"])
	}

	// A new session with an even wider schema: it reads the mapping and adds only what is
	// missing (the fake refuses a changed field, so a resent one would fail the write).
	v3 := addColumns(v2)
	v3.Columns = append(v3.Columns[:6:6], cdc.Column{Name: "note", Kind: cdc.KindText, SourceType: "text", Nullable: true})
	k2 := fakeSink(t, f, Config{}, st, Options{})
	if _, err := k2.Write(ctx, []cdc.Event{ev(cdc.Insert, v3, 6, nil, append(wideRow(5), "hi"))}); err != nil {
		t.Fatal(err)
	}
	if ix = f.Index(idx); len(ix.Dynamic) != 0 || ix.Props["note"] == nil {
		t.Fatalf("note not mapped before use: dynamic %v, props %v", ix.Dynamic, ix.Props)
	}
}

// A column whose type changed keeps the index's field: no update is sent (the cluster
// would refuse it) and the write goes on; rows the old field cannot take come back from the
// cluster as per-item errors, which dead-letter them.
func TestSchemaChangeKeepsChangedField(t *testing.T) {
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{}, nil, Options{})
	ctx := context.Background()
	v1 := ordersSchema("orders")
	if _, err := k.Write(ctx, fakeEvents(v1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	v2 := *v1
	v2.Columns = append([]cdc.Column(nil), v1.Columns...)
	v2.Columns[2] = cdc.Column{Name: "qty", Kind: cdc.KindText, SourceType: "text", Nullable: true}
	if _, err := k.Write(ctx, []cdc.Event{ev(cdc.Insert, &v2, 2, nil, []cdc.Value{int64(2), "two", "many", true})}); err != nil {
		t.Fatal(err)
	}
	ix := f.Index(indexOf(t, k, "orders"))
	if got := string(ix.Props["qty"]); got != `{"type":"integer"}` {
		t.Fatalf("qty mapped as %s; a changed type must not be remapped", got)
	}
}
