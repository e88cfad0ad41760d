package sink

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// toastSchema is a table with TOASTable columns: id (PK), n, big (text), doc (json), raw (bytea).
func toastSchema(table string) *cdc.TableSchema {
	return &cdc.TableSchema{
		ID: cdc.TableID{Connector: "postgres", Source: "shop", Database: "shop", Schema: "public", Table: table},
		Columns: []cdc.Column{
			{Name: "id", Kind: cdc.KindInt, Bits: 64, SourceType: "bigint"},
			{Name: "n", Kind: cdc.KindInt, Bits: 32, SourceType: "integer", Nullable: true},
			{Name: "big", Kind: cdc.KindText, SourceType: "text", Nullable: true},
			{Name: "doc", Kind: cdc.KindJSON, SourceType: "jsonb", Nullable: true},
			{Name: "raw", Kind: cdc.KindBinary, SourceType: "bytea", Nullable: true},
		},
		PrimaryKey: []int{0},
	}
}

var unchanged = cdc.Unchanged{}

func toastRow(id, n int64, tag string) []cdc.Value {
	return []cdc.Value{id, n, "big text " + tag, cdc.RawJSON(`{"tag":"` + tag + `","n":12345678901234567890.123}`), cdc.Base64("AP8=")}
}

// cloneBatch copies the events' rows, so that a test can tell whether Write changed them.
func cloneBatch(b []cdc.Event) []cdc.Event {
	out := slices.Clone(b)
	for i := range out {
		out[i].Before, out[i].After = slices.Clone(out[i].Before), slices.Clone(out[i].After)
	}
	return out
}

// writeUnmodified writes the batch and fails when Write changed any of its rows.
func writeUnmodified(t *testing.T, k *Sink, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	t.Helper()
	was := cloneBatch(batch)
	dead, err := k.Write(context.Background(), batch)
	if !reflect.DeepEqual(batch, was) {
		t.Fatal("Write modified the batch")
	}
	return dead, err
}

// stored is the fake's document as field -> JSON text.
func stored(t *testing.T, f *fakeCluster, index, id string) map[string]string {
	t.Helper()
	ix := f.Index(index)
	if ix == nil {
		t.Fatalf("no index %s", index)
	}
	d, ok := ix.Docs[id]
	if !ok || d.Deleted {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(d.Source, &fields); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range fields {
		out[k] = string(v)
	}
	return out
}

// wantDoc compares a stored document with the document of row.
func wantDoc(t *testing.T, f *fakeCluster, index, id string, sch *cdc.TableSchema, row []cdc.Value) {
	t.Helper()
	b, err := AppendDocument(nil, sch, row)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for k, v := range fields {
		want[k] = string(v)
	}
	if got := stored(t, f, index, id); !reflect.DeepEqual(got, want) {
		t.Fatalf("document %s:\n got %v\nwant %v", id, got, want)
	}
}

type unchangedRecorder struct {
	noObserver
	mu    sync.Mutex
	stats []UnchangedStats
}

func (r *unchangedRecorder) UnchangedFilled(s UnchangedStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats = append(r.stats, s)
}

func (r *unchangedRecorder) last(t *testing.T) UnchangedStats {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stats) == 0 {
		t.Fatal("no UnchangedFilled call")
	}
	s := r.stats[len(r.stats)-1]
	s.Duration = 0
	return s
}

