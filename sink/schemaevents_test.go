package sink

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// enteredLog collects the ENTERED reports of a sink.
type enteredLog struct {
	mu  sync.Mutex
	got []TableEntered
}

func (l *enteredLog) add(e TableEntered) {
	l.mu.Lock()
	l.got = append(l.got, e)
	l.mu.Unlock()
}

// take returns the reports since the last take.
func (l *enteredLog) take() []TableEntered {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// relSchema is ordersSchema(table) bound to the relation identity rel.
func relSchema(table, rel string) *cdc.TableSchema {
	s := ordersSchema(table)
	s.Relation = rel
	return s
}

// wantEntered checks the reports against want and returns them.
func wantEntered(t *testing.T, got []TableEntered, want ...TableEntered) []TableEntered {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("ENTERED %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Table != want[i].Table || got[i].Cause != want[i].Cause || got[i].From != want[i].From || got[i].Index == "" || got[i].Schema == nil {
			t.Fatalf("ENTERED %+v, want %+v", got, want)
		}
	}
	return got
}

// handled tells k that every report in es was handled.
func handled(t *testing.T, k *Sink, es []TableEntered) {
	t.Helper()
	for _, e := range es {
		if err := k.EnteredHandled(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// A table binds the first relation identity it sees; a new one (DROP and CREATE) empties it
// and reports ENTERED(replaced); the old relation's changes are void from then on, in the
// same batch and in a replay; an empty identity changes nothing; a snapshot's first read
// reports nothing, a streamed first write of a new table ENTERED(new).
func TestRelationRebind(t *testing.T) {
	f := newFakeCluster(t)
	log := &enteredLog{}
	st := statestore.NewMemory()
	k := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	old, neu := relSchema("orders", "100"), relSchema("orders", "200")
	id := old.ID
	write(t, k, []cdc.Event{ev(cdc.Read, old, 1, nil, row(1, "one", 1)), ev(cdc.Read, old, 2, nil, row(2, "two", 2))})
	wantEntered(t, log.take())
	write(t, k, []cdc.Event{ev(cdc.Insert, old, 3, nil, row(3, "three", 3)), ev(cdc.Insert, ordersSchema("orders"), 4, nil, row(4, "four", 4))})
	sameDocs(t, "bound", liveDocs(t, f, k, id), map[string]int64{"1": 1, "2": 2, "3": 3, "4": 4})
	wantEntered(t, log.take())

	replaced := []cdc.Event{ev(cdc.Insert, old, 9, nil, row(6, "old six", 6)), ev(cdc.Insert, neu, 10, nil, row(5, "five", 5))}
	write(t, k, replaced)
	sameDocs(t, "replaced", liveDocs(t, f, k, id), map[string]int64{"5": 10})
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: id, Cause: EnteredReplaced}))
	live, _ := k.Generations(id)

	write(t, k, replaced) // a replay
	sameDocs(t, "replayed", liveDocs(t, f, k, id), map[string]int64{"5": 10})
	wantEntered(t, log.take())
	if g, _ := k.Generations(id); g.Live != live.Live {
		t.Fatalf("a replay emptied the table again: %s, was %s", g.Live, live.Live)
	}
	// After a restart the record still binds 200 and retires 100.
	k3 := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	write(t, k3, []cdc.Event{ev(cdc.Insert, old, 8, nil, row(7, "old", 7)), ev(cdc.Insert, neu, 13, nil, row(8, "eight", 8))})
	sameDocs(t, "after a restart", liveDocs(t, f, k3, id), map[string]int64{"5": 10, "8": 13})
	wantEntered(t, log.take())

	// A new table's first write streamed: ENTERED(new).
	other := relSchema("customers", "300")
	write(t, k3, []cdc.Event{ev(cdc.Insert, other, 14, nil, row(1, "c", 1))})
	wantEntered(t, log.take(), TableEntered{Table: other.ID, Cause: EnteredNew})
}

