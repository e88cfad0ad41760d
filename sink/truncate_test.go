package sink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// countingObserver sums the superseded actions the sink reports.
type countingObserver struct {
	mu         sync.Mutex
	superseded int
}

func (o *countingObserver) BulkDone(s BulkStats) {
	o.mu.Lock()
	o.superseded += s.Superseded
	o.mu.Unlock()
}
func (o *countingObserver) Claimed(string) {}
func (o *countingObserver) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.superseded
}

// liveDocs is the documents (not deleted) of the generation readers see of table id.
func liveDocs(t *testing.T, f *fakeCluster, k *Sink, id cdc.TableID) map[string]int64 {
	t.Helper()
	g, ok := k.Generations(id)
	if !ok {
		t.Fatalf("the sink holds no generations of %s", id)
	}
	ix := f.Index(g.Live)
	if ix == nil {
		t.Fatalf("the live generation %s does not exist", g.Live)
	}
	if g.Live != g.Name && !ix.Aliases[g.Name] {
		t.Fatalf("the live generation %s does not carry the read alias %s", g.Live, g.Name)
	}
	out := map[string]int64{}
	for id, d := range ix.Docs {
		if !d.Deleted {
			out[id] = d.Version
		}
	}
	return out
}

func sameDocs(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: documents %v, want %v", what, got, want)
	}
	for id, v := range want {
		if got[id] != v {
			t.Fatalf("%s: documents %v, want %v", what, got, want)
		}
	}
}

// A Truncate is mirrored exactly: the table gets a new empty generation, the changes of the
// batch after it land there, those before it (lower versions) are void, a replay of the same
// batches -- also after a restart, from the persisted floor -- changes nothing, and the old
// generation is retired like a reindex's.
func TestTruncateMirrored(t *testing.T) {
	for _, alias := range []bool{true, false} {
		t.Run(map[bool]string{true: "read_alias", false: "legacy"}[alias], func(t *testing.T) {
			f := newFakeCluster(t)
			st := statestore.NewMemory()
			obs := &countingObserver{}
			cfg := Config{ReadAlias: alias, RetireAfter: Duration(time.Minute)}
			k := fakeSink(t, f, cfg, st, Options{Observer: obs})
			ctx := context.Background()
			sch := ordersSchema("orders")
			name := indexOf(t, k, "orders")
			b1 := []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "secret-name", 1)), ev(cdc.Insert, sch, 2, nil, row(2, "two", 2))}
			b2 := []cdc.Event{
				ev(cdc.Insert, sch, 3, nil, row(3, "three", 3)),
				{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(4)},
				ev(cdc.Insert, sch, 5, nil, row(4, "four", 4)),
				ev(cdc.Insert, sch, 6, nil, row(1, "one again", 1)),
			}
			want := map[string]int64{"4": 5, "1": 6}
			if dead := write(t, k, b1); len(dead) != 0 {
				t.Fatal(dead)
			}
			if dead := write(t, k, b2); len(dead) != 0 {
				t.Fatalf("dead letters %+v", dead)
			}
			sameDocs(t, "after the truncate", liveDocs(t, f, k, sch.ID), want)
			gs, _ := k.Generations(sch.ID)
			first := name + "-g1"
			if !alias {
				first = name // the legacy index is replaced by the alias, deleted at once
			}
			if alias && gs.Retired[first].IsZero() {
				t.Fatalf("the old generation is not retired: %+v", gs)
			}
			if !alias && f.Index(name) != nil {
				t.Fatal("the legacy index is still there")
			}
			live := gs.Live

			// A replay of both batches: the changes before the truncate are void (below the
			// floor), the truncate is a no-op, the rest is superseded by version.
			before := obs.total()
			if dead := write(t, k, append(slices.Clone(b1), b2...)); len(dead) != 0 {
				t.Fatal(dead)
			}
			sameDocs(t, "after a replay", liveDocs(t, f, k, sch.ID), want)
			if g, _ := k.Generations(sch.ID); g.Live != live {
				t.Fatalf("a replayed truncate made generation %s (was %s)", g.Live, live)
			}
			if got := obs.total() - before; got != 4 {
				t.Fatalf("a replay counted %d superseded actions, want 4 (2 void, 2 by version)", got)
			}

			// A restart keeps the floor: the replay is still void.
			k2 := fakeSink(t, f, cfg, st, Options{})
			if dead := write(t, k2, b2); len(dead) != 0 {
				t.Fatal(dead)
			}
			sameDocs(t, "after a restart's replay", liveDocs(t, f, k2, sch.ID), want)
			if g, _ := k2.Generations(sch.ID); g.Live != live {
				t.Fatalf("a replayed truncate after a restart made generation %s (was %s)", g.Live, live)
			}

			// The old generation goes once retire_after passed.
			if alias {
				deleted, err := k2.DeleteRetired(ctx, time.Now().Add(time.Hour))
				if err != nil || !slices.Contains(deleted, first) || f.Index(first) != nil {
					t.Fatalf("DeleteRetired: %v, %v", deleted, err)
				}
			}
		})
	}
}

