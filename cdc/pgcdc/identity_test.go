package pgcdc

import (
	"encoding/json"
	"errors"
	"testing"
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
