package sink

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// s32Config is a configuration whose indices are named s32-<the test's prefix>-<part>-{table}.
func s32Config(t *testing.T, s *server, part string, alias bool) Config {
	s.DeleteAtCleanup(t, "s32-"+s.prefix+"*")
	cfg := s.config(part)
	cfg.Index = "s32-" + cfg.Index
	cfg.ReadAlias = alias
	return cfg
}

// wantRows checks the index readers see of table against want row by row: every wanted row's
// document holds exactly its values and version, and the index holds nothing else (its count,
// and every id in also absent).
func wantRows(t *testing.T, s *server, k *Sink, table string, want map[int64]cdc.Event, also []int64) {
	t.Helper()
	name := indexOf(t, k, table)
	var ids []string
	for id := range want {
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	for _, id := range also {
		if _, ok := want[id]; !ok {
			ids = append(ids, strconv.FormatInt(id, 10))
		}
	}
	slices.Sort(ids)
	docs, vers := s.docs(t, name, ids)
	for id, e := range want {
		key := strconv.FormatInt(id, 10)
		d := docs[key]
		r := e.After
		if d == nil || vers[key] != e.Position.Version() || fmt.Sprint(d["id"]) != fmt.Sprint(r[0]) || d["name"] != r[1] ||
			fmt.Sprint(d["qty"]) != fmt.Sprint(r[2]) || d["ok"] != r[3] {
			t.Fatalf("%s: document %s is %v at version %d, want %v at %d", table, key, d, vers[key], r, e.Position.Version())
		}
	}
	if len(docs) != len(want) {
		t.Fatalf("%s: %d of the ids asked are documents, want %d: %v", table, len(docs), len(want), docs)
	}
	if n := s.count(t, name); n != len(want) {
		t.Fatalf("%s: the index holds %d documents, want %d", table, n, len(want))
	}
}

// TestServerTruncateReplayed: on both engines, with and without read alias, a Truncate in a
// batch that is then replayed whole (a lost answer), and again by a restarted sink, leaves the
// index equal to the rows the table has after it, row by row; the old generation is retired.
func TestServerTruncateReplayed(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		for _, alias := range []bool{false, true} {
			t.Run(map[bool]string{true: "read_alias", false: "legacy"}[alias], func(t *testing.T) {
				cfg := s32Config(t, s, "trunc"+strconv.FormatBool(alias), alias)
				st := statestore.NewMemory()
				k := s.sinkOpts(t, cfg, st, Options{})
				sch := ordersSchema("orders")
				var b1, b2 []cdc.Event
				for i := int64(1); i <= 20; i++ {
					b1 = append(b1, ev(cdc.Insert, sch, i, nil, row(i, "n"+strconv.FormatInt(i, 10), i)))
				}
				for i := int64(1); i <= 5; i++ {
					b2 = append(b2, ev(cdc.Update, sch, 20+i, nil, row(i, "u", i*10)))
				}
				b2 = append(b2, cdc.Event{Op: cdc.Truncate, Table: sch.ID, Schema: sch, Position: pos(26)},
					ev(cdc.Insert, sch, 27, nil, row(3, "again", 33)),
					ev(cdc.Insert, sch, 28, nil, row(21, "new", 21)),
					ev(cdc.Insert, sch, 29, nil, row(22, "new", 22)),
					ev(cdc.Delete, sch, 30, row(21, "new", 21), nil))
				want := map[int64]cdc.Event{3: b2[6], 22: b2[8]}
				all := make([]int64, 22)
				for i := range all {
					all[i] = int64(i + 1)
				}
				if dead := write(t, k, b1); len(dead) != 0 {
					t.Fatal(dead)
				}
				if dead := write(t, k, b2); len(dead) != 0 {
					t.Fatal(dead)
				}
				wantRows(t, s, k, "orders", want, all)
				gs, _ := k.Generations(sch.ID)

				if dead := write(t, k, append(slices.Clone(b1), b2...)); len(dead) != 0 {
					t.Fatal(dead)
				}
				wantRows(t, s, k, "orders", want, all)
				k2 := s.sinkOpts(t, cfg, st, Options{})
				if dead := write(t, k2, append(slices.Clone(b1), b2...)); len(dead) != 0 {
					t.Fatal(dead)
				}
				wantRows(t, s, k2, "orders", want, all)
				g2, _ := k2.Generations(sch.ID)
				if g2.Live != gs.Live {
					t.Fatalf("a replayed truncate moved the live generation from %s to %s", gs.Live, g2.Live)
				}
				if alias && len(g2.Retired) != 1 {
					t.Fatalf("retired generations %v, want the first", g2.Retired)
				}
				if !alias && s.IndexExists(t, gs.Name) && gs.Live == gs.Name {
					t.Fatal("the legacy index was not replaced")
				}

				// A schemaless Truncate (Debezium's) met first after a restart: the new
				// generation is mapped like the live one, and the replay of the batch is void.
				k3 := s.sinkOpts(t, cfg, st, Options{})
				b3 := []cdc.Event{{Op: cdc.Truncate, Table: sch.ID, Position: pos(31)}, ev(cdc.Insert, sch, 32, nil, row(7, "seven", 7))}
				for range 2 {
					if dead := write(t, k3, append(slices.Clone(b2), b3...)); len(dead) != 0 {
						t.Fatal(dead)
					}
					wantRows(t, s, k3, "orders", map[int64]cdc.Event{7: b3[1]}, append(all, 7))
				}
			})
		}
	})
}

