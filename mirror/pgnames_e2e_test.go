package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/statestore"
)

// The slot and publication names of postgres pipelines (doc.go, Slot and publication names),
// on the real servers: pipelines with default settings on one database each get their own;
// a pipeline that ran under a version deriving them from the source's name keeps its slot;
// a slot or publication of another pipeline is refused with a fix that never shares it.

// pgPipelineYAML is one list entry of a postgres pipeline reading table into index pattern
// "n32nm-{table}", with extra source settings (each line indented by 6).
func pgPipelineYAML(eng mirrortest.Engine, dir, name, table, extra string) string {
	return fmt.Sprintf(`  - name: %s
    source:
      type: postgres
      dsn: "${%s}"
      tables: [public.%s]
%s    sinks:
      - type: elasticsearch
        config:
          id: es-n32
          url: "${%s}"
          index: "n32nm-{table}"
          auth: {type: none}
%s          number_of_shards: 1
          number_of_replicas: 0
    dlq: %s
    runner: {batch_max_events: 100, batch_max_wait: 50ms}
`, name, testenv.PostgresDSN, table, extra, eng.URLVar, eng.MappingYAML("          "), filepath.Join(dir, name+".dlq"))
}

// namesOf reads the slot and publication Inspect says pipeline reads (without a state file:
// what its first run will create) and drops both at cleanup.
func namesOf(t *testing.T, dsn string, cfg *mirror.Config, pipeline string) (slot, pub string) {
	t.Helper()
	rep, err := mirror.Inspect(context.Background(), cfg, pipeline, nil)
	if err != nil || rep.Slot == nil {
		t.Fatalf("inspect %s: %+v, %v", pipeline, rep, err)
	}
	dropSlotAtCleanupNamed(t, dsn, rep.Slot.Slot, rep.Slot.Publication)
	return rep.Slot.Slot, rep.Slot.Publication
}

// dropSlotAtCleanupNamed removes a slot and a publication at cleanup.
func dropSlotAtCleanupNamed(t testing.TB, dsn, slot, pub string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if src, err := pgcdc.New(dsn, &pgcdc.Options{Slot: slot, Publication: pub}); err != nil {
			t.Error(err)
		} else if err := src.Drop(ctx); err != nil {
			t.Errorf("dropping slot %s: %v", slot, err)
		}
	})
}

// TestPostgresDefaultNamesPerPipeline: two pipelines of one file on one database, both with
// default slot and publication, run side by side; each reads a slot of its own (neither
// the source-derived tributary_postgres) and mirrors its table row by row.
func TestPostgresDefaultNamesPerPipeline(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		hex := estest.RandomHex(t, 4)
		dir := t.TempDir()
		ta, tb := mirrortest.NewPostgres(t, dsn, "n32nm_a_"+hex), mirrortest.NewPostgres(t, dsn, "n32nm_b_"+hex)
		ia, ib := "n32nm-"+ta.Name(), "n32nm-"+tb.Name()
		node.DeleteAtCleanup(t, ia)
		node.DeleteAtCleanup(t, ib)
		pa, pb := "n32-a-"+hex, "n32-b-"+hex
		cfg := loadYAML(t, dir, "state: "+filepath.Join(dir, "state.db")+"\npipelines:\n"+
			pgPipelineYAML(eng, dir, pa, ta.Name(), "")+pgPipelineYAML(eng, dir, pb, tb.Name(), ""))
		slotA, pubA := namesOf(t, dsn, cfg, pa)
		slotB, pubB := namesOf(t, dsn, cfg, pb)
		if slotA == slotB || pubA == pubB || slotA == pgcdc.DefaultName("postgres") || slotB == pgcdc.DefaultName("postgres") {
			t.Fatalf("pipelines %s and %s read slots %s and %s, publications %s and %s", pa, pb, slotA, slotB, pubA, pubB)
		}
		ta.Exec(t, ta.Insert(1, 100)...)
		tb.Exec(t, tb.Insert(1, 60)...)

		run := start(t, cfg)
		run.wait("snapshot convergence of "+pa, node.Converged(t, ia, ta, 200))
		run.wait("snapshot convergence of "+pb, node.Converged(t, ib, tb, 200))
		ta.Exec(t, mirrortest.Changes(ta, 101, 130)...)
		tb.Exec(t, mirrortest.Changes(tb, 61, 90)...)
		run.wait("stream convergence of "+pa, node.Converged(t, ia, ta, 200))
		run.wait("stream convergence of "+pb, node.Converged(t, ib, tb, 200))
		for _, s := range run.m.Status() {
			if s.State != "streaming" || s.Progress.DeadLetters != 0 {
				t.Errorf("status %+v", s)
			}
		}
		run.stop()
		_ = run.m.Close()
		for _, p := range []struct{ name, slot, pub string }{{pa, slotA, pubA}, {pb, slotB, pubB}} {
			rep, err := mirror.Inspect(context.Background(), cfg, p.name, nil)
			if err != nil || rep.Slot == nil || rep.Slot.Slot != p.slot || !rep.Slot.SlotExists ||
				rep.Slot.Publication != p.pub || !rep.Slot.PublicationExists || !rep.Checkpoint {
				t.Fatalf("after the run, %s: %+v (slot %+v), %v", p.name, rep, rep.Slot, err)
			}
		}
	})
}

