package sink

import (
	"context"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// codeSchema is a table keyed by a text column.
func codeSchema() *cdc.TableSchema {
	return &cdc.TableSchema{
		ID: cdc.TableID{Connector: "postgres", Source: "shop", Database: "shop", Schema: "public", Table: "codes"},
		Columns: []cdc.Column{
			{Name: "code", Kind: cdc.KindText, SourceType: "text"},
			{Name: "n", Kind: cdc.KindInt, Bits: 64, SourceType: "bigint", Nullable: true},
		},
		PrimaryKey: []int{0},
	}
}

// TestSinkKeyChangeToUnformableID: an update that moves a row to a key forming no _id (an
// empty text key, a NULL key part) is dead-lettered, and the old _id is still deleted at the
// event's version -- the old document must not stay for a row that moved away. A before image
// without the key says nothing about the old key; a newer document under the old key survives
// the (older) delete.
func TestSinkKeyChangeToUnformableID(t *testing.T) {
	ctx := context.Background()
	sch := codeSchema()
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{}, nil, Options{})
	if dead, err := k.Write(ctx, []cdc.Event{
		ev(cdc.Insert, sch, 1, nil, []cdc.Value{"a", int64(1)}),
		ev(cdc.Insert, sch, 2, nil, []cdc.Value{"b", int64(2)}),
		ev(cdc.Insert, sch, 3, nil, []cdc.Value{"c", int64(3)}),
		ev(cdc.Insert, sch, 9, nil, []cdc.Value{"d", int64(4)}),
	}); err != nil || len(dead) != 0 {
		t.Fatalf("%v %+v", err, dead)
	}
	dead, err := k.Write(ctx, []cdc.Event{
		ev(cdc.Update, sch, 4, []cdc.Value{"a", int64(1)}, []cdc.Value{"", int64(1)}), // empty new key
		ev(cdc.Update, sch, 5, []cdc.Value{"b", nil}, []cdc.Value{nil, int64(2)}),     // NULL new key
		ev(cdc.Update, sch, 6, []cdc.Value{nil, nil}, []cdc.Value{"", int64(3)}),      // before without the key
		ev(cdc.Update, sch, 7, []cdc.Value{"d", int64(4)}, []cdc.Value{"", int64(4)}), // older than "d"'s document
		ev(cdc.Update, sch, 8, nil, []cdc.Value{"", int64(5)}),                        // no before image at all
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 5 {
		t.Fatalf("dead letters %+v, want all five updates", dead)
	}
	for i, d := range dead {
		if d.Index != i || !strings.HasPrefix(d.Reason, "serialization failure:") {
			t.Fatalf("dead letter %d: %+v", i, d)
		}
	}
	ix := f.Index(indexOf(t, k, "codes"))
	for id, want := range map[string]struct {
		deleted bool
		version int64
	}{"a": {true, 4}, "b": {true, 5}, "c": {false, 3}, "d": {false, 9}} {
		d, ok := ix.Docs[id]
		if !ok || d.Deleted != want.deleted || d.Version != want.version {
			t.Errorf("_id %q: %+v (present %v), want deleted=%v at version %d", id, d, ok, want.deleted, want.version)
		}
	}
	if _, ok := ix.Docs[""]; ok {
		t.Error("a document with an empty _id was written")
	}
}

// TestPlanKeyChangeToUnformableID: plan itself yields the old _id's delete at the event's
// version alongside the dead letter, and it coalesces with the batch's other changes of that
// _id (a later re-insert of the old key wins).
func TestPlanKeyChangeToUnformableID(t *testing.T) {
	sch := codeSchema()
	k := fakeSink(t, newFakeCluster(t), Config{}, nil, Options{})
	acts, dead, err := k.plan([]cdc.Event{
		ev(cdc.Update, sch, 4, []cdc.Value{"a", int64(1)}, []cdc.Value{"", int64(1)}),
		ev(cdc.Update, sch, 5, []cdc.Value{"x|y", int64(1)}, []cdc.Value{"", int64(1)}),
		ev(cdc.Insert, sch, 6, nil, []cdc.Value{"x|y", int64(2)}),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].Index != 0 || dead[1].Index != 1 {
		t.Fatalf("dead letters %+v, want events 0 and 1", dead)
	}
	if len(acts) != 2 {
		t.Fatalf("%d actions, want 2: %+v", len(acts), acts)
	}
	if a := acts[0]; a.id != "a" || !a.del || a.version != 4 || a.event != 0 || a.row != nil {
		t.Errorf("first action %+v, want the delete of \"a\" at version 4 for event 0", a)
	}
	if a := acts[1]; a.id != "x|y" || a.del || a.version != 6 || a.event != 2 {
		t.Errorf("second action %+v, want the insert of \"x|y\" at version 6 (the delete coalesced away)", a)
	}
}
