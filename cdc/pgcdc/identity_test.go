package pgcdc

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TestRelationMarksCheckpoint: relation marks travel in checkpoints (the fast path writes what
// json.Marshal would), a checkpoint written before they existed has none, and a malformed
// entry is ErrBadCheckpoint.
func TestRelationMarksCheckpoint(t *testing.T) {
	marks := map[uint32]relMark{
		16384: {N: 2},
		16390: {Away: true, From: &tableRef{Schema: "Sales", Name: "orders"}},
		16391: {N: 1, Away: true},
	}
	enc := encodeMarks(marks)
	for _, cp := range [][]byte{
		encodeCheckpoint(0x16B3748, nil, nil, enc),
		encodeCheckpoint(0x20, &snapshotState{Floor: "0/1F"}, nil, enc),
	} {
		if !json.Valid(cp) {
			t.Fatalf("not JSON: %s", cp)
		}
		d, err := decodeCheckpoint(cp)
		if err != nil {
			t.Fatalf("%s: %v", cp, err)
		}
		if len(d.marks) != len(marks) || d.marks[16384].N != 2 || !d.marks[16390].Away || *d.marks[16390].From != (tableRef{Schema: "Sales", Name: "orders"}) ||
			d.marks[16391].From != nil || !d.marks[16391].Away || d.marks[16391].N != 1 {
			t.Fatalf("%s: marks %+v", cp, d.marks)
		}
		again := encodeMarks(d.marks)
		if string(again) != string(enc) {
			t.Fatalf("marks re-encode as %s, were %s", again, enc)
		}
	}
	var via checkpoint
	if err := json.Unmarshal(encodeCheckpoint(0x16B3748, nil, nil, enc), &via); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(via); string(b) != string(encodeCheckpoint(0x16B3748, nil, nil, enc)) {
		t.Fatalf("fast path %s, json.Marshal %s", encodeCheckpoint(0x16B3748, nil, nil, enc), b)
	}
	if d, err := decodeCheckpoint([]byte(`{"v":1,"lsn":"0/16B3748"}`)); err != nil || d.marks != nil {
		t.Fatalf("a checkpoint without marks: %+v, %v", d.marks, err)
	}
	for _, bad := range []string{
		`{"v":1,"lsn":"0/1","rels":{"x":{"n":1}}}`,
		`{"v":1,"lsn":"0/1","rels":{"0":{"n":1}}}`,
		`{"v":1,"lsn":"0/1","rels":{"5":{"n":-1}}}`,
		`{"v":1,"lsn":"0/1","rels":[1]}`,
	} {
		if _, err := decodeCheckpoint([]byte(bad)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: %v, want ErrBadCheckpoint", bad, err)
		}
	}
	if encodeMarks(nil) != nil || identOf(7, 0) != "7" || identOf(7, 3) != "7.3" {
		t.Fatal("identities")
	}
}

// TestNoteMembership follows one relation in and out of the captured names: it keeps its
// identity through renames within them, and away from them; it gets a new one when it comes
// back to the name it left or, when the stream never saw it captured, to any captured name;
// coming back under another captured name it keeps its identity (the sink empties the name it
// left). Every change of the marks waits for a checkpoint.
func TestNoteMembership(t *testing.T) {
	src, err := New("postgres://u@localhost/db", &Options{Name: "n", Tables: []Table{{Schema: "c", Name: AllTables}}})
	if err != nil {
		t.Fatal(err)
	}
	src.resetMarks(nil)
	st := &stream{src: src, relations: map[uint32]*relation{}}
	id := func(s, n string) cdc.TableID { return src.tableID("db", Table{Schema: s, Name: n}) }
	// step sends a relation message of oid under schema.name and returns its identity then.
	step := func(oid uint32, s, n string) string {
		t.Helper()
		prev := st.relations[oid]
		captured := src.captures(Table{Schema: s, Name: n})
		st.noteMembership(oid, prev, id(s, n), captured)
		st.relations[oid] = &relation{id: id(s, n), captured: captured}
		return src.ident(oid)
	}
	for i, c := range []struct {
		oid        uint32
		schema, nm string
		want       string
		dirty      bool
	}{
		{1, "c", "t", "1", false},
		{1, "c", "u", "1", false},  // renamed within the capture
		{1, "x", "u", "1", true},   // away from c.u
		{1, "x", "v", "1", false},  // still away
		{1, "c", "u", "1.1", true}, // back to the name it left
		{1, "x", "u", "1.1", true}, // away again
		{1, "c", "w", "1.1", true}, // back under another captured name: same identity
		{2, "x", "a", "2", true},   // first seen away: unknown whether captured before
		{2, "c", "b", "2.1", true}, // so any captured name is a return
	} {
		st.marksDirty = false
		if got := step(c.oid, c.schema, c.nm); got != c.want || st.marksDirty != c.dirty {
			t.Fatalf("step %d (%d as %s.%s): identity %s dirty %v, want %s dirty %v", i, c.oid, c.schema, c.nm, got, st.marksDirty, c.want, c.dirty)
		}
	}
	if st.marksCheckpoint() == nil || st.marksDirty {
		t.Fatal("the marks of the returned relations are not in the checkpoint")
	}
	d, err := decodeCheckpoint(encodeCheckpoint(0x10, nil, nil, st.marksCheckpoint()))
	if err != nil || d.marks[1].N != 1 || d.marks[2].N != 1 || d.marks[1].Away || d.marks[2].Away {
		t.Fatalf("marks %+v, %v", d.marks, err)
	}
}
