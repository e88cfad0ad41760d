package mysqlcdc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// TestTruncateEmitsOneEventPerCapturedTable truncates a captured table between inserts, with
// and without the TABLE keyword and a database qualifier, and truncates a table that is not
// captured: each captured truncate is one cdc.Truncate event, ordered by version between the
// rows around it, carrying a checkpoint and the table's schema; the other produces nothing.
// Resuming from the checkpoint before a truncate delivers it again with the same version.
func TestTruncateEmitsOneEventPerCapturedTable(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		table, other := "trunc_"+suffix(), "trunc_other_"+suffix()
		q, qo := quote(table), quote(other)
		for _, tb := range []string{q, qo} {
			if err := s.exec(fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n INT)", tb)); err != nil {
				t.Fatal(err)
			}
		}
		// Both tables are dropped at cleanup; only the first is captured.
		src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Positioning: p}, table)
		t.Cleanup(func() { _ = s.exec("DROP TABLE IF EXISTS " + qo) })
		st, err := src.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := s.exec(
			fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", q),
			fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", qo),
			"TRUNCATE TABLE "+quote(s.db)+"."+q,
			"TRUNCATE "+qo,
			fmt.Sprintf("INSERT INTO %s VALUES (1, 2), (2, 2)", q),
			"/* by a tool */ truncate "+q,
			fmt.Sprintf("INSERT INTO %s VALUES (3, 3)", q),
		); err != nil {
			t.Fatal(err)
		}
		wantOps := []cdc.Op{cdc.Insert, cdc.Truncate, cdc.Insert, cdc.Insert, cdc.Truncate, cdc.Insert}
		var got []cdc.Event
		for i, want := range wantOps {
			ev := cdctest.NextEvent(ctx, t, st)
			if ev.Op != want {
				t.Fatalf("event %d: %v, want %v", i, ev.Op, want)
			}
			if ev.Table.Table != table {
				t.Fatalf("event %d is of table %q", i, ev.Table.Table)
			}
			if i > 0 && ev.Position.Version() <= got[i-1].Position.Version() {
				t.Fatalf("event %d: version %d not above the previous %d", i, ev.Position.Version(), got[i-1].Position.Version())
			}
			got = append(got, ev)
		}
		for _, i := range []int{1, 4} {
			ev := got[i]
			if ev.Before != nil || ev.After != nil {
				t.Errorf("truncate event %d carries a row: before %v after %v", i, ev.Before, ev.After)
			}
			if ev.Checkpoint == nil {
				t.Errorf("truncate event %d has no checkpoint; it ends its transaction", i)
			}
			if ev.Schema == nil || len(ev.Schema.Columns) != 2 {
				t.Errorf("truncate event %d: schema %v", i, ev.Schema)
			}
			if ev.TxID == "" || ev.TxID == got[i-1].TxID || ev.CommitTime.IsZero() {
				t.Errorf("truncate event %d: transaction %q (previous %q), commit time %v", i, ev.TxID, got[i-1].TxID, ev.CommitTime)
			}
		}
		select {
		case ev := <-st.Events():
			t.Fatalf("unexpected event %v of %v", ev.Op, ev.Table)
		case <-time.After(300 * time.Millisecond):
		}
		_ = st.Close()

		// From the checkpoint of the first row: the truncate comes again, the same.
		st2, err := src.Open(ctx, got[0].Checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer st2.Close()
		for i, want := range got[1:] {
			ev := cdctest.NextEvent(ctx, t, st2)
			if ev.Op != want.Op || ev.Position.Version() != want.Position.Version() || (ev.Checkpoint != nil) != (want.Checkpoint != nil) {
				t.Fatalf("replayed event %d: %v at %v (checkpoint %v), first %v at %v", i+1, ev.Op, ev.Position, ev.Checkpoint != nil,
					want.Op, want.Position)
			}
		}
	})
}
