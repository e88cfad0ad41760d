package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tributary-dev/tributary/cdc"
)

// evil is a name that would run a script if a page pasted it into its HTML.
const evil = `<script>window.sp39Pwned=1</script><img src=x onerror="window.sp39Pwned=2">`

// pageFake is a statusSource that also counts dead letters per table.
type pageFake struct {
	fakeMirror
	dl map[string]map[string]int64
}

func (f *pageFake) DeadLettersByTable(p string) map[string]int64 { return f.dl[p] }

// newPageFake has one pipeline with every section of the page filled, every name in it
// hostile, and a healthy second one.
func newPageFake() *pageFake {
	now := time.Now()
	evilTable := cdc.TableID{Connector: "postgres", Source: "postgres", Database: "db", Schema: "public", Table: evil}
	return &pageFake{
		fakeMirror: fakeMirror{st: []cdc.Status{
			{Pipeline: "pg" + evil, Health: cdc.Health{Class: cdc.HealthTableIncomplete, Reason: "table " + evil + " is incomplete"},
				State: "resnapshotting", LastFailure: errors.New("sink said " + evil),
				Progress: cdc.Progress{Events: 1234, Batches: 12, DeadLetters: 3, LastBatch: now.Add(-2 * time.Second),
					Snapshot: cdc.SnapshotProgress{TablesDone: 1, TablesTotal: 1, RowsDone: 500, RowsEstimated: 500},
					Resnapshot: cdc.SnapshotProgress{Resnapshot: "rs-1", Active: true, Table: evilTable, TablesTotal: 2,
						RowsDone: 250, RowsEstimated: 1000, RowsPerSecond: 50}},
				Lag:        cdc.Lag{Seconds: 1.5, Bytes: 4096, Retained: 8192, MeasuredAt: now},
				Cluster:    cdc.ClusterHealth{Status: "yellow", Indices: map[string]string{"idx-" + evil: "yellow"}, ReadAt: now},
				Incomplete: []cdc.IncompleteTable{{Table: evilTable, Index: "idx-" + evil, Reason: "rows missing: " + evil, Since: now}}},
			{Pipeline: "maria", Health: cdc.Health{Healthy: true, Class: cdc.HealthOK}, State: "streaming"},
		}},
		dl: map[string]map[string]int64{"pg" + evil: {evilTable.String(): 3}},
	}
}

// newPageMux serves the fake's page with a lag history of a few samples, one a gap.
func newPageMux(f *pageFake) *http.ServeMux {
	hist := newLagHistory(lagSampleKeep)
	at := time.Now().Add(-time.Minute)
	for i, l := range []float64{0, 2, 5, -1, 1} {
		st := []cdc.Status{{Pipeline: f.st[0].Pipeline}}
		if l >= 0 {
			st[0].Lag = cdc.Lag{Seconds: l, MeasuredAt: at}
		}
		hist.sample(st, at.Add(time.Duration(i)*lagSampleEvery))
	}
	rx := newReindexes(context.Background())
	mux := newMux(prometheus.NewRegistry(), f, rx)
	addStatusPage(mux, f, rx, hist)
	return mux
}

