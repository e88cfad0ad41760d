package difftest

import (
	"maps"
	"slices"
)

// The rule for schema events (sink/doc.go, Schema events; mirror/doc.go): an index mirrors the
// table that bears its name now. schemaModel is that rule as the schema cases' oracle: which
// relation each captured name's index is bound to and what it must hold at the end -- the
// rows of the table bearing the name now (live), the rows its relation had when it left the
// capture (frozen: a DROP, a rename or move to an uncaptured name), or nothing (empty: its
// relation took another captured name, whose index it moved to). It is written from the rule,
// never from the sink.

// nsCaptured and nsOutside are where a relation lives: the captured namespace (PostgreSQL
// schema, MariaDB database, captured whole) or an uncaptured one.
const (
	nsCaptured = iota
	nsOutside
)

// rel is one relation: a table with its identity across renames and moves.
type rel struct {
	id   int
	tb   *table
	ns   int
	name string
	gone bool // dropped
	// captured: the relation has borne a captured name.
	captured bool
}

// idxState is what a captured name's index must hold.
type idxState uint8

const (
	idxLive   idxState = iota // the rows of the relation bearing the name now (bound)
	idxFrozen                 // the rows of the bound relation when it left the capture
	idxEmpty                  // nothing: the relation moved to another captured name
)

func (s idxState) String() string { return [...]string{"live", "frozen", "empty"}[s] }

// idxModel is one captured name's index.
type idxModel struct {
	bound  *rel     // the relation the index is bound to; nil once vacated
	state  idxState //
	frozen *frozenTable
	// enteredAt: when the bound relation came to the name by a rename or move, its table's
	// write clock then (0 when it was created under the name): the rows written up to it reach
	// the index only through the ENTERED re-snapshot, which a relation that leaves the name
	// first may never get (the source skips a table gone by the time the job reads it).
	enteredAt int
	// bore: every relation that has borne the name, in order (whose changes dead letters of
	// the name may be of).
	bore []*rel
}

// frozenTable is a relation's table and rows as they were when it left the capture.
type frozenTable struct {
	tb   *table
	rows [][]*string
}

// schemaModel is the rule's state over a case's relations.
type schemaModel struct {
	rels []*rel
	idx  map[string]*idxModel // captured name -> its index
}

func newSchemaModel() *schemaModel { return &schemaModel{idx: map[string]*idxModel{}} }

// at returns the relation bearing name in ns now, nil when none does.
func (m *schemaModel) at(ns int, name string) *rel {
	for _, r := range m.rels {
		if !r.gone && r.ns == ns && r.name == name {
			return r
		}
	}
	return nil
}

// live returns the relations of ns, in creation order.
func (m *schemaModel) live(ns int) []*rel {
	var out []*rel
	for _, r := range m.rels {
		if !r.gone && r.ns == ns {
			out = append(out, r)
		}
	}
	return out
}

// create adds a relation named name in ns; a relation created in the captured namespace enters
// the capture (see enter: the generator writes to it at once).
func (m *schemaModel) create(ns int, name string, tb *table) *rel {
	r := &rel{id: len(m.rels), tb: tb, ns: ns, name: name}
	m.rels = append(m.rels, r)
	if ns == nsCaptured {
		m.enter(r)
	}
	return r
}

// enter applies the rule when r, now bearing a captured name, is written to: an index bound to
// r under another name is vacated (emptied, its binding retired), and r's name's index binds
// r (a new identity: a new, empty generation, re-snapshotted; the same one: unchanged) and
// mirrors it.
func (m *schemaModel) enter(r *rel) {
	r.captured = true
	for name, ix := range m.idx {
		if name != r.name && ix.bound == r {
			*ix = idxModel{state: idxEmpty, bore: ix.bore}
		}
	}
	var bore []*rel
	if ix := m.idx[r.name]; ix != nil {
		bore = ix.bore
	}
	if !slices.Contains(bore, r) {
		bore = append(bore, r)
	}
	m.idx[r.name] = &idxModel{bound: r, state: idxLive, bore: bore}
}

// leave applies the rule when r leaves the capture (DROP, a rename or move to an uncaptured
// name): its index keeps the documents it had, the rows read back just before (rows).
func (m *schemaModel) leave(r *rel, rows [][]*string) {
	if ix := m.idx[r.name]; ix != nil && ix.bound == r && ix.state == idxLive {
		ix.state, ix.frozen = idxFrozen, &frozenTable{tb: cloneTable(r.tb), rows: rows}
	}
}

// drop removes r (rows: its read-back just before).
func (m *schemaModel) drop(r *rel, rows [][]*string) {
	if r.ns == nsCaptured {
		m.leave(r, rows)
	}
	r.gone = true
}

// move renames r to name in ns (rows: its read-back just before, for leaving the capture). A
// relation that comes to bear a captured name enters it (the generator writes to it at once).
func (m *schemaModel) move(r *rel, ns int, name string, rows [][]*string) {
	if r.ns == nsCaptured && (ns != nsCaptured || name != r.name) {
		m.leave(r, rows)
	}
	r.ns, r.name = ns, name
	if ns == nsCaptured {
		m.enter(r)
		m.idx[name].enteredAt = r.tb.clock
	}
}

// names returns the captured names that have an index, sorted.
func (m *schemaModel) names() []string {
	return slices.Sorted(maps.Keys(m.idx))
}

// cloneTable copies what the oracle reads of a table (columns, row keys, key history, write
// clocks), so that later changes of the relation leave the copy as it was.
func cloneTable(tb *table) *table {
	c := *tb
	c.cols = make([]*column, len(tb.cols))
	c.keyCols = nil
	for i, col := range tb.cols {
		cc := *col
		c.cols[i] = &cc
		if cc.key {
			c.keyCols = append(c.keyCols, &cc)
		}
	}
	c.keyTypes = slices.Clone(tb.keyTypes)
	c.rows = slices.Clone(tb.rows)
	c.movedFrom = maps.Clone(tb.movedFrom)
	c.written = maps.Clone(tb.written)
	return &c
}