// Unchanged values are taken from the newest older change of the row in the same batch --
// also across a key change, whose old _id holds the previous state -- without reading the
// index, and the batch's rows stay as they were.
func TestUnchangedFilledFromBatch(t *testing.T) {
	f := newFakeCluster(t)
	obs := &unchangedRecorder{}
	k := fakeSink(t, f, Config{}, nil, Options{Observer: obs})
	sch := toastSchema("t")
	one := toastRow(1, 1, "one")
	five := toastRow(5, 5, "five")
	batch := []cdc.Event{
		ev(cdc.Insert, sch, 1, nil, one),
		ev(cdc.Update, sch, 2, nil, []cdc.Value{int64(1), int64(2), unchanged, unchanged, unchanged}),
		ev(cdc.Update, sch, 3, nil, []cdc.Value{int64(1), int64(3), "changed", unchanged, unchanged}),
		ev(cdc.Update, sch, 4, nil, []cdc.Value{int64(1), int64(4), unchanged, unchanged, cdc.Base64("AQI=")}),
		ev(cdc.Insert, sch, 5, nil, five),
		// The key moves 5 -> 6, then 6 changes: both take big, doc and raw from row 5.
		ev(cdc.Update, sch, 6, []cdc.Value{int64(5), nil, nil, nil, nil}, []cdc.Value{int64(6), int64(6), unchanged, unchanged, unchanged}),
		ev(cdc.Update, sch, 7, nil, []cdc.Value{int64(6), int64(7), unchanged, unchanged, unchanged}),
	}
	dead, err := writeUnmodified(t, k, batch)
	if err != nil || len(dead) != 0 {
		t.Fatalf("Write: %v, dead %v", err, dead)
	}
	if f.Count("_mget") != 0 {
		t.Fatalf("%d _mget requests for values the batch holds", f.Count("_mget"))
	}
	idx := indexOf(t, k, "t")
	wantDoc(t, f, idx, "1", sch, []cdc.Value{int64(1), int64(4), "changed", one[3], cdc.Base64("AQI=")})
	wantDoc(t, f, idx, "6", sch, []cdc.Value{int64(6), int64(7), five[2], five[3], five[4]})
	if stored(t, f, idx, "5") != nil {
		t.Fatal("the old _id of the key change is still there")
	}
	if got := obs.last(t); got != (UnchangedStats{FromBatch: 3 + 2 + 2 + 3 + 3}) {
		t.Fatalf("stats %+v", got)
	}
}

// Values the batch lacks come from the stored documents, with one _mget per index, byte for
// byte (the JSON number inside doc keeps its digits); a key change reads the old _id.
func TestUnchangedFilledFromIndex(t *testing.T) {
	f := newFakeCluster(t)
	obs := &unchangedRecorder{}
	k := fakeSink(t, f, Config{}, nil, Options{Observer: obs})
	sch := toastSchema("t")
	rows := [][]cdc.Value{toastRow(1, 1, "one"), toastRow(2, 2, "two"), toastRow(3, 3, "three")}
	write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, rows[0]), ev(cdc.Insert, sch, 2, nil, rows[1]), ev(cdc.Insert, sch, 3, nil, rows[2])})
	batch := []cdc.Event{
		ev(cdc.Update, sch, 10, nil, []cdc.Value{int64(1), int64(10), unchanged, unchanged, unchanged}),
		ev(cdc.Update, sch, 11, nil, []cdc.Value{int64(2), int64(11), "new", unchanged, nil}),
		ev(cdc.Update, sch, 12, nil, []cdc.Value{int64(1), int64(12), unchanged, unchanged, unchanged}),
		ev(cdc.Update, sch, 13, []cdc.Value{int64(3), nil, nil, nil, nil}, []cdc.Value{int64(7), int64(13), unchanged, unchanged, unchanged}),
	}
	dead, err := writeUnmodified(t, k, batch)
	if err != nil || len(dead) != 0 {
		t.Fatalf("Write: %v, dead %v", err, dead)
	}
	if f.Count("_mget") != 1 {
		t.Fatalf("%d _mget requests, want 1", f.Count("_mget"))
	}
	idx := indexOf(t, k, "t")
	wantDoc(t, f, idx, "1", sch, []cdc.Value{int64(1), int64(12), rows[0][2], rows[0][3], rows[0][4]})
	wantDoc(t, f, idx, "2", sch, []cdc.Value{int64(2), int64(11), "new", rows[1][3], nil})
	wantDoc(t, f, idx, "7", sch, []cdc.Value{int64(7), int64(13), rows[2][2], rows[2][3], rows[2][4]})
	if stored(t, f, idx, "3") != nil {
		t.Fatal("the old _id of the key change is still there")
	}
	if got := obs.last(t); got != (UnchangedStats{Rows: 3, FromIndex: 3 + 1 + 3, Requests: 1}) {
		t.Fatalf("stats %+v", got)
	}
}

