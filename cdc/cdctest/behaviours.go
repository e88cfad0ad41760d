package cdctest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

type behaviour struct {
	name string
	run  func(ctx context.Context, t *testing.T, e *env)
}

var behaviours = []behaviour{
	{"OrderAndValues", testOrder},
	{"VersionsWithinTransaction", testWithinTransaction},
	{"ResumeFromCheckpoint", testResume},
	{"SnapshotThenStream", testSnapshot},
	{"SchemaChange", testSchemaChange},
	{"MixedCaseNames", testMixedCase},
	{"Types", testTypes},
}

func testOrder(ctx context.Context, t *testing.T, e *env) {
	tb := e.table("orders")
	q := e.h.Quote
	e.exec(ctx, t, ddl(e, tb))
	st := open(ctx, t, e.h.NewSource(t, cdc.SnapshotNever, tb), nil)
	e.exec(ctx, t,
		fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (1, 'ada', 10)", q(tb), q("id"), q("name"), q("n")),
		fmt.Sprintf("UPDATE %s SET %s = 11 WHERE %s = 1", q(tb), q("n"), q("id")),
		fmt.Sprintf("DELETE FROM %s WHERE %s = 1", q(tb), q("id")),
	)
	ins, upd, del := NextEvent(ctx, t, st), NextEvent(ctx, t, st), NextEvent(ctx, t, st)
	wantOp(t, ins, cdc.Insert, tb)
	wantOp(t, upd, cdc.Update, tb)
	wantOp(t, del, cdc.Delete, tb)
	wantInt(t, "insert id", value(t, ins.Schema, ins.After, "id"), 1)
	wantString(t, "insert name", value(t, ins.Schema, ins.After, "name"), "ada")
	wantInt(t, "insert n", value(t, ins.Schema, ins.After, "n"), 10)
	wantInt(t, "update n", value(t, upd.Schema, upd.After, "n"), 11)
	if del.After != nil {
		t.Fatal("a delete carries an after image")
	}
	if del.Before == nil {
		t.Fatal("a delete carries no before image (not even the key)")
	}
	wantInt(t, "delete key", value(t, del.Schema, del.Before, "id"), 1)
	if len(ins.Schema.PrimaryKey) != 1 || ins.Schema.Columns[ins.Schema.PrimaryKey[0]].Name != "id" {
		t.Fatalf("primary key %v, want [id]", ins.Schema.PrimaryKey)
	}
	for _, ev := range []cdc.Event{ins, upd, del} {
		if ev.Checkpoint == nil {
			t.Fatalf("%v of a one-statement transaction carries no checkpoint", ev.Op)
		}
		if ev.CommitTime.IsZero() || ev.TxID == "" {
			t.Fatalf("%v has no commit time or transaction id", ev.Op)
		}
	}
	if !(ins.Position.Version() < upd.Position.Version() && upd.Position.Version() < del.Position.Version()) {
		t.Fatalf("versions %d, %d, %d do not increase", ins.Position.Version(), upd.Position.Version(), del.Position.Version())
	}
	quiet(t, st, 500*time.Millisecond)
}

func testWithinTransaction(ctx context.Context, t *testing.T, e *env) {
	tb := e.table("tx")
	q := e.h.Quote
	e.exec(ctx, t, ddl(e, tb))
	st := open(ctx, t, e.h.NewSource(t, cdc.SnapshotNever, tb), nil)
	e.execTx(ctx, t,
		fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (1, 1)", q(tb), q("id"), q("n")),
		fmt.Sprintf("UPDATE %s SET %s = 2 WHERE %s = 1", q(tb), q("n"), q("id")),
		fmt.Sprintf("UPDATE %s SET %s = 3 WHERE %s = 1", q(tb), q("n"), q("id")),
	)
	evs := []cdc.Event{NextEvent(ctx, t, st), NextEvent(ctx, t, st), NextEvent(ctx, t, st)}
	for i, ev := range evs {
		wantInt(t, fmt.Sprint("event ", i, " n"), value(t, ev.Schema, ev.After, "n"), int64(i+1))
		if i > 0 && ev.Position.Version() <= evs[i-1].Position.Version() {
			t.Fatalf("within one transaction version %d follows %d", ev.Position.Version(), evs[i-1].Position.Version())
		}
		if last := i == len(evs)-1; (ev.Checkpoint != nil) != last {
			t.Fatalf("event %d of 3 in one transaction: checkpoint set = %v", i, ev.Checkpoint != nil)
		}
		if ev.TxID != evs[0].TxID {
			t.Fatal("events of one transaction carry different transaction ids")
		}
	}
}

