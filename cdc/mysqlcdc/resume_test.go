package mysqlcdc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// TestResumeNeverHalfAppliesATransaction stops reading in the middle of a multi-row transaction
// and resumes from the last checkpoint: the whole transaction comes again, with the same
// versions, and checkpoints sit only on transactions' last rows.
func TestResumeNeverHalfAppliesATransaction(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		table := "resume_" + suffix()
		if err := s.exec(fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n INT)", quote(table))); err != nil {
			t.Fatal(err)
		}
		src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Positioning: p}, table)
		st, err := src.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ins := func(ids ...int) string {
			q := fmt.Sprintf("INSERT INTO %s (id, n) VALUES ", quote(table))
			for i, id := range ids {
				if i > 0 {
					q += ", "
				}
				q += fmt.Sprintf("(%d, %d)", id, id)
			}
			return q
		}
		if err := s.exec(ins(0)); err != nil {
			t.Fatal(err)
		}
		// One transaction of five rows in three statements (two multi-row rows events).
		if err := s.execTx(ins(1, 2), ins(3), fmt.Sprintf("UPDATE %s SET n = 30 WHERE id IN (1, 3)", quote(table))); err != nil {
			t.Fatal(err)
		}
		if err := s.exec(ins(9)); err != nil {
			t.Fatal(err)
		}

		first := cdctest.NextEvent(ctx, t, st)
		if first.Checkpoint == nil {
			t.Fatal("a one-row transaction's event carries no checkpoint")
		}
		var tx []cdc.Event
		for range 5 {
			tx = append(tx, cdctest.NextEvent(ctx, t, st))
		}
		for i, ev := range tx {
			if (ev.Checkpoint != nil) != (i == len(tx)-1) {
				t.Fatalf("event %d of 5 in one transaction: checkpoint set = %v", i, ev.Checkpoint != nil)
			}
			if i > 0 && ev.Position.Version() <= tx[i-1].Position.Version() {
				t.Fatalf("versions within the transaction do not increase: %v then %v", tx[i-1].Position, ev.Position)
			}
			if ev.TxID != tx[0].TxID || ev.TxID == first.TxID {
				t.Fatalf("transaction ids %q, %q, first %q", ev.TxID, tx[0].TxID, first.TxID)
			}
		}
		last := cdctest.NextEvent(ctx, t, st)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if _, open := <-st.Events(); open {
			t.Fatal("Events still open after Close")
		}
		if err := st.Err(); err != nil {
			t.Fatalf("Err after Close = %v, want nil", err)
		}
		if err := st.Ack(ctx, last.Checkpoint); !errors.Is(err, cdc.ErrSourceClosed) {
			t.Fatalf("Ack after Close = %v, want ErrSourceClosed", err)
		}

		// As if the runner had stored only the first checkpoint, having seen part of the
		// transaction: resuming replays all of it.
		st2, err := src.Open(ctx, first.Checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer st2.Close()
		for i, want := range append(tx, last) {
			got := cdctest.NextEvent(ctx, t, st2)
			if got.Op != want.Op || got.Position.Version() != want.Position.Version() || fmt.Sprint(got.After) != fmt.Sprint(want.After) {
				t.Fatalf("replayed event %d is %v %v at %v, first delivered as %v %v at %v",
					i, got.Op, got.After, got.Position, want.Op, want.After, want.Position)
			}
			if (got.Checkpoint != nil) != (want.Checkpoint != nil) {
				t.Fatalf("replayed event %d: checkpoint set = %v, first %v", i, got.Checkpoint != nil, want.Checkpoint != nil)
			}
		}
		if err := st2.Ack(ctx, last.Checkpoint); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-st2.Events():
			t.Fatalf("unexpected event %v at %v", ev.Op, ev.Position)
		case <-time.After(300 * time.Millisecond):
		}
	})
}

// TestDDLUpdatesSchemaCache changes a table's columns while streaming, and replays rows written
// before the change: each row comes with the columns it was written with.
func TestDDLUpdatesSchemaCache(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table := "ddl_" + suffix()
	q := quote(table)
	if err := s.exec(fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n INT, e ENUM('a','b'))", q)); err != nil {
		t.Fatal(err)
	}
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{}, table)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := s.exec(
		fmt.Sprintf("INSERT INTO %s VALUES (0, 0, 'b')", q),
		fmt.Sprintf("INSERT INTO %s VALUES (1, 1, 'a')", q),
		fmt.Sprintf("ALTER TABLE %s MODIFY e ENUM('c','a','b'), ADD COLUMN extra VARCHAR(8)", q),
		fmt.Sprintf("INSERT INTO %s VALUES (2, 2, 'c', 'x')", q),
		fmt.Sprintf("ALTER TABLE %s DROP COLUMN n", q),
		fmt.Sprintf("INSERT INTO %s VALUES (3, 'b', 'y')", q),
	); err != nil {
		t.Fatal(err)
	}
	want := []string{"[0 0 b]", "[1 1 a]", "[2 2 c x]", "[3 b y]"}
	wantCols := []int{3, 3, 4, 3}
	check := func(st cdc.Stream, from int) cdc.Event {
		var first cdc.Event
		for i := from; i < len(want); i++ {
			ev := cdctest.NextEvent(ctx, t, st)
			if i == from {
				first = ev
			}
			if got := fmt.Sprint(ev.After); got != want[i] || len(ev.Schema.Columns) != wantCols[i] {
				t.Fatalf("row %d: %s with %d columns, want %s with %d", i, got, len(ev.Schema.Columns), want[i], wantCols[i])
			}
		}
		return first
	}
	first := check(st, 0)
	_ = st.Close()

	// Replay from before the changes: the catalog has moved on, the rows' images have not.
	st2, err := src.Open(ctx, first.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	check(st2, 1)
}