// A Truncate of a table never written yet in a batch of truncates only, a second Truncate in
// one batch, and a truncate whose schema is only known from earlier events.
func TestTruncateOnly(t *testing.T) {
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{ReadAlias: true}, statestore.NewMemory(), Options{})
	sch := ordersSchema("orders")
	name := indexOf(t, k, "orders")
	if dead := write(t, k, []cdc.Event{{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(10)}}); len(dead) != 0 {
		t.Fatal(dead)
	}
	sameDocs(t, "a truncate first", liveDocs(t, f, k, sch.ID), map[string]int64{})
	// Older changes (a source replaying from before) are void.
	write(t, k, []cdc.Event{ev(cdc.Insert, sch, 9, nil, row(1, "old", 1)), ev(cdc.Insert, sch, 11, nil, row(2, "new", 2))})
	sameDocs(t, "older changes", liveDocs(t, f, k, sch.ID), map[string]int64{"2": 11})
	// Two truncates in one batch, the second without a schema (Debezium's): the last floor
	// holds.
	dead := write(t, k, []cdc.Event{
		{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(12)},
		ev(cdc.Insert, sch, 13, nil, row(3, "between", 3)),
		{Op: cdc.Truncate, Table: sch.ID, Position: pos(14)},
		ev(cdc.Insert, sch, 15, nil, row(4, "after", 4)),
	})
	if len(dead) != 0 {
		t.Fatal(dead)
	}
	sameDocs(t, "two truncates", liveDocs(t, f, k, sch.ID), map[string]int64{"4": 15})
	if g, _ := k.Generations(sch.ID); g.Live != name+"-g4" {
		t.Fatalf("generations %+v, want g4 live", g)
	}
}

// Where the exact path is impossible the Truncate is dead-lettered as before, with a reason
// that says why: a shared owner, a schemaless Truncate of a table the sink has not seen.
func TestTruncateDeadLettered(t *testing.T) {
	f := newFakeCluster(t)
	sch := ordersSchema("orders")
	k := fakeSink(t, f, Config{SharedOwner: "group"}, statestore.NewMemory(), Options{})
	batch := []cdc.Event{
		ev(cdc.Insert, sch, 1, nil, row(1, "secret-name", 1)),
		{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(2)},
		ev(cdc.Insert, sch, 3, nil, row(2, "two", 2)),
	}
	dead, err := k.Write(context.Background(), batch)
	if err != nil || len(dead) != 1 || dead[0].Index != 1 || !strings.HasPrefix(dead[0].Reason, "truncate_not_mirrored: ") ||
		!strings.Contains(dead[0].Reason, "shared_owner") || strings.Contains(dead[0].Reason, "secret") {
		t.Fatalf("shared owner: %v, %+v", err, dead)
	}
	if ix := f.Index(indexOf(t, k, "orders")); ix == nil || len(ix.Docs) != 2 {
		t.Fatalf("the inserts around the truncate were not written as they are: %+v", ix)
	}

}

