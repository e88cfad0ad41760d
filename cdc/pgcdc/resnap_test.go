package pgcdc

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestResnapCheckpointRoundTrip(t *testing.T) {
	rs := &resnapState{Jobs: []resnapJob{{ID: "a", Tables: []tableRef{{"s", "t"}}, Total: 2, Where: "id > 1"}, {ID: "b", All: true}},
		Key: []string{"7", "x"}, Rows: 12}
	d, err := decodeCheckpoint(encodeCheckpoint(0x1234, nil, rs, nil))
	if err != nil {
		t.Fatal(err)
	}
	if d.lsn != 0x1234 || !reflect.DeepEqual(d.resnap, rs) || d.snap != nil {
		t.Fatalf("round trip: %+v, want %+v", d.resnap, rs)
	}
	// A state without jobs is no re-snapshot; a job naming nothing is not this package's.
	if d, err := decodeCheckpoint([]byte(`{"v":1,"lsn":"0/10","resnap":{"jobs":[]}}`)); err != nil || d.resnap != nil {
		t.Fatalf("empty jobs: %+v, %v", d.resnap, err)
	}
	if _, err := decodeCheckpoint([]byte(`{"v":1,"lsn":"0/10","resnap":{"jobs":[{"id":"x"}]}}`)); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("a job without tables: %v", err)
	}
}

func TestParseResnapRequest(t *testing.T) {
	src, err := New("postgres://u@localhost/db", &Options{Slot: "mine", Tables: []Table{{Name: "t"}, {Schema: "s", Name: AllTables}}})
	if err != nil {
		t.Fatal(err)
	}
	st := &stream{src: src}
	for _, c := range []struct {
		content string
		want    *resnapJob
		err     bool
	}{
		{`{"tables": ["t", "public.t", "s.a.b", {"schema": "s", "name": "x"}], "where": "id < 3"}`,
			&resnapJob{ID: "rs-0/10", Tables: []tableRef{{"public", "t"}, {"s", "a.b"}, {"s", "x"}}, Total: 3, Where: "id < 3"}, false},
		{`{"id": "all"}`, &resnapJob{ID: "all", All: true}, false},
		{`{"slot": "other", "tables": ["t"]}`, nil, false}, // another stream's
		{`{"tables": ["public.u"]}`, nil, false},           // another source's table
		{`{"slot": "mine", "tables": ["public.u"]}`, nil, true},
		{`{"tables": [3]}`, nil, true},
		{`not json`, nil, true},
	} {
		got, err := st.parseResnapRequest([]byte(c.content), "0/10")
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", c.content, got, err, c.want, c.err)
		}
		if err != nil && !errors.Is(err, ErrResnapshotRequest) {
			t.Errorf("%s: %v is not ErrResnapshotRequest", c.content, err)
		}
	}
	// The request Source.Resnapshot writes reads back the same.
	b, _ := json.Marshal(resnapRequest{Slot: "mine", ID: "q", Tables: []requestTable{{"s", "a.b"}}})
	if got, err := st.parseResnapRequest(b, "0/10"); err != nil || got.Tables[0] != (tableRef{"s", "a.b"}) {
		t.Fatalf("%s: %+v, %v", b, got, err)
	}
}
