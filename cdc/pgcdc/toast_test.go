package pgcdc

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestToastable: the columns reported as TOASTable are those whose values the server can
// really store out of line -- never in rows that cannot exceed the TOAST threshold (pgbench's
// char(84) rows, whatever the encoding), always for unbounded types, and for a bounded column
// only when the row can still exceed the target once the larger values moved before it are
// out of line.
func TestToastable(t *testing.T) {
	fixed := func(name string, n int16) toastColumn { return toastColumn{name: name, storage: 'p', length: n} }
	vl := func(name string, storage byte, typ uint32, typmod int32) toastColumn {
		return toastColumn{name: name, storage: storage, length: -1, typ: typ, typmod: typmod}
	}
	char := func(name string, n int32) toastColumn { return vl(name, 'x', pgtype.BPCharOID, n+4) }
	varchar := func(name string, n int32) toastColumn { return vl(name, 'x', pgtype.VarcharOID, n+4) }
	text := func(name string) toastColumn { return vl(name, 'x', pgtype.TextOID, -1) }
	numeric := func(name string, p, s int32) toastColumn { return vl(name, 'm', pgtype.NumericOID, p<<16|s+4) }
	threshold := toastThreshold(8192)
	if threshold != 2032 {
		t.Fatalf("threshold for 8 KiB blocks %d, want 2032 (TOAST_TUPLE_THRESHOLD)", threshold)
	}
	cases := []struct {
		name    string
		cols    []toastColumn
		maxChar int
		target  int // 0: the threshold
		want    []string
	}{
		{name: "pgbench_accounts", cols: []toastColumn{fixed("aid", 4), fixed("bid", 4), fixed("abalance", 4), char("filler", 84)}, maxChar: 4},
		{name: "pgbench_branches", cols: []toastColumn{fixed("bid", 4), fixed("bbalance", 4), char("filler", 88)}, maxChar: 4},
		{name: "pgbench_history", cols: []toastColumn{fixed("tid", 4), fixed("bid", 4), fixed("aid", 4), fixed("delta", 4), fixed("mtime", 8), char("filler", 22)}, maxChar: 4},
		{name: "text", cols: []toastColumn{fixed("id", 4), text("body")}, maxChar: 1, want: []string{"body"}},
		{name: "unconstrained varchar and char", cols: []toastColumn{fixed("id", 4), varchar("v", -4), char("c", -4)}, maxChar: 1, want: []string{"v", "c"}},
		{name: "bytea, jsonb, arrays, unconstrained numeric", cols: []toastColumn{
			vl("b", 'x', pgtype.ByteaOID, -1), vl("j", 'x', pgtype.JSONBOID, -1), vl("a", 'x', pgtype.Int4ArrayOID, -1), vl("n", 'm', pgtype.NumericOID, -1),
		}, maxChar: 1, want: []string{"b", "j", "a", "n"}},
		{name: "unknown varlena types are unbounded", cols: []toastColumn{vl("x", 'x', 999999, -1)}, maxChar: 1, want: []string{"x"}},
		{name: "plain storage never", cols: []toastColumn{fixed("id", 4), vl("body", 'p', pgtype.TextOID, -1)}, maxChar: 1},
		{name: "stored generated column not reported", cols: []toastColumn{fixed("id", 4), text("body"), {name: "g", storage: 'x', length: -1, typ: pgtype.TextOID, typmod: -1, generated: true}}, maxChar: 1, want: []string{"body"}},
		{name: "varchar(600) in UTF8 can exceed", cols: []toastColumn{fixed("id", 4), varchar("v", 600)}, maxChar: 4, want: []string{"v"}},
		{name: "varchar(600) in LATIN1 cannot", cols: []toastColumn{fixed("id", 4), varchar("v", 600)}, maxChar: 1},
		{name: "bounded columns summing over the threshold", cols: []toastColumn{char("a", 300), char("b", 300)}, maxChar: 4, want: []string{"a", "b"}},
		{name: "small bounded beside unbounded stays inline", cols: []toastColumn{fixed("id", 4), text("body"), varchar("code", 8), numeric("price", 10, 2)}, maxChar: 4, want: []string{"body"}},
		{name: "a smaller toast_tuple_target moves more", cols: []toastColumn{fixed("id", 4), text("body"), varchar("code", 40)}, maxChar: 4, target: 128, want: []string{"body", "code"}},
		{name: "main beside extended: the extended value goes first only for extended", cols: []toastColumn{
			vl("n", 'm', pgtype.NumericOID, -1), varchar("v", 100),
		}, maxChar: 4, want: []string{"n", "v"}},
	}
	for _, c := range cases {
		target := c.target
		if target == 0 {
			target = threshold
		}
		if got := toastable(c.cols, c.maxChar, threshold, target); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := toastTarget([]string{"fillfactor=70", "toast_tuple_target=256"}, threshold); got != 256 {
		t.Errorf("toast_tuple_target: %d", got)
	}
	if got := toastTarget(nil, threshold); got != threshold {
		t.Errorf("no options: %d", got)
	}
}
