package sink

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// priceSchema is the orders table with a price column of the given precision and scale.
func priceSchema(table string, precision, scale int) *cdc.TableSchema {
	sch := ordersSchema(table)
	sch.Columns = append(sch.Columns, cdc.Column{Name: "price", Kind: cdc.KindDecimal, Precision: precision, Scale: scale,
		SourceType: "numeric", Nullable: true})
	return sch
}

func priceRow(id int64, price cdc.Value) []cdc.Value { return append(row(id, "p", id), price) }

// TestSinkMappingOptionsReachNormalization (issue 13, item 1): the configured decimal option
// decides both the created field and the checks applied to values, on the Write path and on
// the encode path alone. A value with more fractional digits than the scale is the probe: a
// scaled_float would round it, a keyword or double field takes it as it is.
func TestSinkMappingOptionsReachNormalization(t *testing.T) {
	ctx := context.Background()
	sch := priceSchema("orders", 12, 2)
	batch := []cdc.Event{ev(cdc.Insert, sch, 1, nil, priceRow(1, "1.234")), ev(cdc.Read, sch, 2, nil, priceRow(2, "NaN"))}
	for _, tc := range []struct {
		decimal string
		field   string
		dead    bool
	}{
		{"", `"type":"scaled_float"`, true},
		{"keyword", `{"type":"keyword","ignore_above":8191}`, false},
		{"double", `"type":"double"`, false},
	} {
		t.Run("decimal_"+tc.decimal, func(t *testing.T) {
			f := newFakeCluster(t)
			k := fakeSink(t, f, Config{Mapping: MappingConfig{Decimal: tc.decimal}}, nil, Options{})
			dead, err := k.Write(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			ix := f.Index(indexOf(t, k, "orders"))
			if got := string(ix.Props["price"]); !strings.Contains(got, tc.field) {
				t.Fatalf("price mapped as %s, want %s", got, tc.field)
			}
			if tc.dead {
				if len(dead) != 1 || dead[0].Index != 0 || !strings.Contains(dead[0].Reason, `column "price"`) ||
					!strings.Contains(dead[0].Reason, "scaled_float") {
					t.Fatalf("dead letters %+v, want event 0 refused for its price", dead)
				}
			} else if len(dead) != 0 {
				t.Fatalf("dead letters %+v under decimal: %s", dead, tc.decimal)
			}
			// NaN is kept under every option (the fields have ignore_malformed).
			if d := ix.Docs["2"]; d.Deleted || !strings.Contains(string(d.Source), `"price":"NaN"`) {
				t.Fatalf("NaN row: %s", d.Source)
			}

			// The encode path without a cluster (what BenchmarkSinkEncode measures) applies the
			// configured options as well.
			k2 := fakeSink(t, newFakeCluster(t), Config{Mapping: MappingConfig{Decimal: tc.decimal}}, nil, Options{})
			acts, _, err := k2.plan(batch[:1], nil)
			if err != nil {
				t.Fatal(err)
			}
			_, dead, _ = k2.encodeWithAlias(acts, nil, "alias")
			if (len(dead) == 1) != tc.dead {
				t.Fatalf("encode alone: dead letters %+v under decimal: %q", dead, tc.decimal)
			}
		})
	}
}

// TestSinkGuardFollowsIndexField: a column whose type widened after the index was created
// keeps its scaled_float with factor 100; a value with 4 fractional digits is dead-lettered
// with a reason naming the column and the field, never rounded, while values the old field
// holds exactly still go through -- also in a new session, which reads the mapping again.
func TestSinkGuardFollowsIndexField(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	st := statestore.NewMemory()
	k := fakeSink(t, f, Config{}, st, Options{})
	narrow := priceSchema("orders", 10, 2)
	if dead, err := k.Write(ctx, []cdc.Event{ev(cdc.Insert, narrow, 1, nil, priceRow(1, "12.50"))}); err != nil || len(dead) != 0 {
		t.Fatalf("%v %+v", err, dead)
	}
	wide := priceSchema("orders", 12, 4)
	for _, k := range []*Sink{k, fakeSink(t, f, Config{}, st, Options{})} {
		dead, err := k.Write(ctx, []cdc.Event{
			ev(cdc.Update, wide, 2, nil, priceRow(1, "1.2345")),
			ev(cdc.Insert, wide, 3, nil, priceRow(2, "1.2300")),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || dead[0].Index != 0 {
			t.Fatalf("dead letters %+v, want event 0", dead)
		}
		if r := dead[0].Reason; !strings.Contains(r, `column "price"`) || !strings.Contains(r, "scaled_float") ||
			!strings.Contains(r, "new index") || strings.Contains(r, "1.2345") {
			t.Fatalf("reason %q", r)
		}
	}
	ix := f.Index(indexOf(t, k, "orders"))
	if got := string(ix.Props["price"]); !strings.Contains(got, `"scaling_factor":100`) {
		t.Fatalf("price remapped: %s", got)
	}
	if !strings.Contains(string(ix.Docs["1"].Source), `"12.50"`) || !strings.Contains(string(ix.Docs["2"].Source), `"1.2300"`) {
		t.Fatalf("documents %s %s", ix.Docs["1"].Source, ix.Docs["2"].Source)
	}
}

// TestSinkGuardWithoutAutoCreate: with auto_create_index: false the sink adds no field but
// still reads the mapping, so a field a user's template made scaled_float is guarded too.
func TestSinkGuardWithoutAutoCreate(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	st := statestore.NewMemory()
	off := false
	cfg := Config{AutoCreateIndex: &off}
	k := fakeSink(t, f, cfg, st, Options{})
	sch := priceSchema("orders", 20, 6)
	if dead, err := k.Write(ctx, []cdc.Event{ev(cdc.Insert, sch, 1, nil, priceRow(1, "12.123456"))}); err != nil || len(dead) != 0 {
		t.Fatalf("%v %+v", err, dead)
	}
	for _, r := range f.requestLines() {
		if strings.HasPrefix(r, "PUT /") && strings.HasSuffix(r, "/_mapping") {
			t.Fatalf("auto_create_index: false sent a mapping update: %q", r)
		}
	}
	// As a template would have mapped it.
	f.EditIndex(indexOf(t, k, "orders"), func(ix *searchtest.Index) {
		ix.Props["price"] = json.RawMessage(`{"type":"scaled_float","scaling_factor":100.0}`)
	})
	k2 := fakeSink(t, f, cfg, st, Options{})
	dead, err := k2.Write(ctx, []cdc.Event{ev(cdc.Insert, sch, 2, nil, priceRow(2, "12.123456")), ev(cdc.Insert, sch, 3, nil, priceRow(3, "12.12"))})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Index != 0 || !strings.Contains(dead[0].Reason, "scaled_float") {
		t.Fatalf("dead letters %+v, want event 0 refused for the template's scaled_float", dead)
	}
}
