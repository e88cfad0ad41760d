package sink

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// TestSinkSharedOwner: two sinks of one shared_owner, each with its own state file (so its own
// deployment identity), write one table's changes into one index at once -- the first
// writes creating it concurrently -- and both keep writing after either claims again; the
// versions decide between them. A sink of another owner, or of none, is refused; reindexing
// is refused. With read_alias and without.
func TestSinkSharedOwner(t *testing.T) {
	estest.EachEngine(t, func(t *testing.T, n *estest.Node) {
		s := &server{Node: n, prefix: estest.UniqueName(t, "shared-own")}
		s.DeleteAtCleanup(t, s.prefix+"*")
		s.EnforceAutoCreateRule(t)
		for _, readAlias := range []bool{false, true} {
			t.Run(fmt.Sprintf("read_alias_%v", readAlias), func(t *testing.T) {
				cfg := s.config(fmt.Sprintf("ra-%v", readAlias))
				cfg.SharedOwner = "orders-consumers"
				cfg.ReadAlias = readAlias
				dir := t.TempDir()
				var members [2]*Sink
				for i := range members {
					st, err := statestore.Open(filepath.Join(dir, fmt.Sprintf("member-%d.db", i)), nil)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { st.Close() })
					members[i] = s.sinkOpts(t, cfg, st, Options{})
				}
				sch := ordersSchema("orders")
				idx := indexOf(t, members[0], "orders") // the read alias, or the legacy index

				// Each member writes its own rows, both at once: one creates the index, the
				// other joins it.
				const rows = 20
				errs := make([]error, len(members))
				var wg sync.WaitGroup
				for i, k := range members {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var batch []cdc.Event
						for r := 0; r < rows; r++ {
							id := int64(i*rows + r + 1)
							batch = append(batch, ev(cdc.Insert, sch, id, nil, row(id, fmt.Sprintf("member %d", i), id)))
						}
						ctx, cancel := context.WithTimeout(context.Background(), 2*estest.CallTimeout)
						defer cancel()
						dead, err := k.Write(ctx, batch)
						if err == nil && len(dead) != 0 {
							err = fmt.Errorf("dead letters %+v", dead)
						}
						errs[i] = err
					}()
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				if n := s.count(t, idx); n != 2*rows {
					t.Fatalf("%d documents, want %d", n, 2*rows)
				}

				// Both write the same rows; the higher version wins whoever writes last.
				write(t, members[0], []cdc.Event{ev(cdc.Update, sch, 200, nil, row(1, "a at 200", 1))})
				write(t, members[1], []cdc.Event{ev(cdc.Update, sch, 150, nil, row(1, "b at 150", 1)),
					ev(cdc.Delete, sch, 300, row(2, "", 0), nil)})
				// A member claims again (as after a connection loss): the other is not fenced.
				members[0].stale.Store(true)
				write(t, members[0], []cdc.Event{ev(cdc.Update, sch, 301, nil, row(3, "a at 301", 3))})
				write(t, members[1], []cdc.Event{ev(cdc.Update, sch, 302, nil, row(4, "b at 302", 4))})
				members[1].stale.Store(true)
				write(t, members[1], []cdc.Event{ev(cdc.Update, sch, 303, nil, row(5, "b at 303", 5))})
				write(t, members[0], []cdc.Event{ev(cdc.Update, sch, 304, nil, row(6, "a at 304", 6))})
				docs, vers := s.docs(t, idx, []string{"1", "2", "3", "4", "5", "6"})
				if docs["1"]["name"] != "a at 200" || vers["1"] != 200 || docs["2"] != nil || vers["3"] != 301 || vers["4"] != 302 ||
					vers["5"] != 303 || vers["6"] != 304 {
					t.Fatalf("documents %v, versions %v", docs, vers)
				}
				if g, ok := members[1].Generations(sch.ID); !ok || g.Live != members[0].gens[idx].Live().Index() {
					t.Fatalf("generations %+v", g)
				}

				// Another owner, and no owner, are refused (permanent): owned_by_other, but for
				// an exclusive deployment meeting the read alias, which it has no record of and
				// never looks behind (alias_not_supported, as for any alias).
				for _, owner := range []string{"billing-consumers", ""} {
					c := cfg
					c.SharedOwner = owner
					k := s.sinkOpts(t, c, nil, Options{})
					ctx, cancel := context.WithTimeout(context.Background(), 2*estest.CallTimeout)
					_, err := k.Write(ctx, []cdc.Event{ev(cdc.Update, sch, 400, nil, row(1, "intruder", 1))})
					cancel()
					want := esfence.OwnedByOther
					if owner == "" && readAlias {
						want = esfence.AliasNotSupported
					}
					if esfence.ClassOf(err) != want || !cdc.IsPermanent(err) {
						t.Fatalf("owner %q: %v, want a permanent %s", owner, err, want)
					}
				}

				// Reindexing needs one writer.
				ctx := context.Background()
				if _, err := members[0].BeginReindex(ctx, sch); !errors.Is(err, esfence.ErrSharedOwner) || !cdc.IsPermanent(err) {
					t.Fatalf("BeginReindex: %v, want a permanent ErrSharedOwner", err)
				}
				if deleted, err := members[0].DeleteRetired(ctx, time.Now()); err != nil || len(deleted) != 0 {
					t.Fatalf("DeleteRetired: %v %v", deleted, err)
				}
				if docs, _ := s.docs(t, idx, []string{"1"}); docs["1"]["name"] != "a at 200" {
					t.Fatalf("document 1 after the refusals: %v", docs["1"])
				}
			})
		}
	})
}
