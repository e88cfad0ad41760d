package cdctest

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TypeMatrix is a source's column types for the Types behaviour: one table with a column per
// case, read once through an initial snapshot and once through the stream.
type TypeMatrix struct {
	// Setup runs before the table is created: types and domains the cases use.
	Setup []string
	// Teardown runs after the table was dropped.
	Teardown []string
	// TableOptions is appended to CREATE TABLE (...), e.g. a default character set.
	TableOptions string
	// InsertSession runs first in each transaction that inserts the rows: session settings
	// some literals need (a permissive sql_mode for zero dates).
	InsertSession []string
	Cases         []TypeCase
}

// TypeCase is one column of the matrix.
type TypeCase struct {
	Name string // the column's name and the subtest's
	Type string // the column's type as written in CREATE TABLE, e.g. "numeric(12,3)"
	// Column is the schema the source must report. The suite fills in Name and Nullable
	// (every case column is nullable); an empty SourceType is not compared, every other field
	// is compared exactly.
	Column cdc.Column
	// Values are the literals the rows hold and the normalized values both paths must yield:
	// row i holds Values[i], or NULL when the case has fewer values. One more row is NULL in
	// every column.
	Values []TypeValue
}

// TypeValue is one literal of a TypeCase and its expected normalized value.
type TypeValue struct {
	Literal string    // SQL literal, as written in INSERT ... VALUES
	Want    cdc.Value // NaN matches NaN
}

// idBase offsets the streamed rows' ids from the snapshot rows'.
const idBase = 1000

// testTypes checks, for every case, the reported schema and that the snapshot and the stream
// yield the expected value for every row.
func testTypes(ctx context.Context, t *testing.T, e *env) {
	if e.h.Types == nil {
		t.Skip("the harness supplies no type matrix")
	}
	m := e.h.Types(e.suffix)
	if len(m.Cases) == 0 {
		t.Skip("the harness supplies no type cases")
	}
	q := e.h.Quote
	tb := e.table("types")
	e.exec(ctx, t, m.Setup...)
	t.Cleanup(func() {
		// Registered before NewSource, so it runs after the source's cleanup dropped the table.
		if len(m.Teardown) > 0 {
			if err := e.h.Exec(context.WithoutCancel(ctx), m.Teardown...); err != nil {
				t.Logf("teardown: %v", err)
			}
		}
	})
	cols := []string{q("id") + " INT NOT NULL PRIMARY KEY"}
	names := []string{q("id")}
	rows := 1 // the all-NULL row
	for _, c := range m.Cases {
		cols = append(cols, q(c.Name)+" "+c.Type)
		names = append(names, q(c.Name))
		rows = max(rows, len(c.Values)+1)
	}
	e.exec(ctx, t, fmt.Sprintf("CREATE TABLE %s (%s)%s", q(tb), strings.Join(cols, ", "), m.TableOptions))

	insert := func(base int) {
		t.Helper()
		stmts := append([]string(nil), m.InsertSession...)
		for r := range rows {
			vals := []string{fmt.Sprint(base + r + 1)}
			for _, c := range m.Cases {
				if r < len(c.Values) {
					vals = append(vals, c.Values[r].Literal)
				} else {
					vals = append(vals, "NULL")
				}
			}
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", q(tb), strings.Join(names, ", "), strings.Join(vals, ", ")))
		}
		e.execTx(ctx, t, stmts...)
	}
	insert(0)
	st := open(ctx, t, e.h.NewSource(t, cdc.SnapshotInitial, tb), nil)
	snap := readRows(ctx, t, st, cdc.Read, tb, rows, 0)
	insert(idBase)
	stream := readRows(ctx, t, st, cdc.Insert, tb, rows, idBase)
	if p := st.Progress(); p.Active {
		t.Errorf("snapshot progress after streamed changes: %+v, want inactive", p)
	}

	for _, c := range m.Cases {
		t.Run(c.Name, func(t *testing.T) {
			want := c.Column
			want.Name, want.Nullable = c.Name, true
			for path, ev := range map[string]cdc.Event{"snapshot": snap[0], "stream": stream[0]} {
				i := ev.Schema.ColumnIndex(c.Name)
				if i < 0 {
					t.Fatalf("the %s schema has no column %s", path, c.Name)
				}
				got := ev.Schema.Columns[i]
				w := want
				if w.SourceType == "" {
					w.SourceType = got.SourceType
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s (%s): %s schema reports\n  %+v\nwant\n  %+v", c.Name, c.Type, path, got, w)
				}
			}
			for r := range rows {
				var lit string
				var w cdc.Value
				if r < len(c.Values) {
					lit, w = c.Values[r].Literal, c.Values[r].Want
				} else {
					lit = "NULL"
				}
				a := value(t, snap[r].Schema, snap[r].After, c.Name)
				b := value(t, stream[r].Schema, stream[r].After, c.Name)
				if !sameValue(a, w) || !sameValue(b, w) {
					t.Errorf("%s (%s) = %s: snapshot %#v, stream %#v, want %#v", c.Name, c.Type, lit, a, b, w)
				}
			}
		})
	}
}

// readRows reads n events of op on table, returned in id order (ids base+1 .. base+n).
func readRows(ctx context.Context, t *testing.T, st cdc.Stream, op cdc.Op, table string, n, base int) []cdc.Event {
	t.Helper()
	out := make([]cdc.Event, n)
	for range n {
		ev := NextEvent(ctx, t, st)
		wantOp(t, ev, op, table)
		var id int64
		switch v := value(t, ev.Schema, ev.After, "id").(type) {
		case int64:
			id = v
		default:
			t.Fatalf("id is %#v, want an int64", v)
		}
		r := int(id) - base - 1
		if r < 0 || r >= n || out[r].Schema != nil {
			t.Fatalf("%v delivered id %d, want each of %d..%d once", op, id, base+1, base+n)
		}
		out[r] = ev
	}
	return out
}

// sameValue is reflect.DeepEqual, except that NaN equals NaN, at any depth of an array.
func sameValue(a, b cdc.Value) bool {
	switch a := a.(type) {
	case float64:
		if b, ok := b.(float64); ok && math.IsNaN(a) && math.IsNaN(b) {
			return true
		}
	case []cdc.Value:
		b, ok := b.([]cdc.Value)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