// A Truncate without a schema (Debezium's) of a table the sink has not seen since it started:
// the table is claimed as it exists and its new generation mapped like the live one; one the
// pipeline never wrote has nothing to empty (no index is created).
func TestTruncateSchemaless(t *testing.T) {
	for _, alias := range []bool{true, false} {
		t.Run(map[bool]string{true: "read_alias", false: "legacy"}[alias], func(t *testing.T) {
			f := newFakeCluster(t)
			st := statestore.NewMemory()
			cfg := Config{ReadAlias: alias}
			sch := ordersSchema("orders")
			k := fakeSink(t, f, cfg, st, Options{})
			if dead := write(t, k, []cdc.Event{{Op: cdc.Truncate, Table: sch.ID, Position: pos(1)}}); len(dead) != 0 {
				t.Fatal(dead)
			}
			if _, ok := k.Generations(sch.ID); ok || f.Index(indexOf(t, k, "orders")) != nil {
				t.Fatal("a schemaless truncate of a table never written claimed or created it")
			}
			write(t, k, []cdc.Event{ev(cdc.Insert, sch, 2, nil, row(1, "one", 1)), ev(cdc.Insert, sch, 3, nil, row(2, "two", 2))})
			before, _ := k.Generations(sch.ID)
			props := f.Index(before.Live).Props

			k2 := fakeSink(t, f, cfg, st, Options{})
			dead := write(t, k2, []cdc.Event{{Op: cdc.Truncate, Table: sch.ID, Position: pos(4)},
				ev(cdc.Insert, sch, 5, nil, row(3, "three", 3))})
			if len(dead) != 0 {
				t.Fatal(dead)
			}
			sameDocs(t, "after a schemaless truncate", liveDocs(t, f, k2, sch.ID), map[string]int64{"3": 5})
			after, _ := k2.Generations(sch.ID)
			got := f.Index(after.Live).Props
			if after.Live == before.Live || len(got) != len(props) || string(got["qty"]) != string(props["qty"]) {
				t.Fatalf("the new generation %s maps %v, the old one %s mapped %v", after.Live, got, before.Live, props)
			}
		})
	}
}

// A Truncate whose reset is cut short (the _aliases request moving the read alias fails) fails
// the batch as backpressure; the batch offered again completes the reset through the next
// claim -- the replayed Truncate is then a no-op -- and the index equals the rows the table
// has after it.
func TestTruncateResetCutShort(t *testing.T) {
	for _, alias := range []bool{true, false} {
		t.Run(map[bool]string{true: "read_alias", false: "legacy"}[alias], func(t *testing.T) {
			f := newFakeCluster(t)
			k := fakeSink(t, f, Config{ReadAlias: alias}, statestore.NewMemory(), Options{})
			sch := ordersSchema("orders")
			write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "one", 1)), ev(cdc.Insert, sch, 2, nil, row(2, "two", 2))})
			batch := []cdc.Event{
				ev(cdc.Update, sch, 3, nil, row(1, "changed", 1)),
				{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(4)},
				ev(cdc.Insert, sch, 5, nil, row(3, "three", 3)),
			}
			var armed atomic.Bool
			armed.Store(true)
			f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
				if r.Endpoint == "_aliases" && armed.CompareAndSwap(true, false) {
					return searchtest.ErrorAnswer(503, "injected")
				}
				return nil
			})
			_, err := k.Write(context.Background(), batch)
			var bp *cdc.BackpressureError
			if !errors.As(err, &bp) || armed.Load() {
				t.Fatalf("the cut-short reset: %v (injected: %v), want backpressure", err, !armed.Load())
			}
			if dead := write(t, k, batch); len(dead) != 0 {
				t.Fatal(dead)
			}
			sameDocs(t, "after the reset completed", liveDocs(t, f, k, sch.ID), map[string]int64{"3": 5})
			g, _ := k.Generations(sch.ID)
			want := indexOf(t, k, "orders") + map[bool]string{true: "-g2", false: "-g1"}[alias]
			if g.Live != want {
				t.Fatalf("live generation %s, want %s (one reset, not two)", g.Live, want)
			}
		})
	}
}
