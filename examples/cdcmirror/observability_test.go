package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/obscheck"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/mirror/mirrorprom"
)

// TestCommandObservability runs what the binary runs over a PostgreSQL table (a snapshot,
// then streamed changes, lag measured every second) into the first engine, and fails naming
// every metric or label observability/'s cdcmirror dashboard and rules use that its /metrics
// does not export. Every cdcmirror metric appears once a PostgreSQL pipeline has snapshotted,
// streamed a batch and measured its lag (the dead-letter and re-snapshot series are read from
// the status and exported at 0), so none is listed as conditional -- except the active/standby
// series (sharedStoreOnly), which exist only under a shared state_store: they are taken from
// the command's collector (mirrorprom under the namespace cdcmirror) fed a status with
// Leadership set, and only those names. At the end the index equals the table row by row.
func TestCommandObservability(t *testing.T) {
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	eng := mirrortest.Engines[0] // the names do not depend on the engine
	node := &mirrortest.Node{Node: estest.Connect(t, eng.Name, testenv.Require(t, eng.URLVar))}
	node.EnforceAutoCreateRule(t)
	exprs, err := obscheck.AllExprs("cdcmirror")
	if err != nil {
		t.Fatal(err)
	}
	standby := leadershipExported(t)
	sfx := estest.RandomHex(t, 4)
	pg := mirrortest.NewPostgres(t, pgDSN, "db39_obs_"+sfx)
	slot := "db39_obs_" + sfx
	index := "db39-obs-" + pg.Name()
	node.DeleteAtCleanup(t, index)
	source := fmt.Sprintf("      type: postgres\n      dsn: \"${%s}\"\n      tables: [public.%s]\n      slot: %s\n      publication: %s\n",
		testenv.PostgresDSN, pg.Name(), slot, slot)
	cfgPath := writeCommandConfig(t, t.TempDir(), eng, commandConfig{Pipeline: "pg", Source: source, SinkID: "es-obs",
		Index: "db39-obs-{table}", Runner: "{batch_max_wait: 50ms, lag_interval: 1s}"})
	pg.Exec(t, pg.Insert(1, 100)...)
	// Registered before the command starts, so it runs after the command stopped: the slot
	// and publication go, retried while the slot is still active for the ending walsender (a
	// slot left behind holds WAL for every test).
	t.Cleanup(func() { dropPipeline(t, cfgPath, "pg") })

	run := startCommand(t, cfgPath)
	pg.Exec(t, mirrortest.Changes(pg, 101, 120)...)
	run.waitFor(index+" convergence", node.Converged(t, index, pg, 150))

	// Lag is measured once a second: poll until every name is there; WaitFor's bound only
	// catches a hang, and its failure prints the last answer: what is missing.
	run.waitFor("every metric of the dashboard and rules exported", func() string {
		_, text := run.get("/metrics")
		exported, err := obscheck.ParseExposition(text)
		if err != nil {
			return err.Error()
		}
		for _, name := range sharedStoreOnly {
			if _, ok := exported[name]; !ok {
				exported[name] = standby[name]
			}
		}
		if missing := obscheck.Missing(exprs, exported, nil, nil); len(missing) > 0 {
			return "observability/'s cdcmirror dashboard and rules use what the running binary does not export:\n" +
				strings.Join(missing, "\n")
		}
		return ""
	})
	pg.Exec(t, mirrortest.Changes(pg, 121, 130)...)
	run.waitFor(index+" convergence after the scrape", node.Converged(t, index, pg, 150))
	run.stop()
}

// sharedStoreOnly are the series mirrorprom exports only for a pipeline with a shared state
// store (cdc.Status.Leadership.Role set), which this command does not run.
var sharedStoreOnly = []string{"cdcmirror_role", "cdcmirror_takeovers_total", "cdcmirror_lease_epoch",
	"cdcmirror_last_takeover_seconds", "cdcmirror_state_store_error"}

// leadershipExported is what the command's collector exports for an active pipeline of an
// active/standby deployment that took over once; every sharedStoreOnly name must be in it.
func leadershipExported(t *testing.T) obscheck.Exported {
	t.Helper()
	c := mirrorprom.New(&mirrorprom.Options{Namespace: "cdcmirror"})
	c.Watch(&fakeMirror{st: []cdc.Status{{Pipeline: "pg", State: "streaming", Health: cdc.Health{Healthy: true},
		Leadership: cdc.Leadership{Role: cdc.RoleActive, Holder: "a", Epoch: 2, Since: time.Now(), Takeovers: 1,
			LastTakeover: 2 * time.Second}}}})
	got, err := obscheck.Collected(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sharedStoreOnly {
		if _, ok := got[name]; !ok {
			t.Fatalf("the collector fed a status with Leadership set does not export %s", name)
		}
	}
	return got
}

// dropPipeline drops a pipeline's slot, publication and records, retrying while the source
// refuses (a slot still active for a walsender that is ending); the bound only catches a hang.
func dropPipeline(t *testing.T, cfgPath, pipeline string) {
	t.Helper()
	cfg, err := mirror.LoadConfig(cfgPath)
	if err != nil {
		t.Errorf("drop %s: %v", pipeline, err)
		return
	}
	for deadline := time.Now().Add(mirrortest.WaitBound); ; time.Sleep(500 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = mirror.Drop(ctx, cfg, pipeline, nil)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("drop %s (its slot may be left behind): %v", pipeline, err)
			return
		}
	}
}