// TestPostgresUpgradeKeepsSlot: a pipeline that ran under an earlier version -- its slot and
// publication tributary_<source name>, a checkpoint in the state file, no record of the
// names -- keeps that slot when it restarts with default settings: the changes made while it
// was stopped come from the slot (no second snapshot), no slot of the new default is made,
// and the names are recorded from then on.
func TestPostgresUpgradeKeepsSlot(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		ctx := context.Background()
		hex := estest.RandomHex(t, 4)
		dir := t.TempDir()
		tb := mirrortest.NewPostgres(t, dsn, "n32up_"+hex)
		index := "n32nm-" + tb.Name()
		node.DeleteAtCleanup(t, index)
		pipeline, source := "n32-up-"+hex, "n32up"+hex
		legacy := pgcdc.DefaultName(source)
		dropSlotAtCleanupNamed(t, dsn, legacy, legacy)
		head := "state: " + filepath.Join(dir, "state.db") + "\npipelines:\n"
		// The earlier version: source name n32up<hex>, hence slot and publication
		// tributary_n32up<hex>, written out here since this version would not derive them.
		old := loadYAML(t, dir, head+pgPipelineYAML(eng, dir, pipeline, tb.Name(),
			fmt.Sprintf("      name: %s\n      slot: %s\n      publication: %s\n", source, legacy, legacy)))
		tb.Exec(t, tb.Insert(1, 300)...)
		run := start(t, old)
		run.wait("snapshot convergence", node.Converged(t, index, tb, 400))
		run.stop()
		_ = run.m.Close()
		// What the earlier version left: a checkpoint and no record of the names.
		st, err := statestore.Open(old.State, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.Get(ctx, pipeline, "pgcdc", "names")
		if err == nil && r.Revision != 0 {
			err = st.Delete(ctx, pipeline, "pgcdc", "names", r.Revision)
		}
		st.Close()
		if err != nil || r.Revision == 0 {
			t.Fatalf("the record of the names: %+v, %v", r, err)
		}

		tb.Exec(t, mirrortest.Changes(tb, 301, 320)...) // only the slot holds these now (121 events)
		upgraded := loadYAML(t, dir, head+pgPipelineYAML(eng, dir, pipeline, tb.Name(), fmt.Sprintf("      name: %s\n", source)))
		if rep, err := mirror.Inspect(ctx, upgraded, pipeline, nil); err != nil || rep.Slot == nil || rep.Slot.Slot != legacy || !rep.Slot.SlotExists {
			t.Fatalf("inspect before the restart: %+v, %v", rep, err)
		}
		run = start(t, upgraded)
		run.wait("convergence after the upgrade", node.Converged(t, index, tb, 400))
		// Inspect while it runs (the state file, with the record, locked) shows that slot.
		if rep, err := mirror.Inspect(ctx, upgraded, pipeline, nil); err != nil || !rep.StateInUse || rep.Slot == nil ||
			rep.Slot.Slot != legacy || !rep.Slot.SlotExists {
			t.Fatalf("inspect while running: %+v, %v", rep, err)
		}
		if s := run.status(); s.Progress.Events >= 300 {
			t.Errorf("the upgraded pipeline handled %d events: it read the table again instead of resuming from its slot", s.Progress.Events)
		}
		run.stop()
		_ = run.m.Close()
		rep, err := mirror.Inspect(ctx, upgraded, pipeline, nil)
		if err != nil || rep.Slot == nil || rep.Slot.Slot != legacy || rep.Slot.Publication != legacy {
			t.Fatalf("inspect after the restart: %+v, %v", rep, err)
		}
		// The new default was never created: a fresh state file would use it.
		fresh := *upgraded
		fresh.State = filepath.Join(t.TempDir(), "fresh.db")
		frep, err := mirror.Inspect(ctx, &fresh, pipeline, nil)
		if err != nil || frep.Slot == nil || frep.Slot.Slot == legacy || frep.Slot.SlotExists || frep.Slot.PublicationExists {
			t.Fatalf("the new default: %+v, %v", frep.Slot, err)
		}
		// The record now holds the names: the state file says so even without a checkpoint
		// reading, and Drop removes exactly these.
		drep, err := mirror.Drop(ctx, upgraded, pipeline, nil)
		if err != nil || drep.Slot != legacy || drep.Publication != legacy {
			t.Fatalf("drop: %+v, %v", drep, err)
		}
	})
}