// A relation that shows up under another table's name was renamed: the table it left is
// vacated (emptied, its identity retired there), the new name binds it and is reported
// ENTERED(renamed); a swap of two names empties both and reports both; after a restart the
// sink finds the relation's old table through the records.
func TestRelationVacate(t *testing.T) {
	f := newFakeCluster(t)
	st := statestore.NewMemory()
	log := &enteredLog{}
	k := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	orders, archive := relSchema("orders", "100"), relSchema("archive", "100")
	write(t, k, []cdc.Event{ev(cdc.Read, orders, 1, nil, row(1, "one", 1)), ev(cdc.Read, orders, 2, nil, row(2, "two", 2))})

	write(t, k, []cdc.Event{ev(cdc.Insert, orders, 3, nil, row(3, "before", 3)), ev(cdc.Insert, archive, 5, nil, row(4, "renamed", 4))})
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: archive.ID, Cause: EnteredRenamed, From: orders.ID}))
	sameDocs(t, "the vacated table", liveDocs(t, f, k, orders.ID), map[string]int64{})
	sameDocs(t, "the renamed table", liveDocs(t, f, k, archive.ID), map[string]int64{"4": 5})

	// A late change of the relation under its old name (a replay: a version below its
	// retirement) is void; a new relation under the vacated name gets a generation mapped for
	// it and is reported ENTERED(replaced): it may have rows from before (renamed in from a
	// name the sink does not mirror).
	write(t, k, []cdc.Event{ev(cdc.Update, orders, 4, nil, row(1, "late", 1)), ev(cdc.Insert, relSchema("orders", "400"), 7, nil, row(9, "new table", 9))})
	sameDocs(t, "the old name re-created", liveDocs(t, f, k, orders.ID), map[string]int64{"9": 7})
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: orders.ID, Cause: EnteredReplaced}))

	// A swap of two names (orders <-> archive): both emptied, both ENTERED(renamed).
	write(t, k, []cdc.Event{ev(cdc.Insert, relSchema("orders", "100"), 8, nil, row(10, "a", 10)),
		ev(cdc.Insert, relSchema("archive", "400"), 9, nil, row(11, "b", 11))})
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: orders.ID, Cause: EnteredRenamed, From: archive.ID},
		TableEntered{Table: archive.ID, Cause: EnteredRenamed, From: orders.ID}))
	sameDocs(t, "swapped orders", liveDocs(t, f, k, orders.ID), map[string]int64{"10": 8})
	sameDocs(t, "swapped archive", liveDocs(t, f, k, archive.ID), map[string]int64{"11": 9})

	// A restart: the relation 100 moves on to a third name; the new sink finds orders in the
	// records and vacates it.
	k2 := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	third := relSchema("history", "100")
	write(t, k2, []cdc.Event{ev(cdc.Insert, third, 20, nil, row(12, "c", 12))})
	wantEntered(t, log.take(), TableEntered{Table: third.ID, Cause: EnteredRenamed, From: orders.ID})
	sameDocs(t, "vacated after a restart", liveDocs(t, f, k2, orders.ID), map[string]int64{})
	sameDocs(t, "archive untouched", liveDocs(t, f, k, archive.ID), map[string]int64{"11": 9})
}

// An ENTERED report stays recorded with its table until EnteredHandled: a sink restarted in
// between reports it again when it first claims the table, once; a handled one is not.
func TestEnteredRecorded(t *testing.T) {
	f := newFakeCluster(t)
	st := statestore.NewMemory()
	log := &enteredLog{}
	k := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	a, b := relSchema("orders", "1"), relSchema("orders", "2")
	write(t, k, []cdc.Event{ev(cdc.Read, a, 1, nil, row(1, "one", 1))})
	write(t, k, []cdc.Event{ev(cdc.Insert, b, 2, nil, row(2, "two", 2))})
	wantEntered(t, log.take(), TableEntered{Table: a.ID, Cause: EnteredReplaced})

	k2 := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	write(t, k2, []cdc.Event{ev(cdc.Insert, b, 3, nil, row(3, "three", 3))})
	got := log.take()
	wantEntered(t, got, TableEntered{Table: a.ID, Cause: EnteredReplaced})
	write(t, k2, []cdc.Event{ev(cdc.Insert, b, 4, nil, row(4, "four", 4))})
	wantEntered(t, log.take())
	if err := k2.EnteredHandled(context.Background(), got[0]); err != nil {
		t.Fatal(err)
	}
	k3 := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	write(t, k3, []cdc.Event{ev(cdc.Insert, b, 5, nil, row(5, "five", 5))})
	wantEntered(t, log.take())
	sameDocs(t, "after the restarts", liveDocs(t, f, k3, a.ID), map[string]int64{"2": 2, "3": 3, "4": 4, "5": 5})

	// A new table's streamed first write, handled before a restart: not reported again.
	c := relSchema("customers", "9")
	write(t, k3, []cdc.Event{ev(cdc.Insert, c, 6, nil, row(1, "c", 1))})
	got = log.take()
	wantEntered(t, got, TableEntered{Table: c.ID, Cause: EnteredNew})
	if err := k3.EnteredHandled(context.Background(), got[0]); err != nil {
		t.Fatal(err)
	}
	k4 := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	write(t, k4, []cdc.Event{ev(cdc.Insert, c, 7, nil, row(2, "c", 2))})
	wantEntered(t, log.take())
}

