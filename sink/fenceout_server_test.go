package sink

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/sqlstate"
)

// TestFenceOutTakeover: a takeover between two sinks of one pipeline on both engines, as two
// processes, each with its own connection pool to ONE sqlstate store on the shared PostgreSQL
// and on the view fenced by its lease's epoch. A writes two tables, one of them with a reindex
// in progress (both generations written); its lease expires and B acquires it. B's FenceOut
// rotates every index; A's next Write is refused by the cluster (fenced, permanent) and its
// FenceOut by the store (ErrNotLeader, permanent); B writes (updates and a delete) and every
// index -- both generations of the reindexed table -- holds B's rows, row by row.
func TestFenceOutTakeover(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx := context.Background()
	engines(t, func(t *testing.T, s *server) {
		schema := haSchema(t, dsn)
		storeA, storeB := openHAStore(t, dsn, schema), openHAStore(t, dsn, schema)
		const pipeline, ttl = "orders-to-es", time.Second
		la, err := storeA.Acquire(ctx, pipeline, "process-a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.config("ha")
		a := s.sink(t, cfg, storeA.Fenced(pipeline, la.Epoch), nil)
		orders, items := ordersSchema("orders"), ordersSchema("items")
		rows := func(sch *cdc.TableSchema, from int64, name string) []cdc.Event {
			var out []cdc.Event
			for id := int64(1); id <= 5; id++ {
				out = append(out, ev(cdc.Insert, sch, from+id, nil, row(id, name, id)))
			}
			return out
		}
		write(t, a, rows(orders, 0, "a"))
		write(t, a, rows(items, 0, "a"))
		next, err := a.BeginReindex(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		write(t, a, rows(items, 10, "a2")) // to both generations

		deadline := time.Now().Add(time.Minute)
		for {
			l, err := storeB.ReadLease(ctx, pipeline)
			if err == nil && !l.Held() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("A's lease of ttl %v still held after a minute: %+v, %v", ttl, l, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		lb, err := storeB.Acquire(ctx, pipeline, "process-b", ttl)
		if err != nil || lb.Epoch != la.Epoch+1 {
			t.Fatalf("B's Acquire: %+v, %v", lb, err)
		}
		b := s.sink(t, cfg, storeB.Fenced(pipeline, lb.Epoch), nil)
		rep, err := b.FenceOut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		indices := []string{indexOf(t, a, "orders"), indexOf(t, a, "items"), next}
		if len(rep.Rotated) != len(indices) || len(rep.Missing)+len(rep.Unaliased) != 0 {
			t.Fatalf("FenceOut: %+v, want %v rotated", rep, indices)
		}

		// Refused at the cluster (fenced); or, had a lost connection made A claim first, by
		// the store (ErrNotLeader): permanent either way.
		if _, err := a.Write(ctx, rows(orders, 20, "stale")); !cdc.IsPermanent(err) ||
			(esfence.ClassOf(err) != esfence.Fenced && !errors.Is(err, statestore.ErrNotLeader)) {
			t.Fatalf("A's Write after the takeover: %v, want a permanent fenced refusal", err)
		}
		if _, err := a.FenceOut(ctx); !errors.Is(err, statestore.ErrNotLeader) || !cdc.IsPermanent(err) {
			t.Fatalf("A's FenceOut after the takeover: %v, want permanent ErrNotLeader", err)
		}
		ids := []string{"1", "2", "3", "4", "5"}
		if got, _ := s.docs(t, indices[0], ids); len(got) != 5 || got["1"]["name"] != "a" {
			t.Fatalf("after A's refused Write, %s holds %v", indices[0], got)
		}

		write(t, b, rows(orders, 30, "b"))
		write(t, b, rows(items, 30, "b"))
		write(t, b, []cdc.Event{ev(cdc.Delete, orders, 40, row(5, "b", 5), nil), ev(cdc.Delete, items, 40, row(5, "b", 5), nil)})

		for _, index := range indices {
			got, _ := s.docs(t, index, ids)
			if len(got) != 4 {
				t.Fatalf("%s holds %d of the rows, want 4: %v", index, len(got), got)
			}
			for _, id := range ids[:4] {
				if got[id]["name"] != "b" {
					t.Fatalf("%s: row %s is %v, want B's", index, id, got[id])
				}
			}
		}
	})
}

// haSchema is a fresh schema hf_sink_<random> for a sqlstate store, dropped when the test ends.
func haSchema(t *testing.T, dsn string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := fmt.Sprintf("hf_sink_%x", b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	return schema
}

// openHAStore opens a sqlstate store on schema, closed when the test ends: one per process.
func openHAStore(t *testing.T, dsn, schema string) *sqlstate.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlstate.OpenPostgres(ctx, dsn, &sqlstate.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
