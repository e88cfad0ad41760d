package esfence

import (
	"context"
	"testing"
	"time"
)

// Reset on the fake node: a reindex in progress is abandoned, the new generation is live and
// empty, the floor only rises, retired relations are bounded and a relation bound again leaves
// the retired list; Bind binds without emptying; another sink's records are not listed.
func TestFakeReset(t *testing.T) {
	ctx := context.Background()
	f, c := fakeFence(t, nil)
	d := stubDest()
	g, err := f.EnsureTable(ctx, d, false)
	if err != nil || !g.Created() {
		t.Fatalf("EnsureTable: %v, created %v", err, g != nil && g.Created())
	}
	if g, err = f.Bind(ctx, g, "r0", &EnteredMark{ID: 7, Cause: "new"}); err != nil || g.Relation() != "r0" || g.Entered().ID != 7 {
		t.Fatalf("Bind: %v", err)
	}
	if g, err = f.ClearEntered(ctx, g, 8); err != nil || g.Entered() == nil {
		t.Fatalf("ClearEntered of another report: %v, %+v", err, g.Entered())
	}
	if g, err = f.ClearEntered(ctx, g, 7); err != nil || g.Entered() != nil {
		t.Fatalf("ClearEntered: %v, %+v", err, g.Entered())
	}
	if g, err = f.BeginGeneration(ctx, g, d); err != nil {
		t.Fatal(err)
	}
	filling := g.Next().Index()
	if g, err = f.Reset(ctx, g, d, Reset{Floor: 10}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if c.Index(filling) != nil || g.Live().Index() != GenerationIndex(d.Index, 3) || g.Floor() != 10 || g.Relation() != "r0" {
		t.Fatalf("after a reset over a reindex: filling %v, live %s, floor %d, relation %q", c.Index(filling) != nil, g.Live().Index(), g.Floor(), g.Relation())
	}
	if ix := c.Index(g.Live().Index()); ix == nil || len(ix.Docs) != 0 || !ix.Aliases[d.Index] {
		t.Fatalf("the new generation: %+v", ix)
	}
	if _, ok := g.Retired()[GenerationIndex(d.Index, 1)]; !ok {
		t.Fatalf("retired %v", g.Retired())
	}
	if g, err = f.Reset(ctx, g, d, Reset{Floor: 5}, time.Hour); err != nil || g.Floor() != 10 {
		t.Fatalf("a lower floor: %v, floor %d", err, g.Floor())
	}
	for i := range MaxRetiredRelations + 3 {
		rel := "r" + string(rune('a'+i))
		if g, err = f.Reset(ctx, g, d, Reset{Relation: rel, Retire: g.Relation(), RetireAt: int64(100 + i)}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(g.RetiredRelations()); n != MaxRetiredRelations {
		t.Fatalf("%d retired relations kept, want %d", n, MaxRetiredRelations)
	}
	back := g.RetiredRelations()[MaxRetiredRelations-1].ID
	if g, err = f.Reset(ctx, g, d, Reset{Relation: back, Retire: g.Relation(), RetireAt: 200}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, r := range g.RetiredRelations() {
		if r.ID == back {
			t.Fatalf("%s bound again is still retired", back)
		}
	}
	bound, _, err := f.Relations(ctx, d.Pipeline, d.Sink)
	if err != nil || bound[back].Name != d.Index {
		t.Fatalf("Relations: %v, %v", bound, err)
	}
	if bound, retired, err := f.Relations(ctx, d.Pipeline, "another-sink"); err != nil || len(bound)+len(retired) != 0 {
		t.Fatalf("another sink's relations: %v %v %v", bound, retired, err)
	}
}