// Under shared_owner identities are not bound: nothing is emptied, nothing reported.
func TestRelationSharedOwner(t *testing.T) {
	f := newFakeCluster(t)
	log := &enteredLog{}
	k := fakeSink(t, f, Config{SharedOwner: "group"}, statestore.NewMemory(), Options{OnEntered: log.add})
	write(t, k, []cdc.Event{ev(cdc.Read, relSchema("orders", "1"), 1, nil, row(1, "one", 1))})
	write(t, k, []cdc.Event{ev(cdc.Insert, relSchema("orders", "2"), 2, nil, row(2, "two", 2))})
	if ix := f.Index(indexOf(t, k, "orders")); ix == nil || len(ix.Docs) != 2 {
		t.Fatalf("shared owner: %+v", ix)
	}
	wantEntered(t, log.take())
}

// A relation renamed into a name the sink never wrote (MariaDB: two Truncates with new
// identities, see package mysqlcdc) is reported once, ENTERED(replaced): a table whose first
// write is a Truncate misses no row, so that Truncate reports nothing (nor does a CREATE's);
// a Truncate without a key, or without columns (a MariaDB reader behind the DDL), is applied,
// never dead-lettered, its identity bound; a replay reports nothing.
func TestRelationEnteredOnceByTruncates(t *testing.T) {
	f := newFakeCluster(t)
	log := &enteredLog{}
	st := statestore.NewMemory()
	k := fakeSink(t, f, Config{ReadAlias: true}, st, Options{OnEntered: log.add})
	trunc := func(sch *cdc.TableSchema, v int64) cdc.Event {
		return cdc.Event{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(v)}
	}
	// CREATE of a new name: one Truncate, nothing to re-snapshot.
	created := relSchema("created", "5")
	if dead := write(t, k, []cdc.Event{trunc(created, 5), ev(cdc.Insert, created, 6, nil, row(1, "one", 1))}); len(dead) != 0 {
		t.Fatalf("dead letters %v", dead)
	}
	wantEntered(t, log.take())

	// RENAME into a new name: two Truncates, one report.
	f0, f1 := relSchema("renamed", "10"), relSchema("renamed", "11")
	batch := []cdc.Event{trunc(f0, 10), trunc(f1, 11), ev(cdc.Insert, f1, 12, nil, row(2, "two", 2))}
	if dead := write(t, k, batch); len(dead) != 0 {
		t.Fatalf("dead letters %v", dead)
	}
	got := wantEntered(t, log.take(), TableEntered{Table: f1.ID, Cause: EnteredReplaced})
	sameDocs(t, "renamed", liveDocs(t, f, k, f1.ID), map[string]int64{"2": 12})
	if dead := write(t, k, batch); len(dead) != 0 { // a replay
		t.Fatalf("replayed: dead letters %v", dead)
	}
	wantEntered(t, log.take())
	handled(t, k, got)

	// The same with Truncates in batches of their own.
	g0, g1 := relSchema("split", "20"), relSchema("split", "21")
	write(t, k, []cdc.Event{trunc(g0, 20)})
	write(t, k, []cdc.Event{trunc(g1, 21)})
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: g1.ID, Cause: EnteredReplaced}))

	// A Truncate whose schema has no key, and one with no columns: applied, identity bound.
	keyless := relSchema("renamed", "30")
	keyless.PrimaryKey = nil
	if dead := write(t, k, []cdc.Event{trunc(keyless, 30)}); len(dead) != 0 {
		t.Fatalf("keyless truncate: dead letters %v", dead)
	}
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: f1.ID, Cause: EnteredReplaced}))
	sameDocs(t, "truncated without a key", liveDocs(t, f, k, f1.ID), map[string]int64{})
	bare := &cdc.TableSchema{ID: f1.ID, Relation: "40"}
	neu := relSchema("renamed", "40")
	if dead := write(t, k, []cdc.Event{trunc(bare, 40), ev(cdc.Insert, neu, 41, nil, row(3, "three", 3))}); len(dead) != 0 {
		t.Fatalf("truncate without columns: dead letters %v", dead)
	}
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: f1.ID, Cause: EnteredReplaced}))
	sameDocs(t, "truncated without columns", liveDocs(t, f, k, f1.ID), map[string]int64{"3": 41})
	if r := k.gens[k.tmpl.expand(f1.ID)].Relation(); r != "40" {
		t.Fatalf("bound to %q after a truncate without columns, want 40", r)
	}
	// Without columns, of a name never written, its first row in the same batch: reported once.
	nobody := &cdc.TableSchema{ID: ordersSchema("fresh").ID, Relation: "50"}
	fresh := relSchema("fresh", "51")
	if dead := write(t, k, []cdc.Event{trunc(nobody, 50), trunc(&cdc.TableSchema{ID: nobody.ID, Relation: "51"}, 51),
		ev(cdc.Insert, fresh, 52, nil, row(4, "four", 4))}); len(dead) != 0 {
		t.Fatalf("truncates without columns of a new name: dead letters %v", dead)
	}
	wantEntered(t, log.take(), TableEntered{Table: fresh.ID, Cause: EnteredReplaced})
	sameDocs(t, "a new name", liveDocs(t, f, k, fresh.ID), map[string]int64{"4": 52})
	// Alone in their batches (a relation renamed in, read from behind): the index is created,
	// the relation entered once (a re-snapshot), its fields mapped from the rows to come.
	other := relSchema("other", "61")
	for _, b := range [][]cdc.Event{{trunc(&cdc.TableSchema{ID: other.ID, Relation: "60"}, 60)},
		{trunc(&cdc.TableSchema{ID: other.ID, Relation: "61"}, 61)}} {
		if dead := write(t, k, b); len(dead) != 0 {
			t.Fatalf("truncate without columns of a new name: dead letters %v", dead)
		}
	}
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: other.ID, Cause: EnteredReplaced}))
	write(t, k, []cdc.Event{ev(cdc.Read, other, 62, nil, row(5, "five", 5))})
	wantEntered(t, log.take())
	sameDocs(t, "entered without columns", liveDocs(t, f, k, other.ID), map[string]int64{"5": 62})
	g, _ := k.Generations(other.ID)
	if ix := f.Index(g.Live); len(ix.Dynamic) != 0 || len(ix.Props) != len(other.Columns) {
		t.Fatalf("fields of an index entered without columns: %v, mapped dynamically %v", ix.Props, ix.Dynamic)
	}
}