func testResume(ctx context.Context, t *testing.T, e *env) {
	tb := e.table("resume")
	q := e.h.Quote
	e.exec(ctx, t, ddl(e, tb))
	src := e.h.NewSource(t, cdc.SnapshotNever, tb)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(id int) string {
		return fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (%d, %d)", q(tb), q("id"), q("n"), id, id)
	}
	e.exec(ctx, t, insert(1), insert(2))
	first, second := NextEvent(ctx, t, st), NextEvent(ctx, t, st)
	if err := st.Ack(ctx, first.Checkpoint); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.exec(ctx, t, insert(3)) // made while nothing reads

	st2 := open(ctx, t, src, first.Checkpoint)
	again := NextEvent(ctx, t, st2)
	wantInt(t, "first event after resuming", value(t, again.Schema, again.After, "id"), 2)
	if again.Position.Version() != second.Position.Version() {
		t.Fatalf("a replayed change has version %d, first delivered with %d", again.Position.Version(), second.Position.Version())
	}
	third := NextEvent(ctx, t, st2)
	wantInt(t, "change made while stopped", value(t, third.Schema, third.After, "id"), 3)
	quiet(t, st2, 500*time.Millisecond)
}

func testSnapshot(ctx context.Context, t *testing.T, e *env) {
	tb := e.table("snap")
	q := e.h.Quote
	e.exec(ctx, t, ddl(e, tb),
		fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (1, 1), (2, 2)", q(tb), q("id"), q("n")))
	st := open(ctx, t, e.h.NewSource(t, cdc.SnapshotInitial, tb), nil)
	reads := map[int64]cdc.Event{}
	for range 2 {
		ev := NextEvent(ctx, t, st)
		wantOp(t, ev, cdc.Read, tb)
		id, _ := value(t, ev.Schema, ev.After, "id").(int64)
		reads[id] = ev
	}
	if len(reads) != 2 {
		t.Fatalf("snapshot delivered ids %v, want 1 and 2", reads)
	}
	e.exec(ctx, t, fmt.Sprintf("UPDATE %s SET %s = 10 WHERE %s = 1", q(tb), q("n"), q("id")))
	upd := NextEvent(ctx, t, st)
	wantOp(t, upd, cdc.Update, tb)
	wantInt(t, "streamed n", value(t, upd.Schema, upd.After, "n"), 10)
	if upd.Position.Version() <= reads[1].Position.Version() {
		t.Fatalf("change after the snapshot has version %d, the snapshot read %d", upd.Position.Version(), reads[1].Position.Version())
	}
	quiet(t, st, 500*time.Millisecond)
}

func testSchemaChange(ctx context.Context, t *testing.T, e *env) {
	tb := e.table("ddl")
	q := e.h.Quote
	e.exec(ctx, t, ddl(e, tb))
	st := open(ctx, t, e.h.NewSource(t, cdc.SnapshotNever, tb), nil)
	e.exec(ctx, t, fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (1, 1)", q(tb), q("id"), q("n")))
	before := NextEvent(ctx, t, st)
	e.exec(ctx, t,
		fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s VARCHAR(16)", q(tb), q("extra")),
		fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (2, 2, 'new')", q(tb), q("id"), q("n"), q("extra")))
	after := NextEvent(ctx, t, st)
	if before.Schema.ColumnIndex("extra") >= 0 {
		t.Fatal("the schema before the change already has the new column")
	}
	wantString(t, "new column", value(t, after.Schema, after.After, "extra"), "new")
}

func testMixedCase(ctx context.Context, t *testing.T, e *env) {
	tb := "Mixed_" + e.suffix
	q := e.h.Quote
	e.exec(ctx, t, fmt.Sprintf("CREATE TABLE %s (%s INT NOT NULL PRIMARY KEY, %s VARCHAR(16))", q(tb), q("Id"), q("CamelCol")))
	st := open(ctx, t, e.h.NewSource(t, cdc.SnapshotNever, tb), nil)
	e.exec(ctx, t, fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (7, 'x')", q(tb), q("Id"), q("CamelCol")))
	ev := NextEvent(ctx, t, st)
	wantOp(t, ev, cdc.Insert, tb)
	wantInt(t, "Id", value(t, ev.Schema, ev.After, "Id"), 7)
	wantString(t, "CamelCol", value(t, ev.Schema, ev.After, "CamelCol"), "x")
}
