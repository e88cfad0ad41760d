package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
)

// TestCommandTwoPipelines runs what the binary runs with one file holding two pipelines, a
// PostgreSQL and a MariaDB one, into one engine: both converge row by row; /healthz, /status
// and /metrics report each; `status` reports each while the mirror runs and after; `drop` is
// refused while it runs and afterwards deletes each pipeline with its indices.
func TestCommandTwoPipelines(t *testing.T) {
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	myDSN := testenv.Require(t, testenv.MySQLDSN)
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		sfx := estest.RandomHex(t, 4)
		pg := mirrortest.NewPostgres(t, pgDSN, "mir_cli_pg_"+sfx)
		my := mirrortest.NewMySQL(t, myDSN, "mir_cli_my_"+sfx)
		slot := "mir_cli_" + sfx
		pgIndex, myIndex := "mir-cli-pg-"+pg.Name(), "mir-cli-my-"+my.Name()
		node.DeleteAtCleanup(t, pgIndex, myIndex)
		dir := t.TempDir()
		sinkEntry := func(id, index string) string {
			return fmt.Sprintf(`    sinks:
      - type: elasticsearch
        config:
          id: %s
          url: "${%s}"
          index: "%s"
          auth: {type: none}
%s          number_of_replicas: 0
`, id, eng.URLVar, index, eng.MappingYAML("          "))
		}
		cfgText := "state: " + filepath.Join(dir, "state.db") + "\npipelines:\n" +
			fmt.Sprintf("  - name: pg\n    source:\n      type: postgres\n      dsn: \"${%s}\"\n      tables: [public.%s]\n      slot: %s\n      publication: %s\n",
				testenv.PostgresDSN, pg.Name(), slot, slot) +
			sinkEntry("es-pg", "mir-cli-pg-{table}") +
			"    dlq: " + filepath.Join(dir, "pg.dlq") + "\n    runner: {batch_max_wait: 50ms, lag_interval: 1s}\n" +
			fmt.Sprintf("  - name: maria\n    source:\n      type: mysql\n      dsn: \"${%s}\"\n      tables: [%s]\n      server_id: %d\n",
				testenv.MySQLDSN, my.Name(), mirrortest.ServerID(t)) +
			sinkEntry("es-my", "mir-cli-my-{table}") +
			"    dlq: " + filepath.Join(dir, "maria.dlq") + "\n    runner: {batch_max_wait: 50ms, lag_interval: 1s}\n"
		cfgPath := filepath.Join(dir, "cdcmirror.yaml")
		if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
			t.Fatal(err)
		}
		// What the test's drops did not remove (they run only when the test gets there).
		t.Cleanup(func() { dropPipeline(t, cfgPath, "pg") })
		for _, tb := range []mirrortest.Table{pg, my} {
			tb.Exec(t, tb.Insert(1, 100)...)
		}

		run := startCommand(t, cfgPath)
		for _, c := range []struct {
			tb    mirrortest.Table
			index string
		}{{pg, pgIndex}, {my, myIndex}} {
			c.tb.Exec(t, mirrortest.Changes(c.tb, 101, 120)...)
			run.waitFor(c.index+" convergence", node.Converged(t, c.index, c.tb, 150))
		}
		run.waitFor("/healthz", func() string {
			code, body := run.get("/healthz")
			if code != 200 || body != "pg: ok\nmaria: ok\n" {
				return fmt.Sprintf("%d %q", code, body)
			}
			return ""
		})
		// Lag is measured once a second (lag_interval): both sources report it.
		run.waitFor("metrics", func() string {
			_, text := run.get("/metrics")
			m := parseMetrics(t, strings.NewReader(text))
			for _, p := range []string{"pg", "maria"} {
				if m[`cdcmirror_events_total{pipeline="`+p+`"}`] < 90 || m[`cdcmirror_healthy{pipeline="`+p+`"}`] != 1 ||
					m[`cdcmirror_state{pipeline="`+p+`",state="streaming"}`] != 1 {
					return fmt.Sprintf("%s: %v events, healthy %v, streaming %v", p, m[`cdcmirror_events_total{pipeline="`+p+`"}`],
						m[`cdcmirror_healthy{pipeline="`+p+`"}`], m[`cdcmirror_state{pipeline="`+p+`",state="streaming"}`])
				}
				if _, ok := m[`cdcmirror_lag_measured_timestamp_seconds{pipeline="`+p+`"}`]; !ok && reportsLag[p] {
					return p + ": lag not measured yet"
				}
			}
			if _, ok := m[`cdcmirror_retained_bytes{pipeline="pg"}`]; !ok && reportsLag["pg"] {
				return "pg: no retained_bytes"
			}
			if _, ok := m["go_goroutines"]; !ok {
				return "no Go runtime metrics"
			}
			return ""
		})

		// status while running: the state file is the running mirror's; the live view says
		// both pipelines are healthy.
		out := run.admin("status", "--config", cfgPath, "--metrics-addr", run.addr)
		t.Logf("status while running:\n%s", out)
		for _, want := range []string{"pipeline pg (postgres)", "pipeline maria (mysql)",
			"checkpoint: unknown here (a running cdcmirror holds the state file)",
			"slot " + slot + ": active (walsender pid ", "publication " + slot + ": exists",
			"live (" + run.addr + "): healthy, streaming"} {
			if !strings.Contains(out, want) {
				t.Errorf("status while running lacks %q:\n%s", want, out)
			}
		}
		var errOut strings.Builder
		err := command(context.Background(), []string{"drop", "--config", cfgPath, "--pipeline", "maria"}, io.Discard, &errOut, nil)
		if !errors.Is(err, mirror.ErrRunning) || exitStatus(io.Discard, err) != 1 {
			t.Errorf("drop while running: %v", err)
		}
		run.stop()

		out = run.admin("status", "--config", cfgPath, "--pipeline", "pg", "--metrics-addr", run.addr)
		t.Logf("status after the stop:\n%s", out)
		lagLine := "lag: the source does not report it"
		if reportsLag["pg"] {
			// Other tests write to the shared server meanwhile: the bytes are not 0.
			lagLine = " bytes of change log behind the server; the server retains "
		}
		for _, want := range []string{"checkpoint: saved ", lagLine,
			"slot " + slot + ": inactive", "indices: " + pgIndex, "indices' health: ", "live: no running cdcmirror answers at " + run.addr} {
			if !strings.Contains(out, want) {
				t.Errorf("status after the stop lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "maria") {
			t.Errorf("status --pipeline pg reports maria:\n%s", out)
		}

		out = run.admin("drop", "--config", cfgPath, "--pipeline", "pg", "--indices")
		want := "pipeline pg:\n  dropped replication slot " + slot + "\n  dropped publication " + slot + "\n  deleted index " + pgIndex +
			"\n  deleted its checkpoint and ownership records\n"
		if out != want {
			t.Errorf("drop printed\n%s\nwant\n%s", out, want)
		}
		out = run.admin("drop", "--config", cfgPath, "--pipeline", "maria")
		if want := "pipeline maria:\n  deleted its checkpoint and ownership records\n  left its indices " + myIndex +
			" in place: a restarted pipeline is refused them until they are deleted (drop --indices)\n"; out != want {
			t.Errorf("drop printed\n%s\nwant\n%s", out, want)
		}
		if node.IndexExists(t, pgIndex) || !node.IndexExists(t, myIndex) {
			t.Error("drop --indices deleted the wrong indices")
		}
		out = run.admin("status", "--config", cfgPath, "--metrics-addr", "")
		for _, want := range []string{"checkpoint: none stored", "slot " + slot + ": missing", "indices: none owned yet"} {
			if !strings.Contains(out, want) {
				t.Errorf("status after the drops lacks %q:\n%s", want, out)
			}
		}
	})
}

