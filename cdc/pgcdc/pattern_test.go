package pgcdc

import (
	"reflect"
	"testing"
)

// TestTablePatterns: New splits Options.Tables into named tables and pattern schemas (each once,
// "public" for an empty schema), refuses a pattern over every schema, and a created publication
// publishes the schemas whole and the named tables outside them.
func TestTablePatterns(t *testing.T) {
	const dsn = "postgres://u@127.0.0.1:1/db"
	src, err := New(dsn, &Options{Tables: []Table{
		{Schema: "Sales", Name: AllTables}, {Name: "orders"}, {Schema: "Sales", Name: "x"}, {Schema: "public", Name: "orders"},
		{Name: AllTables}, {Schema: "Sales", Name: AllTables}, {Schema: "b", Name: `we"ird`}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Sales", "public"}; !reflect.DeepEqual(src.patterns, want) {
		t.Errorf("patterns %v, want %v", src.patterns, want)
	}
	if want := []Table{{"public", "orders"}, {"Sales", "x"}, {"b", `we"ird`}}; !reflect.DeepEqual(src.named, want) {
		t.Errorf("named %v, want %v", src.named, want)
	}
	if got, want := src.publicationTarget(), `TABLES IN SCHEMA "Sales", "public", TABLE "b"."we""ird"`; got != want {
		t.Errorf("publication target %s, want %s", got, want)
	}
	for _, c := range []struct {
		tables []Table
		want   string
	}{
		{nil, "ALL TABLES"},
		{[]Table{{Name: "a"}, {Schema: "s", Name: "b"}}, `TABLE "public"."a", "s"."b"`},
		{[]Table{{Schema: "s", Name: AllTables}}, `TABLES IN SCHEMA "s"`},
	} {
		src, err := New(dsn, &Options{Tables: c.tables})
		if err != nil {
			t.Fatal(err)
		}
		if got := src.publicationTarget(); got != c.want {
			t.Errorf("%v: publication target %s, want %s", c.tables, got, c.want)
		}
	}
	for _, tb := range []Table{{Schema: "public", Name: "t"}, {Schema: "Sales", Name: "anything"}, {Schema: "public", Name: "orders"}} {
		if !src.captures(tb) {
			t.Errorf("%v not captured", tb)
		}
	}
	for _, tb := range []Table{{Schema: "sales", Name: "x"}, {Schema: "b", Name: "weird"}} {
		if src.captures(tb) {
			t.Errorf("%v captured", tb)
		}
	}
	if _, err := New(dsn, &Options{Tables: []Table{{Schema: AllTables, Name: AllTables}}}); err == nil {
		t.Error("a pattern over every schema was accepted")
	}
	if displayName(Table{Schema: "Sales", Name: AllTables}) != `"Sales".*` || displayName(Table{Schema: "s", Name: AllTables}) != "s.*" {
		t.Error("patterns are displayed as schema.*")
	}
}
