package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestCommandActiveStandby runs two cdcmirror commands on one pipeline with a shared state
// store (state_store: in the source PostgreSQL, holders ht2-a and ht2-b in two files that
// differ in nothing else): the first to start is active, the second stands by. `status`
// against each prints the live role line (active, or standby naming the active holder), and
// /status and the status page say the same; a clean stop of the active hands the pipeline
// over, `status` then saying active with one takeover here. The index equals the table row
// by row after the handover.
func TestCommandActiveStandby(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		sfx := estest.RandomHex(t, 4)
		tb := mirrortest.NewPostgres(t, dsn, "ht2_cli_ha_"+sfx)
		slot, schema := "ht2_cli_ha_"+sfx, "ht2_"+sfx
		index := "ht2-cli-ha-" + tb.Name()
		node.DeleteAtCleanup(t, index)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
				t.Error(err)
			}
		})
		dir := t.TempDir()
		cfgFor := func(holder string) string {
			text := fmt.Sprintf(`pipeline: pg
source:
  type: postgres
  dsn: "${%s}"
  tables: [public.%s]
  slot: %s
  publication: %s
sinks:
  - type: elasticsearch
    config:
      id: es-ha
      url: "${%s}"
      index: "ht2-cli-ha-{table}"
      auth: {type: none}
%s      number_of_replicas: 0
state_store:
  type: postgres
  dsn: "${%s}"
  schema: %s
  lease_ttl: 2s
  holder: %s
dlq: %s
runner: {batch_max_wait: 50ms, lag_interval: 1s}
`, testenv.PostgresDSN, tb.Name(), slot, slot, eng.URLVar, eng.MappingYAML("      "), testenv.PostgresDSN, schema, holder,
				filepath.Join(dir, holder+".dlq"))
			path := filepath.Join(dir, holder+".yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
		cfgA, cfgB := cfgFor("ht2-a"), cfgFor("ht2-b")
		// Registered before the runs' own cleanups, so it runs after them: the slot, the
		// publication and the shared state go once both stopped.
		t.Cleanup(func() { dropPipeline(t, cfgA, "pg") })
		tb.Exec(t, tb.Insert(1, 100)...)

		a := startCommand(t, cfgA)
		a.waitFor("convergence", node.Converged(t, index, tb, 300))
		b := startCommand(t, cfgB)
		roleOf := func(r *commandRun) string {
			_, body := r.get("/status")
			var doc statusDoc
			if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Pipelines) != 1 || doc.Pipelines[0].Leadership == nil {
				return "no leadership in /status: " + body
			}
			ld := doc.Pipelines[0].Leadership
			return fmt.Sprintf("%s %s %d", ld.Role, ld.Holder, ld.Takeovers)
		}
		b.waitFor("the second process standing by", func() string {
			if got := roleOf(b); got != "standby ht2-a 0" {
				return got
			}
			if got := roleOf(a); got != "active ht2-a 1" {
				return got
			}
			return ""
		})

		out := a.admin("status", "--config", cfgA, "--metrics-addr", a.addr)
		t.Logf("status of the active:\n%s", out)
		if want := `  live role: active (lease holder "ht2-a", epoch 1, 1 takeovers here, the last took `; !strings.Contains(out, want) {
			t.Errorf("status of the active lacks %q:\n%s", want, out)
		}
		out = b.admin("status", "--config", cfgB, "--metrics-addr", b.addr)
		t.Logf("status of the standby:\n%s", out)
		for _, want := range []string{`  live role: standby (lease holder "ht2-a", epoch 1, 0 takeovers here)`, "healthy, standby"} {
			if !strings.Contains(out, want) {
				t.Errorf("status of the standby lacks %q:\n%s", want, out)
			}
		}
		if _, page := b.get("/"); !strings.Contains(page, `<p class="role role-standby">`) || !strings.Contains(page, `<span class="holder">ht2-a</span>`) {
			t.Errorf("the standby's status page does not show its role:\n%s", page)
		}

		// A clean stop of the active: the standby takes over, rows written meanwhile arrive.
		a.cancel()
		for i := 101; i <= 130; i++ {
			tb.Exec(t, tb.Insert(i, i)...)
			time.Sleep(20 * time.Millisecond)
		}
		a.stop()
		b.waitFor("the standby taking over", func() string {
			if got := roleOf(b); got != "active ht2-b 1" {
				return got
			}
			return ""
		})
		tb.Exec(t, mirrortest.Changes(tb, 131, 150)...)
		b.waitFor("convergence after the takeover", node.Converged(t, index, tb, 300))
		out = b.admin("status", "--config", cfgB, "--metrics-addr", b.addr)
		t.Logf("status after the takeover:\n%s", out)
		if want := `  live role: active (lease holder "ht2-b", epoch 2, 1 takeovers here, the last took `; !strings.Contains(out, want) {
			t.Errorf("status after the takeover lacks %q:\n%s", want, out)
		}
		if _, page := b.get("/"); !strings.Contains(page, `<p class="role role-active">`) {
			t.Errorf("the new active's status page does not show its role:\n%s", page)
		}
		b.stop()
	})
}
