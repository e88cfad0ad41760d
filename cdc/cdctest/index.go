package cdctest

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// VersionedIndex applies events as Elasticsearch applies external versions, but forgets a
// deleted document at once (no tombstone): a re-snapshot row that came after a newer delete
// would bring the row back, and Equal would see it. Documents are keyed by the int64 id
// column and keep two columns of the row, an int64 (N) and a string (Pad).
type VersionedIndex struct {
	Docs                map[int64]IndexDoc
	Reads               int // Read events applied
	IDCol, NCol, PadCol int
}

// IndexDoc is one document of a VersionedIndex (Version 0 in an expected set).
type IndexDoc struct {
	Version int64
	N       int64
	Pad     string
}

// NewVersionedIndex is an empty index of rows whose id, N and Pad are at those columns.
func NewVersionedIndex(idCol, nCol, padCol int) *VersionedIndex {
	return &VersionedIndex{Docs: map[int64]IndexDoc{}, IDCol: idCol, NCol: nCol, PadCol: padCol}
}

// Apply applies one event; a malformed one or an operation other than a row change fails t.
func (x *VersionedIndex) Apply(t testing.TB, ev cdc.Event) {
	t.Helper()
	if ev.Malformed != nil {
		t.Fatalf("malformed event at %s: %v", ev.Position, ev.Malformed)
	}
	v := ev.Position.Version()
	switch ev.Op {
	case cdc.Insert, cdc.Update, cdc.Read:
		id := ev.After[x.IDCol].(int64)
		if ev.Op == cdc.Update && ev.Before != nil && ev.Before[x.IDCol].(int64) != id {
			x.delete(ev.Before[x.IDCol].(int64), v) // a key change
		}
		if d, ok := x.Docs[id]; ok && d.Version >= v {
			return
		}
		x.Docs[id] = IndexDoc{Version: v, N: ev.After[x.NCol].(int64), Pad: ev.After[x.PadCol].(string)}
		if ev.Op == cdc.Read {
			x.Reads++
		}
	case cdc.Delete:
		x.delete(ev.Before[x.IDCol].(int64), v)
	default:
		t.Fatalf("unexpected %s event", ev.Op)
	}
}

func (x *VersionedIndex) delete(id, v int64) {
	if d, ok := x.Docs[id]; ok && d.Version < v {
		delete(x.Docs, id)
	}
}

// Equal fails t unless the index holds exactly want's rows (N and Pad; versions are not
// compared), naming up to ten differences, rows missing and rows resurrected alike.
func (x *VersionedIndex) Equal(t testing.TB, want map[int64]IndexDoc) {
	t.Helper()
	bad := 0
	for id, w := range want {
		got, ok := x.Docs[id]
		if !ok || got.N != w.N || got.Pad != w.Pad {
			if bad++; bad <= 10 {
				t.Errorf("row %d: table (%d, %q), index %v (%d, %q)", id, w.N, w.Pad, ok, got.N, got.Pad)
			}
		}
	}
	for id := range x.Docs {
		if _, ok := want[id]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("row %d is in the index, not in the table (resurrected)", id)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d rows differ (of %d in the table)", bad, len(want))
	}
}

// AwaitResnapshot consumes st's events -- each handed to apply, its checkpoint acknowledged --
// until the stream reports the re-snapshot id ended, and returns that progress. A stream
// reports a re-snapshot ended once its rows are in Events, not once they were received: the
// events already waiting in the channel at that moment are consumed too before it returns,
// so every row the re-snapshot emitted has been applied.
func AwaitResnapshot(ctx context.Context, t testing.TB, st cdc.Stream, id string, apply func(cdc.Event)) cdc.SnapshotProgress {
	t.Helper()
	take := func(ev cdc.Event, ok bool) {
		t.Helper()
		if !ok {
			t.Fatalf("stream ended: %v", st.Err())
		}
		apply(ev)
		if ev.Checkpoint != nil {
			if err := st.Ack(ctx, ev.Checkpoint); err != nil {
				t.Fatal(err)
			}
		}
	}
	for {
		select {
		case ev, ok := <-st.Events():
			take(ev, ok)
			continue
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("re-snapshot %s not ended before the deadline: %+v", id, st.Progress())
		}
		if p := st.Progress(); p.Resnapshot == id && !p.Active {
			for {
				select {
				case ev, ok := <-st.Events():
					take(ev, ok)
				default:
					return p
				}
			}
		}
	}
}