// A relation that binds a table through a Truncate without columns (a MariaDB reader whose
// description of the relation is older than an ALTER TABLE it read) gets a generation without
// the former relation's fields: the rows that follow map theirs, so a column whose type
// changed is mapped for its new type, not the old field's. A Truncate without columns of the
// relation bound already keeps the live generation's mapping (a changed type is not remapped).
func TestEnteredWithoutColumnsMapsTheNewRelation(t *testing.T) {
	f := newFakeCluster(t)
	log := &enteredLog{}
	k := fakeSink(t, f, Config{ReadAlias: true}, statestore.NewMemory(), Options{OnEntered: log.add})
	trunc := func(sch *cdc.TableSchema, v int64) cdc.Event {
		return cdc.Event{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(v)}
	}
	fieldType := func(name string) string {
		t.Helper()
		g, _ := k.Generations(ordersSchema("widened").ID)
		var m struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(f.Index(g.Live).Props[name], &m); err != nil {
			t.Fatalf("field %s of %s: %v", name, g.Live, err)
		}
		return m.Type
	}
	before := relSchema("widened", "70")
	write(t, k, []cdc.Event{trunc(before, 70), ev(cdc.Insert, before, 71, nil, row(1, "one", 1))})
	if got := fieldType("qty"); got != "integer" {
		t.Fatalf("qty mapped %q, want integer", got)
	}
	// The same relation truncated, its columns unknown: the live mapping is kept.
	write(t, k, []cdc.Event{trunc(&cdc.TableSchema{ID: before.ID, Relation: "70"}, 72)})
	if got := fieldType("qty"); got != "integer" {
		t.Fatalf("after a truncate without columns of the same relation qty is mapped %q, want integer (kept)", got)
	}
	// Another relation (the same one renamed away and back: a new identity), in a batch of
	// its own, then its rows.
	after := relSchema("widened", "80")
	after.Columns[2].Bits, after.Columns[2].SourceType = 64, "bigint"
	for _, b := range [][]cdc.Event{{trunc(&cdc.TableSchema{ID: before.ID, Relation: "80"}, 80)}, {ev(cdc.Read, after, 82, nil, row(2, "two", 1<<40))}} {
		if dead := write(t, k, b); len(dead) != 0 {
			t.Fatalf("dead letters %v", dead)
		}
	}
	handled(t, k, wantEntered(t, log.take(), TableEntered{Table: after.ID, Cause: EnteredReplaced}))
	if got := fieldType("qty"); got != "long" {
		t.Fatalf("the new relation's qty is mapped %q, want long", got)
	}
	sameDocs(t, "widened", liveDocs(t, f, k, after.ID), map[string]int64{"2": 82})
}
