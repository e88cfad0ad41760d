package mirror

import (
	"context"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/statestore"
)

// TestPostgresDefaultNames: the default slot and publication name is valid for PostgreSQL and
// unique per pipeline, also for names that differ only in case, '.' or '-', and long ones.
func TestPostgresDefaultNames(t *testing.T) {
	seen := map[string]string{}
	long := strings.Repeat("x", 100)
	for _, p := range []string{"orders", "Orders", "a-b", "a_b", "a.b", "postgres", long, long[:99] + "y"} {
		n := postgresDefault(p)
		if !slotName.MatchString(n) || len(n) > 59 || !strings.HasPrefix(n, "tributary_") {
			t.Errorf("pipeline %q: default %q is not a slot name of at most 59 characters", p, n)
		}
		if q, dup := seen[n]; dup {
			t.Errorf("pipelines %q and %q share the default %q", q, p, n)
		}
		seen[n] = p
		if n == pgcdc.DefaultName(p) {
			t.Errorf("pipeline %q: the default %q is what an earlier version derived from a source's name", p, n)
		}
	}
	if postgresDefault("orders") != postgresDefault("orders") {
		t.Error("the default is not stable")
	}
}

// TestPostgresNames: a pipeline without state gets its default; one with a pgcdc checkpoint
// but no record (it ran under an earlier version) keeps pgcdc.DefaultName of its source's
// name; source: settings win; what Open resolved is recorded and wins over later defaults,
// also once the setting is removed; a Debezium checkpoint is no pgcdc history.
func TestPostgresNames(t *testing.T) {
	ctx := context.Background()
	p := PipelineConfig{Name: "orders", Source: SourceConfig{Type: "postgres", DSN: "postgres://u@127.0.0.1:1/db"}}
	resolve := func(st statestore.Store, p *PipelineConfig) (pgNames, bool) {
		t.Helper()
		n, rec, err := postgresNames(ctx, st, p)
		if err != nil {
			t.Fatal(err)
		}
		return n, rec
	}
	def := postgresDefault("orders")

	if n, _ := resolve(nil, &p); n.Slot != def || n.Publication != def || n.owner != "" {
		t.Fatalf("no state file: %+v", n)
	}
	st := statestore.NewMemory()
	n, rec := resolve(st, &p)
	if n.Slot != def || n.Publication != def || rec || !strings.Contains(n.owner, `"orders"`) || !strings.Contains(n.owner, st.Identity()) {
		t.Fatalf("a new pipeline: %+v recorded %v", n, rec)
	}
	if err := recordPostgresNames(ctx, st, &p); err != nil {
		t.Fatal(err)
	}
	if n, rec := resolve(st, &p); n.Slot != def || !rec {
		t.Fatalf("after recording: %+v recorded %v", n, rec)
	}

	// An upgrade: a checkpoint of pgcdc and no record.
	old := statestore.NewMemory()
	if err := old.SaveCheckpoint(ctx, "orders", cdc.Checkpoint(`{"v":1,"lsn":"0/16B3748"}`)); err != nil {
		t.Fatal(err)
	}
	legacy := pgcdc.DefaultName("postgres")
	if n, rec := resolve(old, &p); n.Slot != legacy || n.Publication != legacy || rec {
		t.Fatalf("an upgraded pipeline: %+v recorded %v, want %s", n, rec, legacy)
	}
	q := p
	q.Source.Name = "shop"
	if n, _ := resolve(old, &q); n.Slot != pgcdc.DefaultName("shop") {
		t.Fatalf("an upgraded pipeline with a source name: %+v", n)
	}
	if err := recordPostgresNames(ctx, old, &p); err != nil {
		t.Fatal(err)
	}
	if err := old.DeletePipeline(ctx, "orders"); err != nil { // Drop: checkpoint and record go
		t.Fatal(err)
	}
	if n, _ := resolve(old, &p); n.Slot != def {
		t.Fatalf("after a drop: %+v", n)
	}

	// A Debezium checkpoint (the way back from Debezium) is not the native source's history.
	dbz := statestore.NewMemory()
	if err := dbz.SaveCheckpoint(ctx, "orders", cdc.Checkpoint(`{"debezium":{"p":1}}`)); err != nil {
		t.Fatal(err)
	}
	if n, _ := resolve(dbz, &p); n.Slot != def {
		t.Fatalf("a Debezium checkpoint: %+v", n)
	}

	// source: settings win and are recorded; the record outlives them.
	set := p
	set.Source.Slot, set.Source.Publication = "mine", "mine_pub"
	if n, rec := resolve(st, &set); n.Slot != "mine" || n.Publication != "mine_pub" || rec {
		t.Fatalf("set names: %+v recorded %v", n, rec)
	}
	if err := recordPostgresNames(ctx, st, &set); err != nil {
		t.Fatal(err)
	}
	if n, rec := resolve(st, &p); n.Slot != "mine" || n.Publication != "mine_pub" || !rec {
		t.Fatalf("after the setting is removed: %+v recorded %v", n, rec)
	}
	only := p
	only.Source.Slot = "other"
	if n, _ := resolve(st, &only); n.Slot != "other" || n.Publication != "mine_pub" {
		t.Fatalf("a slot set alone: %+v", n)
	}
}

// TestForgetPostgresNames: a pipeline leaving the native path forgets its names; the next
// native start takes the default (the Debezium checkpoint is no pgcdc history).
func TestForgetPostgresNames(t *testing.T) {
	ctx := context.Background()
	st := statestore.NewMemory()
	p := PipelineConfig{Name: "orders", Source: SourceConfig{Type: "postgres", DSN: "postgres://u@127.0.0.1:1/db", Slot: "old"}}
	if err := forgetPostgresNames(ctx, st, p.Name); err != nil {
		t.Fatalf("no record: %v", err)
	}
	if err := recordPostgresNames(ctx, st, &p); err != nil {
		t.Fatal(err)
	}
	if err := forgetPostgresNames(ctx, st, p.Name); err != nil {
		t.Fatal(err)
	}
	p.Source.Slot = ""
	if n, rec, err := postgresNames(ctx, st, &p); err != nil || rec || n.Slot != postgresDefault("orders") {
		t.Fatalf("after forgetting: %+v %v %v", n, rec, err)
	}
}
