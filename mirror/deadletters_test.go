package mirror

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TestDeadLettersByTable: the dead-letter file counts what it wrote per table, and
// Mirror.DeadLettersByTable reports a copy.
func TestDeadLettersByTable(t *testing.T) {
	d, err := openDLQ(filepath.Join(t.TempDir(), "p.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.open(); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := &Mirror{seats: []*seat{{name: "p", dlq: d}}}
	if got := m.DeadLettersByTable("p"); got != nil {
		t.Fatalf("before any write: %v", got)
	}
	a := cdc.TableID{Connector: "postgres", Source: "postgres", Database: "db", Schema: "public", Table: "a"}
	b := a
	b.Table = "b"
	rec := func(tb cdc.TableID) cdc.DeadLetterRecord {
		return cdc.DeadLetterRecord{Pipeline: "p", Reason: "test", Event: cdc.Event{Table: tb, Op: cdc.Insert}}
	}
	if err := d.WriteDeadLetters(context.Background(), []cdc.DeadLetterRecord{rec(a), rec(b), rec(a)}); err != nil {
		t.Fatal(err)
	}
	got := m.DeadLettersByTable("p")
	if len(got) != 2 || got[a.String()] != 2 || got[b.String()] != 1 {
		t.Errorf("counts %v", got)
	}
	got[a.String()] = 99 // a copy
	if m.DeadLettersByTable("p")[a.String()] != 2 || m.DeadLettersByTable("other") != nil {
		t.Error("not a copy, or an unknown pipeline answered")
	}
}