// TestServerRelationVacate: on both engines, a relation renamed to another name (vacate), a
// DROP and CREATE under a name (rebind) and their replay leave every index equal to its
// table's rows, row by row.
func TestServerRelationVacate(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		cfg := s32Config(t, s, "rel", true)
		st := statestore.NewMemory()
		var entered []TableEntered
		k := s.sinkOpts(t, cfg, st, Options{OnEntered: func(e TableEntered) { entered = append(entered, e) }})
		orders, archive, neworders := relSchema("orders", "100"), relSchema("archive", "100"), relSchema("orders", "200")
		b1 := []cdc.Event{ev(cdc.Read, orders, 1, nil, row(1, "a", 1)), ev(cdc.Read, orders, 2, nil, row(2, "b", 2))}
		b2 := []cdc.Event{ev(cdc.Insert, orders, 3, nil, row(3, "c", 3)),
			// ALTER TABLE orders RENAME TO archive; CREATE TABLE orders (...)
			ev(cdc.Update, archive, 5, nil, row(2, "moved", 20)),
			ev(cdc.Insert, neworders, 7, nil, row(1, "other relation", 100))}
		if dead := write(t, k, b1); len(dead) != 0 {
			t.Fatal(dead)
		}
		if dead := write(t, k, b2); len(dead) != 0 {
			t.Fatal(dead)
		}
		ids := []int64{1, 2, 3}
		wantRows(t, s, k, "orders", map[int64]cdc.Event{1: b2[2]}, ids)
		wantRows(t, s, k, "archive", map[int64]cdc.Event{2: b2[1]}, ids)
		// archive took orders' relation (orders vacated); the new relation under the vacated
		// name is reported too: it may hold rows from before.
		if len(entered) != 2 || entered[0].Cause != EnteredRenamed || entered[0].Table != archive.ID || entered[0].From != orders.ID ||
			entered[1].Cause != EnteredReplaced || entered[1].Table != orders.ID {
			t.Fatalf("ENTERED %+v", entered)
		}
		k2 := s.sinkOpts(t, cfg, st, Options{})
		if dead := write(t, k2, append(slices.Clone(b1), b2...)); len(dead) != 0 {
			t.Fatal(dead)
		}
		wantRows(t, s, k2, "orders", map[int64]cdc.Event{1: b2[2]}, ids)
		wantRows(t, s, k2, "archive", map[int64]cdc.Event{2: b2[1]}, ids)
	})
}
