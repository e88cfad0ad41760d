package sink

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// fieldTypes reads the index's top-level field types.
func (s *server) fieldTypes(t *testing.T, index string) map[string]string {
	t.Helper()
	var m map[string]struct {
		Mappings struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"mappings"`
	}
	if err := json.Unmarshal(s.OK(t, esapi.IndicesGetMappingRequest{Index: []string{index}}).Body, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, p := range m[index].Mappings.Properties {
		out[name] = p.Type
	}
	return out
}

// TestSinkSchemaChange adds columns at the source after the index exists: they get their
// generated mappings before the first document carrying them (dynamic mapping would make the
// decimal text and the datetime text), the marker survives (a later session claims the index
// and adds more), a column whose type changed keeps its field and the rows it cannot take are
// dead-lettered, and a fenced sink cannot change the mapping.
func TestSinkSchemaChange(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		e := Elasticsearch
		if s.Engine == estest.OpenSearch {
			e = OpenSearch
		}
		mo := serverOptions(e)
		st := statestore.NewMemory()
		cfg := s.config("schema")
		k := s.sinkOpts(t, cfg, st, Options{Mapping: &mo})
		v1 := ordersSchema("orders")
		write(t, k, fakeEvents(v1, 1, 2))
		idx := indexOf(t, k, "orders")

		v2 := addColumns(v1)
		if dead := write(t, k, []cdc.Event{ev(cdc.Insert, v2, 3, nil, wideRow(3))}); len(dead) != 0 {
			t.Fatalf("dead %v", dead)
		}
		want := map[string]string{"price": "scaled_float", "placed": "date"}
		if e == Elasticsearch {
			want["price"] = "double" // this build has no scaled_float (serverOptions)
		}
		got := s.fieldTypes(t, idx)
		for f, typ := range want {
			if got[f] != typ {
				t.Fatalf("field %s mapped as %q, want %q (all: %v)", f, got[f], typ, got)
			}
		}

		// A later session (same state store) claims the index, so the marker is intact, and
		// adds the next column.
		k2 := s.sinkOpts(t, cfg, st, Options{Mapping: &mo})
		v3 := addColumns(v1)
		v3.Columns = append(v3.Columns, cdc.Column{Name: "note", Kind: cdc.KindText, SourceType: "text", Nullable: true})
		if dead := write(t, k2, []cdc.Event{ev(cdc.Insert, v3, 4, nil, append(wideRow(4), "hello"))}); len(dead) != 0 {
			t.Fatalf("dead %v", dead)
		}
		if typ := s.fieldTypes(t, idx)["note"]; typ != "keyword" {
			t.Fatalf("note mapped as %q, want keyword", typ)
		}

		// qty changes from integer to text: the field stays integer; a value it can parse
		// is indexed, one it cannot is dead-lettered with the cluster's error type.
		v4 := *v3
		v4.Columns = append([]cdc.Column(nil), v3.Columns...)
		v4.Columns[2] = cdc.Column{Name: "qty", Kind: cdc.KindText, SourceType: "text", Nullable: true}
		rowQty := func(id int64, qty string) []cdc.Value {
			return []cdc.Value{id, "q", qty, true, "1.00", "2026-11-30 08:00:00", "n"}
		}
		dead := write(t, k2, []cdc.Event{ev(cdc.Insert, &v4, 5, nil, rowQty(5, "7")), ev(cdc.Insert, &v4, 6, nil, rowQty(6, "many"))})
		if len(dead) != 1 || dead[0].Index != 1 || !strings.Contains(dead[0].Reason, "parsing_exception") || strings.Contains(dead[0].Reason, "many") {
			t.Fatalf("dead letters %+v, want event 1 rejected by the integer field", dead)
		}
		if typ := s.fieldTypes(t, idx)["qty"]; typ != "integer" {
			t.Fatalf("qty remapped to %q", typ)
		}
		if docs, _ := s.docs(t, idx, []string{"5", "6"}); docs["5"] == nil || docs["6"] != nil {
			t.Fatalf("documents %v: want 5 indexed, 6 not", docs)
		}

		// k2 claimed after k: k is fenced, and so is its mapping update.
		v5 := addColumns(v1)
		v5.Columns = append(v5.Columns, cdc.Column{Name: "fenced_col", Kind: cdc.KindBool, SourceType: "boolean", Nullable: true})
		_, err := k.Write(context.Background(), []cdc.Event{ev(cdc.Insert, v5, 7, nil, append(wideRow(7), true))})
		if !errors.Is(err, esfence.Fenced) {
			t.Fatalf("a fenced sink's schema change: %v, want a fenced refusal", err)
		}
		if _, ok := s.fieldTypes(t, idx)["fenced_col"]; ok {
			t.Fatal("a fenced sink changed the mapping")
		}
	})
}