// A row whose unchanged values no stored document holds is dead-lettered with a reason that
// names the column and never the row; the rest of the batch is written.
func TestUnchangedWithoutStoredDocument(t *testing.T) {
	f := newFakeCluster(t)
	obs := &unchangedRecorder{}
	k := fakeSink(t, f, Config{}, nil, Options{Observer: obs})
	sch := toastSchema("t")
	// Row 4 was written before the table had big, doc and raw.
	narrow := &cdc.TableSchema{ID: sch.ID, Columns: sch.Columns[:2], PrimaryKey: []int{0}}
	write(t, k, []cdc.Event{ev(cdc.Insert, narrow, 1, nil, []cdc.Value{int64(4), int64(4)})})
	batch := []cdc.Event{
		ev(cdc.Update, sch, 10, nil, []cdc.Value{int64(9), int64(10), "secret-1", unchanged, unchanged}), // never written
		ev(cdc.Insert, sch, 11, nil, toastRow(2, 2, "two")),
		ev(cdc.Update, sch, 12, nil, []cdc.Value{int64(4), int64(12), unchanged, nil, nil}), // no field big
		ev(cdc.Delete, sch, 13, []cdc.Value{int64(5), nil, nil, nil, nil}, nil),
		ev(cdc.Update, sch, 14, nil, []cdc.Value{int64(5), int64(14), "secret-2", unchanged, nil}), // deleted just before
	}
	dead, err := writeUnmodified(t, k, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{
		0: `column "doc": the source did not resend an unchanged TOAST value and the index holds no document to take it from`,
		2: `column "big": the source did not resend an unchanged TOAST value and the index's document lacks the field`,
		4: `column "doc": the source did not resend an unchanged TOAST value and its previous change in the batch deleted the row`,
	}
	if len(dead) != len(want) {
		t.Fatalf("dead letters %+v", dead)
	}
	for _, d := range dead {
		w, ok := want[d.Index]
		if !ok || !strings.HasPrefix(d.Reason, unchangedPrefix) || !strings.Contains(d.Reason, w) ||
			!strings.Contains(d.Reason, "REPLICA IDENTITY FULL") || strings.Contains(d.Reason, "secret") {
			t.Fatalf("dead letter %d: %q", d.Index, d.Reason)
		}
	}
	idx := indexOf(t, k, "t")
	wantDoc(t, f, idx, "2", sch, toastRow(2, 2, "two"))
	if stored(t, f, idx, "9") != nil || stored(t, f, idx, "5") != nil || stored(t, f, idx, "4")["n"] != "4" {
		t.Fatal("a dead-lettered row was written")
	}
	if got := obs.last(t); got != (UnchangedStats{Rows: 3, DeadLettered: 3, Requests: 1}) {
		t.Fatalf("stats %+v", got)
	}
}

// A replayed update whose row the index already holds in a newer state is not written (the
// write would be a 409) and not dead-lettered, also when its key moved and the old _id is gone.
func TestUnchangedReplayIsSuperseded(t *testing.T) {
	f := newFakeCluster(t)
	obs := &unchangedRecorder{}
	k := fakeSink(t, f, Config{}, nil, Options{Observer: obs})
	sch := toastSchema("t")
	write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, toastRow(1, 1, "one")), ev(cdc.Insert, sch, 2, nil, toastRow(2, 2, "two"))})
	moved := []cdc.Event{
		ev(cdc.Update, sch, 5, nil, []cdc.Value{int64(1), int64(5), unchanged, unchanged, unchanged}),
		ev(cdc.Update, sch, 6, []cdc.Value{int64(2), nil, nil, nil, nil}, []cdc.Value{int64(8), int64(6), unchanged, unchanged, unchanged}),
	}
	if dead := write(t, k, moved); len(dead) != 0 {
		t.Fatalf("dead letters %v", dead)
	}
	idx := indexOf(t, k, "t")
	after := []map[string]string{stored(t, f, idx, "1"), stored(t, f, idx, "8")}
	bulks := f.Count("_bulk")
	// The same batch again, as after a crash between acknowledgement and checkpoint: row 1 is
	// stored at version 5, the old _id 2 is deleted and 8 is stored at version 6.
	dead, err := writeUnmodified(t, k, moved)
	if err != nil || len(dead) != 0 {
		t.Fatalf("replay: %v, dead %v", err, dead)
	}
	if got := obs.last(t); got != (UnchangedStats{Rows: 2, Superseded: 2, Requests: 1}) {
		t.Fatalf("stats %+v", got)
	}
	// Only the delete of the old _id 2 was sent again.
	if f.Count("_bulk") != bulks+1 || !reflect.DeepEqual(after, []map[string]string{stored(t, f, idx, "1"), stored(t, f, idx, "8")}) {
		t.Fatalf("the replay wrote: %d _bulk requests", f.Count("_bulk")-bulks)
	}
	// An older update replayed after a newer one without them: superseded too.
	write(t, k, []cdc.Event{ev(cdc.Update, sch, 20, nil, []cdc.Value{int64(1), int64(20), "twenty", nil, nil})})
	if dead := write(t, k, moved[:1]); len(dead) != 0 || stored(t, f, idx, "1")["n"] != "20" {
		t.Fatalf("older replay: dead %v, n %s", dead, stored(t, f, idx, "1")["n"])
	}
}