// TestStatusPage checks the page's answers: HTML at / and /status.html with a policy that
// forbids scripts, every hostile name escaped, each section present; the style sheet; and
// that the other endpoints keep their paths.
func TestStatusPage(t *testing.T) {
	mux := newPageMux(newPageFake())
	for _, path := range []string{"/", "/status.html"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" ||
			!strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") ||
			rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: %d %v", path, rec.Code, rec.Header())
		}
		body := rec.Body.String()
		if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
			t.Errorf("%s: a name reached the page as markup:\n%s", path, body)
		}
		for _, want := range []string{
			`&lt;script&gt;window.sp39Pwned=1&lt;/script&gt;`, // escaped, as text
			`unhealthy: table_incomplete`, `class="reason"`, "sink said ",
			`<dd class="dead-letters">3</dd>`, `<td class="count">3</td>`,
			`<polyline points=`, `<progress max="100" value="25">`, "re-snapshot rs-1: 250/1000 rows (25%), 50 rows/s, ETA 15s",
			"done: 500 rows from 1 of 1 tables", "1.5s behind, 4,096 bytes of change log, 8,192 bytes retained",
			`class="cluster yellow"`, "rows missing: ", `data-pipeline="maria"`, `<meta http-equiv="refresh" content="5">`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q", path, want)
			}
		}
		// Two runs of measured samples around the gap: two polylines.
		if n := strings.Count(body, "<polyline"); n != 2 {
			t.Errorf("%s: %d polylines, want 2", path, n)
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/status.css", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/css; charset=utf-8" || !strings.Contains(rec.Body.String(), ".pipeline") {
		t.Errorf("/status.css: %d %v", rec.Code, rec.Header())
	}
	for path, want := range map[string]int{"/nope": 404, "/status": 200, "/healthz": 503} {
		if code, _ := get(t, mux, path); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
}

// TestLagHistoryBounded: the history keeps the last samples only, and the sparkline puts the
// newest at the right edge.
func TestLagHistoryBounded(t *testing.T) {
	h := newLagHistory(4)
	at := time.Unix(1700000000, 0)
	for i := range 10 {
		h.sample([]cdc.Status{{Pipeline: "p", Lag: cdc.Lag{Seconds: float64(i), MeasuredAt: at}}}, at.Add(time.Duration(i)*time.Second))
	}
	smp := h.samples("p")
	if len(smp) != 4 || smp[0].Seconds != 6 || smp[3].Seconds != 9 {
		t.Fatalf("samples %+v", smp)
	}
	sp := newSparkline(smp, 100, 20)
	if sp == nil || len(sp.Lines) != 1 || !strings.HasSuffix(sp.Lines[0], "99.0,2.0") || sp.Max != "9s" || sp.Last != "9s" ||
		sp.Window != "1m0s" {
		t.Errorf("sparkline %+v", sp)
	}
	if sp := newSparkline(smp[3:], 100, 20); sp == nil || len(sp.Lines) != 1 || sp.Lines[0] != "95.0,2.0 99.0,2.0" {
		t.Errorf("one sample: %+v", sp) // a short stroke ending at the right edge, at the top (its own maximum)
	}
	if newSparkline([]lagSample{{At: at}}, 100, 20) != nil {
		t.Error("a sparkline without a measured sample")
	}
}

// leadershipFake has the pipelines of one process of an active/standby pair: one active
// here, one standing by (its active process named with a hostile holder), one taking over
// with the state store out of reach, and one of a state file (no leadership).
func leadershipFake() *pageFake {
	now := time.Now()
	return &pageFake{fakeMirror: fakeMirror{st: []cdc.Status{
		{Pipeline: "orders", State: "streaming", Health: cdc.Health{Healthy: true, Class: cdc.HealthOK},
			Leadership: cdc.Leadership{Role: cdc.RoleActive, Holder: "host-b:42", Epoch: 7, Since: now.Add(-90 * time.Second),
				Takeovers: 2, LastTakeover: 1500 * time.Millisecond}},
		{Pipeline: "users", State: "standby", Health: cdc.Health{Healthy: true, Class: cdc.HealthStandby, Reason: "standby: host-a is active"},
			Leadership: cdc.Leadership{Role: cdc.RoleStandby, Holder: "host-a" + evil, Epoch: 3, Since: now.Add(-time.Hour)}},
		{Pipeline: "items", State: "taking over", Health: cdc.Health{Class: cdc.HealthStarting, Reason: "taking over (lease epoch 5)"},
			Leadership: cdc.Leadership{Role: cdc.RoleTakingOver, Holder: "host-b:42", Epoch: 5, Since: now, Takeovers: 1,
				StoreErr: errors.New("dial tcp: connection refused")}},
		{Pipeline: "plain", State: "streaming", Health: cdc.Health{Healthy: true, Class: cdc.HealthOK}},
	}}}
}

// TestStatusPageLeadership: with a shared state store, /status carries each pipeline's role,
// lease holder, epoch and takeovers, and the page shows them in a role line (hostile holder
// names escaped); a pipeline of a state file has neither.
func TestStatusPageLeadership(t *testing.T) {
	f := leadershipFake()
	mux := newPageMux(f)

	code, body := get(t, mux, "/status")
	if code != 200 {
		t.Fatalf("/status: %d", code)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]*leadershipStatus{
		"orders": {Role: "active", Holder: "host-b:42", Epoch: 7, Takeovers: 2, LastTakeoverSeconds: 1.5},
		"users":  {Role: "standby", Holder: "host-a" + evil, Epoch: 3},
		"items":  {Role: "taking over", Holder: "host-b:42", Epoch: 5, Takeovers: 1, StoreError: "dial tcp: connection refused"},
		"plain":  nil,
	}
	for _, p := range doc.Pipelines {
		w, ok := want[p.Pipeline]
		if !ok {
			t.Fatalf("/status has pipeline %q", p.Pipeline)
		}
		delete(want, p.Pipeline)
		got := p.Leadership
		if w == nil || got == nil {
			if w != got {
				t.Errorf("%s: leadership %+v, want %+v", p.Pipeline, got, w)
			}
			continue
		}
		if got.Since == nil {
			t.Errorf("%s: leadership without since", p.Pipeline)
		}
		got.Since = nil
		if *got != *w {
			t.Errorf("%s: leadership %+v, want %+v", p.Pipeline, *got, *w)
		}
	}
	if len(want) != 0 {
		t.Errorf("/status lacks %v", want)
	}
	if !strings.Contains(body, `"role": "standby"`) || !strings.Contains(body, `"last_takeover_seconds": 1.5`) {
		t.Errorf("/status JSON names: %s", body)
	}

	_, page := get(t, mux, "/")
	if strings.Contains(page, "<script") || strings.Contains(page, "<img") {
		t.Errorf("a holder name reached the page as markup:\n%s", page)
	}
	sections := map[string]string{}
	for _, sec := range strings.Split(page, `<section class="pipeline" data-pipeline="`)[1:] {
		name, _, _ := strings.Cut(sec, `"`)
		sections[name] = sec
	}
	for name, wants := range map[string][]string{
		"orders": {`<p class="role role-active">role: <strong class="role-name">active</strong>`, `<span class="holder">host-b:42</span>`,
			`<span class="epoch">7</span>`, `<span class="takeovers">2</span> takeover(s) here, the last took 1.5s`, "for 1m30s"},
		"users": {`<p class="role role-standby">role: <strong class="role-name">standby</strong>`,
			`<span class="holder">host-a&lt;script&gt;window.sp39Pwned=1&lt;/script&gt;`, `<span class="epoch">3</span>`,
			`<span class="takeovers">0</span> takeover(s) here &middot;`, "for 1h0m0s", "healthy"},
		"items": {`<p class="role role-taking-over">role: <strong class="role-name">taking over</strong>`,
			"the state store is unreachable: dial tcp: connection refused", "unhealthy: starting"},
	} {
		sec, ok := sections[name]
		if !ok {
			t.Fatalf("the page has no section for %s", name)
		}
		for _, w := range wants {
			if !strings.Contains(sec, w) {
				t.Errorf("%s's section lacks %q:\n%s", name, w, sec)
			}
		}
	}
	if strings.Contains(sections["plain"], `class="role`) {
		t.Errorf("a pipeline without a shared store shows a role:\n%s", sections["plain"])
	}
}