// TestPostgresForeignSlotRefused: a pipeline of another deployment (another state file) set
// to read a running pipeline's slot, or its publication, is refused before it creates
// anything, with ErrOwnedByOther and a fix that gives it names of its own and never tells it
// to add tables to the other's publication; Drop refuses to drop them too. The first
// pipeline keeps its slot and goes on.
func TestPostgresForeignSlotRefused(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		ctx := context.Background()
		hex := estest.RandomHex(t, 4)
		dirA, dirB := t.TempDir(), t.TempDir()
		ta, tb := mirrortest.NewPostgres(t, dsn, "n32fa_"+hex), mirrortest.NewPostgres(t, dsn, "n32fb_"+hex)
		ia := "n32nm-" + ta.Name()
		node.DeleteAtCleanup(t, ia)
		node.DeleteAtCleanup(t, "n32nm-"+tb.Name())
		pa, pb := "n32-fa-"+hex, "n32-fb-"+hex
		cfgA := loadYAML(t, dirA, "state: "+filepath.Join(dirA, "state.db")+"\npipelines:\n"+pgPipelineYAML(eng, dirA, pa, ta.Name(), ""))
		slotA, pubA := namesOf(t, dsn, cfgA, pa)
		ta.Exec(t, ta.Insert(1, 300)...)
		run := start(t, cfgA)
		run.wait("convergence of "+pa, node.Converged(t, ia, ta, 400))
		run.stop()
		_ = run.m.Close()

		ownPub := "n32fb_pub_" + hex
		dropSlotAtCleanupNamed(t, dsn, "n32fb_slot_"+hex, ownPub)
		for _, tc := range []struct{ what, extra, want string }{
			{"its slot", fmt.Sprintf("      slot: %s\n      publication: %s\n", slotA, ownPub), "slot " + slotA + " is read by pipeline \"" + pa + "\""},
			{"its publication", fmt.Sprintf("      slot: n32fb_slot_%s\n      publication: %s\n", hex, pubA), "publication " + pubA + " belongs to pipeline \"" + pa + "\""},
		} {
			cfgB := loadYAML(t, dirB, "state: "+filepath.Join(dirB, "state.db")+"\npipelines:\n"+pgPipelineYAML(eng, dirB, pb, tb.Name(), tc.extra))
			runB := start(t, cfgB)
			var err error
			runB.wait("the refusal of "+tc.what, func() string {
				if err = runB.endedErr(); err == nil {
					return "still running"
				}
				return ""
			})
			_ = runB.m.Close()
			msg := err.Error()
			if !errors.Is(err, pgcdc.ErrOwnedByOther) || !strings.Contains(msg, tc.want) ||
				!strings.Contains(msg, "slot and a publication of its own") || strings.Contains(msg, "ALTER PUBLICATION") {
				t.Fatalf("a pipeline reading another's %s: %v", tc.what, err)
			}
			if _, err := mirror.Drop(ctx, cfgB, pb, nil); !errors.Is(err, pgcdc.ErrOwnedByOther) {
				t.Fatalf("Drop of a pipeline set to another's %s: %v", tc.what, err)
			}
		}
		// Nothing of B was created, A's slot and publication are whole and A goes on.
		if rep, err := mirror.Inspect(ctx, cfgA, pa, nil); err != nil || !rep.Slot.SlotExists || !rep.Slot.PublicationExists {
			t.Fatalf("A after the refusals: %+v, %v", rep, err)
		}
		ta.Exec(t, mirrortest.Changes(ta, 301, 320)...) // 121 events
		run = start(t, cfgA)
		run.wait("convergence of "+pa+" after the refusals", node.Converged(t, ia, ta, 400))
		if s := run.status(); s.Progress.Events >= 300 {
			t.Errorf("A handled %d events: it read the table again instead of resuming", s.Progress.Events)
		}
		run.stop()
	})
}
