package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/statestore"
)

// The end-to-end tests run a mirror from a YAML configuration against the real servers,
// once per search engine (subtests elasticsearch and opensearch, each gated on its server):
// a snapshot, streamed inserts, updates and deletes, a clean stop, and a restart that resumes
// from the state file; then deleting the pipeline (Drop) and starting it over.

const initialRows = 300

func TestEndToEndPostgres(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		name := "mir_e2e_" + estest.RandomHex(t, 4)
		tb := mirrortest.NewPostgres(t, dsn, name)
		dropSlotAtCleanup(t, dsn, name)
		runEndToEnd(t, eng, node, tb, fmt.Sprintf("source:\n  type: postgres\n  dsn: \"${%s}\"\n  tables: [public.%s]\n  slot: %s\n  publication: %s\n",
			testenv.PostgresDSN, name, name, name))
	})
}

func TestEndToEndMySQL(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		name := "mir_e2e_" + estest.RandomHex(t, 4)
		tb := mirrortest.NewMySQL(t, dsn, name)
		runEndToEnd(t, eng, node, tb, fmt.Sprintf("source:\n  type: mysql\n  dsn: \"${%s}\"\n  tables: [%s]\n  flavor: mariadb\n  server_id: %d\n",
			testenv.MySQLDSN, name, mirrortest.ServerID(t)))
	})
}

// dropSlotAtCleanup removes the slot and publication named name that a mirror created.
func dropSlotAtCleanup(t testing.TB, dsn, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if src, err := pgcdc.New(dsn, &pgcdc.Options{Slot: name, Publication: name}); err != nil {
			t.Error(err)
		} else if err := src.Drop(ctx); err != nil {
			t.Errorf("dropping the slot: %v", err)
		}
	})
}

// writeConfig writes a one-pipeline configuration (the single form) for source into dir.
func writeConfig(t *testing.T, dir, pipeline, source string, eng mirrortest.Engine, index string) *mirror.Config {
	t.Helper()
	text := "pipeline: " + pipeline + "\n" + source + fmt.Sprintf(`sinks:
  - type: elasticsearch
    config:
      id: es-e2e
      url: "${%s}"
      index: "%s"
      id_separator: "|"
      auth: {type: none}
%s      number_of_shards: 1
      number_of_replicas: 0
state: %s
dlq: %s
runner:
  batch_max_events: 100
  batch_max_wait: 50ms
`, eng.URLVar, index, eng.MappingYAML("      "), filepath.Join(dir, "state.db"), filepath.Join(dir, "dlq.jsonl"))
	cfg := loadYAML(t, dir, text)
	return cfg
}

