package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/mirror/mirrorprom"
)

// validConfig is a complete configuration that needs no server before Run.
const validConfig = `
pipeline: orders
source:
  type: postgres
  dsn: "postgres://u:pw@127.0.0.1:1/db"
  tables: [public.orders]
  slot: s1
sinks:
  - type: elasticsearch
    config: {id: es, url: "http://127.0.0.1:1", index: "cdc-{table}", auth: {type: none}}
state: STATE
dlq: DLQ
`

// A bad command line or configuration is a usage error (exit status 2), before anything opens.
func TestCommandUsageErrors(t *testing.T) {
	dir := t.TempDir()
	good, bad, two := dir+"/good.yaml", dir+"/bad.yaml", dir+"/two.yaml"
	valid := strings.NewReplacer("STATE", dir+"/state.db", "DLQ", dir+"/dlq").Replace(validConfig)
	pipelines := "state: " + dir + "/state.db\npipelines:\n" +
		"  - name: a\n" + indent(valid[strings.Index(valid, "source:"):strings.Index(valid, "state:")]) + "    dlq: " + dir + "/a.dlq\n" +
		"  - name: b\n" + indent(strings.Replace(valid[strings.Index(valid, "source:"):strings.Index(valid, "state:")], "s1", "s2", 1)) + "    dlq: " + dir + "/b.dlq\n"
	for path, text := range map[string]string{good: valid, bad: strings.Replace(valid, "  slot: s1", "  slto: s1", 1), two: pipelines} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--config is required"},
		{[]string{"--config", good, "--progress", "sometimes"}, "--progress must be"},
		{[]string{"--config", dir + "/missing.yaml"}, "missing.yaml"},
		{[]string{"--config", bad}, `bad.yaml: line 7: unknown key "slto"`},
		{[]string{"run", "--config", good, "extra"}, `unexpected argument "extra"`},
		{[]string{"status", "--config", good, "--progress", "never"}, "flag provided but not defined: -progress"},
		{[]string{"status", "--config", good, "--pipeline", "nope"}, `no pipeline "nope"`},
		{[]string{"drop", "--config", two}, "--pipeline is required: the configuration has 2 pipelines [a b]"},
		{[]string{"drop", "--config", good, "--pipeline", "nope"}, `no pipeline "nope"`},
	} {
		var out strings.Builder
		err := command(t.Context(), tc.args, &out, &out, nil)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want a usage error containing %q", tc.args, err, tc.want)
		}
		if code := exitStatus(io.Discard, err); code != 2 {
			t.Errorf("%q: exit status %d", tc.args, code)
		}
	}
	if _, err := os.Stat(dir + "/state.db"); !os.IsNotExist(err) {
		t.Errorf("a usage error created the state file (%v)", err)
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("    " + l)
		}
	}
	return b.String()
}

// fakeMirror is a statusSource with set answers.
type fakeMirror struct{ st []cdc.Status }

func (f *fakeMirror) Status() []cdc.Status { return f.st }

// Resnapshot answers as mirror.Mirror does: "pg" takes requests for "public.t" (its id is the
// where), "maria" cannot, other tables are refused, other pipelines unknown.
func (f *fakeMirror) Resnapshot(_ context.Context, pipeline string, req cdc.ResnapshotRequest) (string, error) {
	switch {
	case pipeline == "maria":
		return "", mirror.ErrResnapshotUnsupported
	case pipeline != "pg":
		return "", fmt.Errorf("%w: %q", mirror.ErrNoPipeline, pipeline)
	case len(req.Tables) != 1 || req.Tables[0] != "public.t":
		return "", fmt.Errorf("pgcdc: %w: not captured", cdc.ErrResnapshotRefused)
	}
	return "id-" + req.Where, nil
}

// Reindex answers as mirror.Mirror does for a table never written: "pg" knows "public.t".
func (f *fakeMirror) Reindex(_ context.Context, pipeline, table string) (*mirror.ReindexReport, error) {
	if pipeline != "pg" || table != "public.t" {
		return nil, fmt.Errorf("mirror: pipeline %q: no such table in this session: %q", pipeline, table)
	}
	return &mirror.ReindexReport{Generation: "t-g2", Replaced: "t-g1", Rows: 3}, nil
}

// TestResnapshotEndpoint checks POST /admin/resnapshot's answers.
func TestResnapshotEndpoint(t *testing.T) {
	m := &fakeMirror{st: []cdc.Status{{Pipeline: "pg"}, {Pipeline: "maria"}}}
	mux := newMux(prometheus.NewRegistry(), m, newReindexes(context.Background()))
	post := func(ct, body string) (int, resnapshotAnswer) {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/admin/resnapshot", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		mux.ServeHTTP(rec, req)
		var ans resnapshotAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("%s: answer %q: %v", body, rec.Body.String(), err)
		}
		return rec.Code, ans
	}
	const js = "application/json"
	for _, c := range []struct {
		ct, body string
		code     int
		id       string
	}{
		{js, `{"pipeline": "pg", "tables": ["public.t"], "where": "id < 5"}`, 202, "id-id < 5"},
		{js, `{"pipeline": "pg", "tables": ["public.x"]}`, 400, ""},
		{js, `{"pipeline": "maria", "tables": ["db.t"]}`, 501, ""},
		{js, `{"pipeline": "nope"}`, 404, ""},
		{js, `{"tables": ["public.t"]}`, 400, ""}, // two pipelines: which one?
		{js, `{"pipeline": "pg", "table": "public.t"}`, 400, ""},
		{js, `not json`, 400, ""},
		{"text/plain", `{"pipeline": "pg", "tables": ["public.t"]}`, 415, ""},
	} {
		code, ans := post(c.ct, c.body)
		if code != c.code || ans.ID != c.id || (code != 202) != (ans.Error != "") {
			t.Errorf("%s %s: %d %+v, want %d id %q", c.ct, c.body, code, ans, c.code, c.id)
		}
	}
	m.st = m.st[:1] // one pipeline: it may go unnamed
	if code, ans := post(js, `{"tables": ["public.t"]}`); code != 202 || ans.Pipeline != "pg" {
		t.Errorf("one pipeline, unnamed: %d %+v", code, ans)
	}
}

