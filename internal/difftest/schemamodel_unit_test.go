package difftest

import (
	"fmt"
	"strings"
	"testing"
)

// TestSchemaModel checks the oracle's model of the rule for schema events on sequences of
// operations, without servers.
func TestSchemaModel(t *testing.T) {
	rows := func(n int) [][]*string { return make([][]*string, n) }
	state := func(m *schemaModel) string {
		var parts []string
		for _, name := range m.names() {
			ix := m.idx[name]
			s := name + ":" + ix.state.String()
			if ix.bound != nil {
				s += fmt.Sprintf("(r%d)", ix.bound.id)
			}
			if ix.frozen != nil {
				s += fmt.Sprintf("[%d]", len(ix.frozen.rows))
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, " ")
	}
	cases := []struct {
		name string
		ops  func(m *schemaModel)
		want string
	}{
		{"create", func(m *schemaModel) { m.create(nsCaptured, "a", &table{}) }, "a:live(r0)"},
		{"created outside: no index", func(m *schemaModel) { m.create(nsOutside, "a", &table{}) }, ""},
		{"drop keeps the last documents", func(m *schemaModel) {
			m.drop(m.create(nsCaptured, "a", &table{}), rows(3))
		}, "a:frozen(r0)[3]"},
		{"drop then create the same name", func(m *schemaModel) {
			m.drop(m.create(nsCaptured, "a", &table{}), rows(3))
			m.create(nsCaptured, "a", &table{})
		}, "a:live(r1)"},
		{"rename to a captured name: the old index is vacated", func(m *schemaModel) {
			m.move(m.create(nsCaptured, "a", &table{}), nsCaptured, "b", rows(2))
		}, "a:empty b:live(r0)"},
		{"rename back", func(m *schemaModel) {
			r := m.create(nsCaptured, "a", &table{})
			m.move(r, nsCaptured, "b", rows(2))
			m.move(r, nsCaptured, "a", rows(2))
		}, "a:live(r0) b:empty"},
		{"rename onto a dropped name's index", func(m *schemaModel) {
			m.drop(m.create(nsCaptured, "b", &table{}), rows(4))
			m.move(m.create(nsCaptured, "a", &table{}), nsCaptured, "b", rows(1))
		}, "a:empty b:live(r1)"},
		{"moved out keeps the last documents", func(m *schemaModel) {
			m.move(m.create(nsCaptured, "a", &table{}), nsOutside, "a", rows(5))
		}, "a:frozen(r0)[5]"},
		{"moved out and back under another name", func(m *schemaModel) {
			r := m.create(nsCaptured, "a", &table{})
			m.move(r, nsOutside, "x", rows(5))
			m.move(r, nsCaptured, "b", nil)
		}, "a:empty b:live(r0)"},
		{"moved out and back under its name", func(m *schemaModel) {
			r := m.create(nsCaptured, "a", &table{})
			m.move(r, nsOutside, "a", rows(5))
			m.move(r, nsCaptured, "a", nil)
		}, "a:live(r0)"},
		{"created outside, moved in", func(m *schemaModel) {
			m.move(m.create(nsOutside, "x", &table{}), nsCaptured, "a", nil)
		}, "a:live(r0)"},
		{"a dropped relation outside leaves the frozen index", func(m *schemaModel) {
			r := m.create(nsCaptured, "a", &table{})
			m.move(r, nsOutside, "a", rows(2))
			m.drop(r, nil)
		}, "a:frozen(r0)[2]"},
		{"moved out, its name re-created, moved back under another name", func(m *schemaModel) {
			r := m.create(nsCaptured, "a", &table{})
			m.move(r, nsOutside, "a", rows(2))
			m.create(nsCaptured, "a", &table{})
			m.move(r, nsCaptured, "b", nil)
		}, "a:live(r1) b:live(r0)"},
	}
	for _, c := range cases {
		m := newSchemaModel()
		c.ops(m)
		if got := state(m); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// A frozen copy keeps the columns it had: a later ALTER of the relation leaves it alone.
	tb := &table{cols: []*column{{name: "id", key: true}, {name: "n", t: &colType{sql: "smallint"}}}}
	tb.keyCols = tb.cols[:1]
	m := newSchemaModel()
	r := m.create(nsCaptured, "a", tb)
	m.move(r, nsOutside, "a", rows(1))
	tb.cols[1].t = &colType{sql: "bigint"}
	tb.cols = append(tb.cols, &column{name: "added"})
	if f := m.idx["a"].frozen.tb; len(f.cols) != 2 || f.cols[1].t.sql != "smallint" || f.keyCols[0] != f.cols[0] {
		t.Errorf("the frozen table changed with the relation: %+v", f.cols)
	}
}
