package sink

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/statestore"
)

// TestSwitchRetriedOnFake: a switch whose refresh is refused (403, a user without the refresh
// privilege) after the table record says switching stays begun; the same sink's next
// SwitchReindex completes it (it was refused as fenced: the sink kept the record's old
// revision), and AbandonReindex refuses to delete the generation in between. A copy of the
// deployment whose claim completed the switch meanwhile fences the retry, which changes
// nothing.
func TestSwitchRetriedOnFake(t *testing.T) {
	ctx := context.Background()
	cfg := Config{ReadAlias: true, RetireAfter: Duration(time.Minute)}
	sch := ordersSchema("orders")
	// begun is a sink with a reindex of orders whose switch failed once begun.
	begun := func(t *testing.T, f *fakeCluster, st statestore.Store) (k *Sink, g1, g2 string) {
		t.Helper()
		k = fakeSink(t, f, cfg, st, Options{})
		write(t, k, fakeEvents(sch, 1, 3))
		name := indexOf(t, k, "orders")
		g1, g2 = name+"-g1", name+"-g2"
		if next, err := k.BeginReindex(ctx, sch); err != nil || next != g2 {
			t.Fatalf("BeginReindex: %q, %v", next, err)
		}
		f.failWhole("_refresh", func(int) int { return http.StatusForbidden })
		if err := k.SwitchReindex(ctx, sch.ID); err == nil {
			t.Fatal("a switch whose refresh was refused succeeded")
		}
		f.failWhole("_refresh", nil)
		if st, _ := k.Generations(sch.ID); st.Live != g1 || st.Next != g2 || !st.Switching {
			t.Fatalf("generations after the failed switch: %+v", st)
		}
		if ix := f.Index(g1); !ix.Aliases[name] {
			t.Fatalf("the read alias left %s: %v", g1, ix.Aliases)
		}
		return k, g1, g2
	}

	t.Run("same_run", func(t *testing.T) {
		f := newFakeCluster(t)
		k, g1, g2 := begun(t, f, statestore.NewMemory())
		name := indexOf(t, k, "orders")
		if err := k.AbandonReindex(ctx, sch.ID); err == nil || f.Index(g2) == nil {
			t.Fatalf("abandoning a begun switch: %v (the new generation exists: %v)", err, f.Index(g2) != nil)
		}
		write(t, k, fakeEvents(sch, 4, 1)) // still to both generations
		if _, ok := f.Index(g2).Docs["4"]; !ok {
			t.Fatal("a write between the failed switch and its retry missed the new generation")
		}
		if err := k.SwitchReindex(ctx, sch.ID); err != nil {
			t.Fatalf("the retried switch: %v", err)
		}
		if st, _ := k.Generations(sch.ID); st.Live != g2 || st.Next != "" || st.Switching || len(st.Retired) != 1 {
			t.Fatalf("generations after the retried switch: %+v", st)
		}
		if ix := f.Index(g2); !ix.Aliases[name] || f.Index(g1).Aliases[name] {
			t.Fatalf("after the retried switch the read alias is on %v / %v", f.Index(g1).Aliases, ix.Aliases)
		}
		write(t, k, fakeEvents(sch, 5, 1))
		if _, ok := f.Index(g1).Docs["5"]; ok {
			t.Fatal("a write after the switch reached the old generation")
		}
		if _, ok := f.Index(g2).Docs["5"]; !ok {
			t.Fatal("a write after the switch missed the new generation")
		}
		if gone, err := k.DeleteRetired(ctx, time.Now().Add(2*time.Minute)); err != nil || len(gone) != 1 || gone[0] != g1 {
			t.Fatalf("deleted %v (%v), want %s", gone, err, g1)
		}
	})

	t.Run("copy_completed_it", func(t *testing.T) {
		f := newFakeCluster(t)
		st := statestore.NewMemory()
		a, g1, g2 := begun(t, f, st)
		b := fakeSink(t, f, cfg, st, Options{}) // a copy of a's deployment: its claim completes the switch
		write(t, b, fakeEvents(sch, 4, 1))
		if gs, _ := b.Generations(sch.ID); gs.Live != g2 || gs.Next != "" {
			t.Fatalf("the copy's generations: %+v", gs)
		}
		before := f.Requests()
		err := a.SwitchReindex(ctx, sch.ID)
		if !errors.Is(err, esfence.Fenced) {
			t.Fatalf("the retried switch after a copy's claim: %v, want fenced", err)
		}
		for _, r := range f.Requests()[len(before):] {
			if r.Method != http.MethodGet {
				t.Fatalf("the fenced retry sent %s %s", r.Method, r.Path)
			}
		}
		if f.Index(g1) == nil || f.Index(g2) == nil {
			t.Fatal("a generation was deleted")
		}
		write(t, b, fakeEvents(sch, 5, 1))
	})
}