// reportsLag says, per pipeline of the test, whether its source measures lag (cdc.LagReporter).
var reportsLag = map[string]bool{"pg": isLagReporter(&pgcdc.Source{}), "maria": isLagReporter(&mysqlcdc.Source{})}

func isLagReporter(src cdc.Source) bool { _, ok := src.(cdc.LagReporter); return ok }

// commandRun is one run of the command function.
type commandRun struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error
	addr   string
	log    *syncBuffer
}

func startCommand(t *testing.T, cfgPath string) *commandRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &commandRun{t: t, cancel: cancel, done: make(chan error, 1), log: &syncBuffer{}}
	addrs := make(chan net.Addr, 1)
	go func() {
		r.done <- command(ctx, []string{"--config", cfgPath, "--metrics-addr", "127.0.0.1:0", "--progress", "auto"}, io.Discard, r.log,
			func(a net.Addr) { addrs <- a })
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cdcmirror log:\n%s", r.log.String())
		}
	})
	t.Cleanup(r.stopQuietly)
	select {
	case a := <-addrs:
		r.addr = a.String()
	case err := <-r.done:
		r.done = nil
		t.Fatalf("cdcmirror ended before listening: %v", err)
	case <-time.After(mirrortest.WaitBound):
		t.Fatal("cdcmirror did not start listening")
	}
	return r
}

// admin runs a status or drop command and returns what it printed.
func (r *commandRun) admin(args ...string) string {
	r.t.Helper()
	var out, errOut strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
	defer cancel()
	if err := command(ctx, args, &out, &errOut, nil); err != nil {
		r.t.Fatalf("%v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

func (r *commandRun) waitFor(what string, check func() string) {
	r.t.Helper()
	mirrortest.WaitFor(r.t, what, func() error {
		select {
		case err := <-r.done:
			r.done = nil
			return fmt.Errorf("cdcmirror returned %v", err)
		default:
			return nil
		}
	}, check)
}

// stop ends the run as a signal would and wants a clean exit.
func (r *commandRun) stop() {
	r.t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Fatalf("cdcmirror did not stop cleanly: %v", err)
		}
		r.done = nil
	case <-time.After(mirrortest.WaitBound):
		r.t.Fatal("cdcmirror did not stop")
	}
}

func (r *commandRun) stopQuietly() {
	r.cancel()
	if r.done != nil {
		select {
		case <-r.done:
		case <-time.After(mirrortest.WaitBound):
		}
		r.done = nil
	}
}

func (r *commandRun) get(path string) (int, string) {
	res, err := http.Get("http://" + r.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