// TestReindexEndpoint checks POST /admin/reindex's answers, and that /status follows a
// reindex to its outcome.
func TestReindexEndpoint(t *testing.T) {
	m := &fakeMirror{st: []cdc.Status{{Pipeline: "pg"}, {Pipeline: "maria"}}}
	mux := newMux(prometheus.NewRegistry(), m, newReindexes(context.Background()))
	post := func(ct, body string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/admin/reindex", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		mux.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	const js = "application/json"
	for _, c := range []struct {
		ct, body string
		code     int
	}{
		{js, `{"pipeline": "pg"}`, 400},                         // no table
		{js, `{"pipeline": "nope", "table": "t"}`, 404},         // unknown pipeline
		{js, `{"table": "public.t"}`, 400},                      // two pipelines: which one?
		{js, `{"pipeline": "pg", "tables": ["public.t"]}`, 400}, // an unknown key
		{"text/plain", `{"pipeline": "pg", "table": "public.t"}`, 415},
		{js, `{"pipeline": "pg", "table": "public.t"}`, 202},
		{js, `{"pipeline": "pg", "table": "public.x"}`, 202}, // fails later, in /status
	} {
		if code, body := post(c.ct, c.body); code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.ct, c.body, code, body, c.code)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get(t, mux, "/status")
		var doc statusDoc
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Reindexes) == 2 && doc.Reindexes[0].State == "done" && doc.Reindexes[1].State == "failed" {
			if j := doc.Reindexes[0]; j.Generation != "t-g2" || j.Replaced != "t-g1" || j.Rows != 3 {
				t.Errorf("done reindex: %+v", j)
			}
			if j := doc.Reindexes[1]; !strings.Contains(j.Error, "no such table") {
				t.Errorf("failed reindex: %+v", j)
			}
			if line := reindexLine(doc.Reindexes[0]); !strings.Contains(line, "readers see t-g2 (was t-g1)") {
				t.Errorf("status line %q", line)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status never showed both outcomes: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

// /healthz is 200 only while every pipeline is healthy and lists each pipeline's health;
// /status and /metrics report every pipeline.
func TestEndpoints(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	m := &fakeMirror{st: []cdc.Status{
		{Pipeline: "pg", Health: cdc.Health{Healthy: true}, State: "streaming",
			Progress: cdc.Progress{Events: 12, LastCheckpoint: at, Snapshot: cdc.SnapshotProgress{TablesDone: 1, TablesTotal: 1, RowsDone: 10}}},
		{Pipeline: "maria", Health: cdc.Health{Healthy: true}, State: "streaming",
			Lag: cdc.Lag{Seconds: 3, Bytes: 100, Retained: -1, MeasuredAt: at}},
	}}
	c := mirrorprom.New(&mirrorprom.Options{Namespace: "cdcmirror"})
	c.Watch(m)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mux := newMux(reg, m, newReindexes(context.Background()))
	if code, body := get(t, mux, "/healthz"); code != 200 || body != "pg: ok\nmaria: ok\n" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	m.st[1].Health = cdc.Health{Class: cdc.HealthReconnecting, Reason: "reconnecting (attempt 3): connection refused"}
	m.st[1].State, m.st[1].Reconnects, m.st[1].LastFailure = "reconnecting", 3, errors.New("connection refused")
	m.st[1].Lag.Err = errors.New("dial: connection refused")
	if code, body := get(t, mux, "/healthz"); code != 503 || body != "pg: ok\nmaria: reconnecting (attempt 3): connection refused\n" {
		t.Fatalf("one unhealthy: %d %q", code, body)
	}
	code, body := get(t, mux, "/status")
	var doc statusDoc
	if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil || len(doc.Pipelines) != 2 {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	pg, maria := doc.Pipelines[0], doc.Pipelines[1]
	if pg.Pipeline != "pg" || !pg.Healthy || pg.Events != 12 || pg.LastCheckpoint == nil || !pg.LastCheckpoint.Equal(at) ||
		pg.Snapshot == nil || pg.Snapshot.RowsDone != 10 || pg.Lag != nil || pg.LastBatch != nil {
		t.Errorf("/status pg: %+v", pg)
	}
	if maria.Healthy || !strings.HasPrefix(maria.Reason, "reconnecting") || maria.State != "reconnecting" || maria.Reconnects != 3 ||
		maria.LastFailure != "connection refused" || maria.Lag == nil || maria.Lag.Seconds != 3 || maria.Lag.Error == "" || maria.Snapshot != nil {
		t.Errorf("/status maria: %+v (lag %+v)", maria, maria.Lag)
	}
	_, text := get(t, mux, "/metrics")
	metrics := parseMetrics(t, strings.NewReader(text))
	for name, want := range map[string]float64{
		`cdcmirror_healthy{pipeline="pg"}`:                                1,
		`cdcmirror_healthy{pipeline="maria"}`:                             0,
		`cdcmirror_health_reason{pipeline="maria",reason="reconnecting"}`: 1,
		`cdcmirror_events_total{pipeline="pg"}`:                           12,
	} {
		if v, ok := metrics[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// parseMetrics reads the exposition text into "name{labels}" -> value.
func parseMetrics(t *testing.T, body io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// syncBuffer is a log shared by goroutines.
type syncBuffer = testenv.LogBuffer