// loadYAML writes a configuration's text into dir and loads it.
func loadYAML(t testing.TB, dir, text string) *mirror.Config {
	t.Helper()
	path := filepath.Join(dir, "mirror.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := mirror.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// running is one Run of a mirror.
type running struct {
	t      *testing.T
	m      *mirror.Mirror
	cancel context.CancelFunc
	done   chan error
	err    error // Run's result, once done
	ended  bool
}

func start(t *testing.T, cfg *mirror.Config) *running {
	t.Helper()
	return startWith(t, cfg, nil)
}

// ended reports, without waiting, whether Run returned: an error for WaitFor.
func (r *running) endedErr() error {
	if !r.ended {
		select {
		case r.err = <-r.done:
			r.ended = true
		default:
			return nil
		}
	}
	if r.err == nil {
		return errors.New("Run returned nil")
	}
	return r.err
}

func (r *running) wait(what string, check func() string) {
	r.t.Helper()
	mirrortest.WaitFor(r.t, what, r.endedErr, check)
}

// stop ends Run as a signal would; Run must return nil.
func (r *running) stop() {
	r.t.Helper()
	r.cancel()
	if !r.ended {
		select {
		case r.err = <-r.done:
			r.ended = true
		case <-time.After(mirrortest.WaitBound):
			r.t.Fatal("Run did not return after its context ended")
		}
		if r.err != nil {
			r.t.Fatalf("Run after its context ended: %v", r.err)
		}
	}
}

func (r *running) status() cdc.Status { return r.m.Status()[0] }

func runEndToEnd(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node, tb mirrortest.Table, source string) {
	index := "mir-e2e-" + tb.Name()
	node.DeleteAtCleanup(t, index)
	dir := t.TempDir()
	const pipeline = "e2e"
	cfg := writeConfig(t, dir, pipeline, source, eng, "mir-e2e-{table}")
	tb.Exec(t, tb.Insert(1, initialRows)...)
	maxID := initialRows + 30

	// First run: the snapshot, then streamed changes.
	run := start(t, cfg)
	run.wait("snapshot convergence", node.Converged(t, index, tb, maxID))
	types := node.FieldTypes(t, index)
	if types["price"] != eng.DecimalType {
		t.Errorf("price (DECIMAL(10,2)) is mapped as %q, want %q", types["price"], eng.DecimalType)
	}
	if tb.Unsigned() {
		if types["views"] != eng.Uint64Type {
			t.Errorf("views (BIGINT UNSIGNED) is mapped as %q, want %q", types["views"], eng.Uint64Type)
		}
		// Exact in the index too, not only in _source: a double would match every row.
		v := strconv.FormatUint(mirrortest.ViewsOf(7), 10)
		if n := node.CountMatching(t, index, map[string]any{"term": map[string]any{"views": v}}); n != 1 {
			t.Errorf("a term query for one row's views matched %d documents, want 1", n)
		}
	}
	tb.Exec(t, mirrortest.Changes(tb, initialRows+1, initialRows+20)...)
	run.wait("stream convergence", node.Converged(t, index, tb, maxID))
	const changes = initialRows + 20 + 50 + 21 + 30
	run.wait("events counted", func() string {
		if s := run.status(); s.Progress.Events < changes || !s.Health.Healthy || s.State != "streaming" {
			return fmt.Sprintf("%d events, health %+v, state %s", s.Progress.Events, s.Health, s.State)
		}
		return ""
	})
	if s := run.status(); s.Pipeline != pipeline || s.Progress.DeadLetters != 0 || s.Reconnects != 0 {
		t.Errorf("status %+v", s)
	}
	run.stop()
	if err := run.m.Close(); err != nil {
		t.Fatal(err)
	}

	// The clean stop kept the checkpoint; nothing was dead-lettered.
	st, err := statestore.Open(cfg.State, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := st.LoadCheckpoint(context.Background(), pipeline)
	st.Close()
	if err != nil || cp == nil {
		t.Fatalf("no checkpoint after the stop (err %v)", err)
	}
	if fi, err := os.Stat(cfg.Pipelines[0].DLQ); err != nil || fi.Size() != 0 {
		t.Fatalf("dead-letter file: %v, %v", fi, err)
	}

	// Second run: it resumes from the checkpoint (no second snapshot) and follows new changes.
	tb.Exec(t, append(tb.Insert(initialRows+21, initialRows+30),
		"DELETE FROM "+tb.Name()+" WHERE id = 1",
		"UPDATE "+tb.Name()+" SET name = CONCAT(name, ' v3') WHERE id = 2")...)
	run = start(t, cfg)
	run.wait("restart convergence", node.Converged(t, index, tb, maxID))
	if s := run.status(); s.Progress.Events >= initialRows {
		t.Errorf("the restarted mirror handled %d events: it read the table again instead of resuming", s.Progress.Events)
	}
	run.stop()
}

// TestDropThenOpenStartsOver: Drop refuses while the pipeline runs; after a stop it removes
// the slot, the publication, the index and the state, and the next Open reads the table
// afresh in a new snapshot.
func TestDropThenOpenStartsOver(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		ctx := context.Background()
		name := "mir_drop_" + estest.RandomHex(t, 4)
		tb := mirrortest.NewPostgres(t, dsn, name)
		dropSlotAtCleanup(t, dsn, name)
		index := "mir-drop-" + name
		node.DeleteAtCleanup(t, index)
		cfg := writeConfig(t, t.TempDir(), "drop", fmt.Sprintf("source:\n  type: postgres\n  dsn: \"${%s}\"\n  tables: [public.%s]\n  slot: %s\n  publication: %s\n",
			testenv.PostgresDSN, name, name, name), eng, "mir-drop-{table}")
		tb.Exec(t, tb.Insert(1, 100)...)

		run := start(t, cfg)
		run.wait("first convergence", node.Converged(t, index, tb, 200))
		if _, err := mirror.Drop(ctx, cfg, "drop", &mirror.DropOptions{Indices: true}); !errors.Is(err, mirror.ErrRunning) {
			t.Fatalf("Drop while running: %v, want ErrRunning", err)
		}
		// From another state file (another host, say) the running pipeline shows as its slot.
		other := *cfg
		other.State = filepath.Join(t.TempDir(), "other.state")
		if _, err := mirror.Drop(ctx, &other, "drop", nil); !errors.Is(err, mirror.ErrRunning) ||
			!strings.Contains(err.Error(), "replication slot "+name+" is active") {
			t.Fatalf("Drop while the slot is active: %v, want ErrRunning naming the slot", err)
		}
		if _, err := mirror.Drop(ctx, cfg, "nope", nil); err == nil {
			t.Fatal("Drop of a pipeline the configuration does not have succeeded")
		}
		run.stop()
		run.m.Close()

		// Changes while nothing runs: after the drop they must come from the new snapshot,
		// since the slot that held them is gone.
		tb.Exec(t, mirrortest.Changes(tb, 101, 150)...)
		rep, err := mirror.Drop(ctx, cfg, "drop", &mirror.DropOptions{Indices: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Slot != name || rep.Publication != name || len(rep.Indices) != 1 || rep.Indices[0] != index || !rep.Checkpoint {
			t.Fatalf("drop report %+v", rep)
		}
		if node.IndexExists(t, index) {
			t.Fatal("the index is still there")
		}
		insp, err := mirror.Inspect(ctx, cfg, "drop", nil)
		if err != nil {
			t.Fatal(err)
		}
		if insp.Checkpoint || len(insp.Indices) != 0 || insp.Slot == nil || insp.Slot.SlotExists || insp.Slot.PublicationExists {
			t.Fatalf("after the drop: %+v (slot %+v)", insp, insp.Slot)
		}
		// Dropping again finds nothing left and succeeds.
		if rep, err := mirror.Drop(ctx, cfg, "drop", &mirror.DropOptions{Indices: true}); err != nil || rep.Slot != "" || rep.Checkpoint {
			t.Fatalf("a second drop: %+v, %v", rep, err)
		}

		run = start(t, cfg)
		run.wait("convergence after the drop", node.Converged(t, index, tb, 200))
		// The changes made while it was stopped are gone with the slot: only a new snapshot
		// delivers every row.
		if s := run.status(); s.Progress.Events < int64(len(tb.Rows(t))) {
			t.Fatalf("the mirror did not start over with a snapshot: %+v", s.Progress)
		}
		run.stop()
	})
}
