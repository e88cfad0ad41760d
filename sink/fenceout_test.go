package sink

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/statestore"
)

// TestFenceOutTakeoverOnFake: two sinks of one pipeline, as two processes on one shared state
// store (a Memory leaser), each on the view fenced by its lease's epoch. A writes two tables;
// B takes the lease over and fences out: every index rotated in one _aliases request. A's next
// Write is refused at the cluster (fenced, permanent) and its FenceOut by the store
// (ErrNotLeader, permanent) before any _aliases request; B writes normally, also after a
// second FenceOut while it holds claims (the next Write claims again), and every document is
// B's.
func TestFenceOutTakeoverOnFake(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	var mu sync.Mutex
	now := time.Now()
	st := statestore.NewMemoryWithOptions(&statestore.MemoryOptions{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	la, err := st.Acquire(ctx, "p", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a := fakeSink(t, f, Config{}, st.Fenced("p", la.Epoch), Options{})
	orders, items := ordersSchema("orders"), ordersSchema("items")
	for _, sch := range []*cdc.TableSchema{orders, items} {
		if _, err := a.Write(ctx, fakeEvents(sch, 1, 3)); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	now = now.Add(2 * time.Minute) // A stopped renewing
	mu.Unlock()
	lb, err := st.Acquire(ctx, "p", "b", time.Minute)
	if err != nil || lb.Epoch != 2 {
		t.Fatalf("B's Acquire: %+v, %v", lb, err)
	}
	b := fakeSink(t, f, Config{}, st.Fenced("p", lb.Epoch), Options{})
	aliases := f.Count("_aliases")
	rep, err := b.FenceOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rotated) != 2 || len(rep.Missing)+len(rep.Unaliased) != 0 || f.Count("_aliases")-aliases != 1 {
		t.Fatalf("FenceOut: %+v after %d _aliases requests", rep, f.Count("_aliases")-aliases)
	}

	// A, resumed, writes what it had in hand: refused at the cluster.
	if _, err := a.Write(ctx, fakeEvents(orders, 10, 1)); esfence.ClassOf(err) != esfence.Fenced || !cdc.IsPermanent(err) {
		t.Fatalf("A's write after the takeover: %v, want a permanent fenced refusal", err)
	}
	aliases = f.Count("_aliases")
	if _, err := a.FenceOut(ctx); !errors.Is(err, statestore.ErrNotLeader) || !cdc.IsPermanent(err) {
		t.Fatalf("A's FenceOut after the takeover: %v, want permanent ErrNotLeader", err)
	}
	if n := f.Count("_aliases") - aliases; n != 0 {
		t.Fatalf("A sent %d _aliases requests after the takeover", n)
	}

	// B writes, fences out again while holding its claims, and writes again.
	if _, err := b.Write(ctx, fakeEvents(orders, 20, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.FenceOut(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(ctx, fakeEvents(items, 30, 2)); err != nil {
		t.Fatal(err)
	}
	for _, name := range rep.Rotated {
		ix := f.Index(name)
		var ids []string
		for id, d := range ix.Docs {
			if d.Version >= 10 && d.Version < 20 {
				t.Fatalf("%s holds A's late write %s", name, id)
			}
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if len(ids) != 5 {
			t.Fatalf("%s holds %v, want A's 3 and B's 2 documents", name, ids)
		}
	}
}

// TestFenceOutErrorClassesOnFake: a lost connection is backpressure (and the next FenceOut
// completes); a shared owner has nothing to fence out (permanent ErrSharedOwner, nothing
// sent).
func TestFenceOutErrorClassesOnFake(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	st := statestore.NewMemory()
	k := fakeSink(t, f, Config{}, st, Options{})
	if _, err := k.Write(ctx, fakeEvents(ordersSchema("orders"), 1, 1)); err != nil {
		t.Fatal(err)
	}
	f.failWhole("_aliases", func(int) int { return -1 })
	if _, err := k.FenceOut(ctx); !errors.As(err, new(*cdc.BackpressureError)) || cdc.IsPermanent(err) {
		t.Fatalf("FenceOut over a lost connection: %v, want backpressure", err)
	}
	f.failWhole("_aliases", nil)
	if rep, err := k.FenceOut(ctx); err != nil || len(rep.Rotated) != 1 {
		t.Fatalf("FenceOut again: %+v, %v", rep, err)
	}
	if _, err := k.Write(ctx, fakeEvents(ordersSchema("orders"), 2, 1)); err != nil {
		t.Fatalf("a Write after FenceOut: %v", err)
	}

	shared := fakeSink(t, f, Config{SharedOwner: "group"}, statestore.NewMemory(), Options{})
	n := len(f.Requests())
	if _, err := shared.FenceOut(ctx); !errors.Is(err, esfence.ErrSharedOwner) || !cdc.IsPermanent(err) {
		t.Fatalf("FenceOut under a shared owner: %v", err)
	}
	if len(f.Requests()) != n {
		t.Fatal("FenceOut under a shared owner sent requests")
	}
}
