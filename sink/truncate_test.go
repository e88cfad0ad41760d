package sink

import (
	"context"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// A Truncate is dead-lettered with a reason that says why, and the rest of the batch is
// written: it never stops the pipeline and never turns into deletes.
func TestTruncateIsDeadLettered(t *testing.T) {
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{}, nil, Options{})
	sch := ordersSchema("orders")
	batch := []cdc.Event{
		ev(cdc.Insert, sch, 1, nil, row(1, "secret-name", 1)),
		{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(2)},
		ev(cdc.Insert, sch, 3, nil, row(2, "two", 2)),
		{Op: cdc.Truncate, Table: sch.ID, Position: pos(4)}, // no schema: still a truncate
	}
	dead, err := k.Write(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].Index != 1 || dead[1].Index != 3 {
		t.Fatalf("dead letters %+v, want events 1 and 3", dead)
	}
	for _, d := range dead {
		if !strings.HasPrefix(d.Reason, "truncate_not_mirrored: ") || strings.Contains(d.Reason, "secret") {
			t.Fatalf("reason %q", d.Reason)
		}
	}
	ix := f.Index(indexOf(t, k, "orders"))
	if ix == nil || len(ix.Docs) != 2 || ix.Docs["1"].Deleted || ix.Docs["2"].Deleted {
		t.Fatalf("the inserts around the truncates were not written as they are: %+v", ix)
	}

	// A batch of truncates only sends nothing at all.
	before := len(f.requestLines())
	dead, err = k.Write(context.Background(), batch[1:2])
	if err != nil || len(dead) != 1 || len(f.requestLines()) != before {
		t.Fatalf("truncate only: %v, dead %v, %d requests sent", err, dead, len(f.requestLines())-before)
	}
}
