package mysqlcdc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/internal/faultproxy"
)

// TestReconnectResumesFromCommit cuts the source's connections (binlog and catalog) again and
// again while multi-row transactions stream. Each cut ends the stream with a retryable error
// and no reconnect of its own; reopened from the last checkpoint it delivered, as a cdc.Runner
// does, every row arrives, a repeated row carries the version it first had, and rows first
// arrive in commit order.
func TestReconnectResumesFromCommit(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		proxy, err := faultproxy.NewTCP(s.addr, faultproxy.TCPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() }) // after the tables are dropped through it
		table := "mysu_reconnect_" + suffix()
		q := quote(table)
		if err := s.exec(fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n INT)", q)); err != nil {
			t.Fatal(err)
		}
		viaProxy := s
		viaProxy.addr = proxy.Addr()
		src := viaProxy.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Positioning: p}, table)
		st, err := src.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = st.Close() }()
		// A first checkpoint to reopen from, before any transaction is cut.
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (-2, -2)", q)); err != nil {
			t.Fatal(err)
		}
		last := cdctest.NextEvent(ctx, t, st).Checkpoint
		if last == nil {
			t.Fatal("a one-row transaction's event carries no checkpoint")
		}

		// Large transactions (many rows events) through a slow link, so that a cut lands
		// in the middle of one: the reopened stream must read it again from its start.
		proxy.SetLatency(faultproxy.ToClient, 20*time.Millisecond)
		const rounds, perTx = 4, 2000
		seen := map[int64]int64{} // id -> version
		var order []int64
		resets, repeats := 0, 0
		take := func(ev cdc.Event) {
			repeats += record(t, seen, &order, ev)
			if ev.Checkpoint != nil {
				last = ev.Checkpoint
			}
		}
		for round := 0; round < rounds; round++ {
			ins := fmt.Sprintf("INSERT INTO %s VALUES ", q)
			for k := 0; k < perTx; k++ {
				id := round*perTx + k
				if k > 0 {
					ins += ", "
				}
				ins += fmt.Sprintf("(%d, %d)", id, id)
			}
			if err := s.exec(ins); err != nil {
				t.Fatal(err)
			}
			// Read one row of the transaction, then cut every connection.
			take(cdctest.NextEvent(ctx, t, st))
			accepted := proxy.Stats().Accepted
			resets += proxy.ResetAll()
			drainUntilClosed(ctx, t, st, take)
			if err := st.Err(); err == nil || cdc.IsPermanent(err) {
				t.Fatalf("the cut stream ended with %v, want a retryable error", err)
			}
			if n := proxy.Stats().Accepted - accepted; n != 0 {
				t.Fatalf("the stream opened %d connections of its own after the cut; it must end instead", n)
			}
			_ = st.Close()
			if st, err = src.Open(ctx, last); err != nil {
				t.Fatal(err)
			}
			for len(seen) < (round+1)*perTx {
				take(cdctest.NextEvent(ctx, t, st))
			}
		}
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (-1, -1)", q)); err != nil {
			t.Fatal(err)
		}
		for {
			ev := cdctest.NextEvent(ctx, t, st)
			if ev.After[0].(int64) == -1 {
				break
			}
			take(ev)
		}
		if len(seen) != rounds*perTx {
			t.Fatalf("%d distinct rows arrived, want %d", len(seen), rounds*perTx)
		}
		for i, id := range order {
			if id != int64(i) {
				t.Fatalf("rows first arrived in order %v", order)
			}
		}
		t.Logf("%d connections reset, %d rows delivered again", resets, repeats)
	})
}

// record notes a delivered row and returns 1 when it is a repeat (with its first version).
func record(t *testing.T, seen map[int64]int64, order *[]int64, ev cdc.Event) int {
	t.Helper()
	id := ev.After[0].(int64)
	v, ok := seen[id]
	if !ok {
		seen[id] = ev.Position.Version()
		*order = append(*order, id)
		return 0
	}
	if v != ev.Position.Version() {
		t.Fatalf("row %d came again with version %d, first %d", id, ev.Position.Version(), v)
	}
	return 1
}

// drainUntilClosed hands every event still buffered to fn until Events is closed (the stream
// ended), failing the test when ctx ends first.
func drainUntilClosed(ctx context.Context, t *testing.T, st cdc.Stream, fn func(cdc.Event)) {
	t.Helper()
	for {
		select {
		case ev, ok := <-st.Events():
			if !ok {
				return
			}
			if fn != nil {
				fn(ev)
			}
		case <-ctx.Done():
			t.Fatalf("the stream did not end before the deadline: %v", ctx.Err())
		}
	}
}