// A failed _mget is backpressure (nothing written; the same batch succeeds later), a rejected
// one is fatal, and a write alias rotated away is the fence's refusal.
func TestUnchangedMgetFailures(t *testing.T) {
	sch := toastSchema("t")
	batch := []cdc.Event{
		ev(cdc.Insert, sch, 10, nil, toastRow(3, 3, "three")),
		ev(cdc.Update, sch, 11, nil, []cdc.Value{int64(1), int64(11), unchanged, unchanged, unchanged}),
	}
	setup := func(t *testing.T) (*fakeCluster, *Sink) {
		f := newFakeCluster(t)
		k := fakeSink(t, f, Config{}, nil, Options{})
		write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, toastRow(1, 1, "one"))})
		return f, k
	}
	for _, c := range []struct {
		name   string
		status int
		bp     bool
	}{{"503", 503, true}, {"429", 429, true}, {"reset", -1, true}, {"400", 400, false}, {"403", 403, false}} {
		t.Run(c.name, func(t *testing.T) {
			f, k := setup(t)
			f.failWhole("_mget", func(int) int { return c.status })
			bulks := f.Count("_bulk")
			_, err := writeUnmodified(t, k, batch)
			wantFailure(t, "Write", err, !c.bp)
			if f.Count("_bulk") != bulks {
				t.Fatal("a _bulk was sent after the _mget failed")
			}
			if c.bp {
				f.failWhole("_mget", nil)
				if dead := write(t, k, batch); len(dead) != 0 {
					t.Fatalf("retry: dead %v", dead)
				}
				if got := stored(t, f, indexOf(t, k, "t"), "1"); got["n"] != "11" || got["big"] != `"big text one"` {
					t.Fatalf("after the retry: %v", got)
				}
			}
		})
	}
	t.Run("fenced", func(t *testing.T) {
		f, k := setup(t)
		// Another claim rotated the write alias away.
		f.EditIndex(indexOf(t, k, "t"), func(ix *searchtest.Index) { clear(ix.Aliases) })
		_, err := writeUnmodified(t, k, batch)
		var ce *esfence.ConflictError
		if !errors.As(err, &ce) || ce.Class != esfence.Fenced {
			t.Fatalf("Write: %v, want a fenced refusal", err)
		}
		wantFailure(t, "Write", err, true)
	})
}
