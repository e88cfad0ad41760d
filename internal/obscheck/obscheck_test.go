package obscheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/mirror/mirrorprom"
)

// TestPromtoolRules: every rule file passes `promtool check rules` (expressions, durations,
// annotation templates).
func TestPromtoolRules(t *testing.T) {
	promtool := Promtool(t)
	for _, b := range Binaries {
		runPromtool(t, promtool, "check", "rules", RulesPath(b))
	}
}

// TestPromtoolRuleTests: the rules' unit tests (observability/prometheus/tests) pass
// `promtool test rules`, run against copies of the rule files without their annotations (the
// tests compare alerts by their labels).
func TestPromtoolRuleTests(t *testing.T) {
	promtool := Promtool(t)
	dir := t.TempDir()
	for _, b := range Binaries {
		raw, err := os.ReadFile(RulesPath(b))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		for _, g := range doc["groups"].([]any) {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				delete(r.(map[string]any), "annotations")
			}
		}
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, b+".rules.yml"), out)
		test, err := os.ReadFile(filepath.Join(Dir(), "prometheus", "tests", b+".test.yml"))
		if err != nil {
			t.Fatalf("%s has no rule unit tests: %v", b, err)
		}
		writeFile(t, filepath.Join(dir, b+".test.yml"), test)
		runPromtool(t, promtool, "test", "rules", filepath.Join(dir, b+".test.yml"))
	}
}

// TestPromtoolDashboards: every expression of the dashboards (panel targets and the
// variables' label_values selectors), Grafana's variables replaced, passes promtool as a
// recording rule.
func TestPromtoolDashboards(t *testing.T) {
	promtool := Promtool(t)
	for _, b := range Binaries {
		exprs, err := DashboardExprs(b)
		if err != nil {
			t.Fatal(err)
		}
		vars, err := DashboardVars(b)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		sb.WriteString("groups:\n  - name: dashboard\n    rules:\n")
		for i, e := range exprs {
			if strings.TrimSpace(e.Expr) == "" {
				t.Errorf("%s: empty expression", e.Where)
				continue
			}
			s, err := Substitute(e.Expr, vars)
			if err != nil {
				t.Errorf("%s: %v", e.Where, err)
				continue
			}
			q, _ := yaml.Marshal(s)
			fmt.Fprintf(&sb, "      # %s\n      - record: dashboard:%s:%d\n        expr: %s", e.Where, b, i, q)
		}
		path := filepath.Join(t.TempDir(), b+".dashboard.rules.yml")
		writeFile(t, path, []byte(sb.String()))
		runPromtool(t, promtool, "check", "rules", path)
	}
}

// TestRulesAnnotated: every alert has a for: duration, a severity, a summary and a
// description naming its runbook section in docs/production.md.
func TestRulesAnnotated(t *testing.T) {
	for _, b := range Binaries {
		f, err := LoadRules(b)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				n++
				if !strings.HasPrefix(strings.ToLower(r.Alert), b) {
					t.Errorf("%s: alert %s does not start with the binary's name", b, r.Alert)
				}
				if r.For == "" {
					t.Errorf("%s: alert %s has no for:", b, r.Alert)
				}
				if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
					t.Errorf("%s: alert %s: severity %q, want critical, warning or info", b, r.Alert, r.Labels["severity"])
				}
				if r.Annotations["summary"] == "" {
					t.Errorf("%s: alert %s has no summary", b, r.Alert)
				}
				if !strings.Contains(r.Annotations["description"], "docs/production.md#") {
					t.Errorf("%s: alert %s: the description names no runbook section (docs/production.md#...)", b, r.Alert)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no alerts", b)
		}
	}
}

// TestDashboardStructure: each dashboard is valid JSON with a uid and title, a datasource
// variable every panel and target uses, unique panel ids, positions inside the 24-column grid
// that do not overlap, and targets with an expression and a unique refId.
func TestDashboardStructure(t *testing.T) {
	known := []string{"row", "stat", "table", "timeseries", "bargauge", "gauge", "heatmap", "text"}
	for _, b := range Binaries {
		d, err := LoadDashboard(b)
		if err != nil {
			t.Fatal(err)
		}
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q, title %q", b, d.UID, d.Title)
		}
		hasDS := false
		for _, v := range d.Templating.List {
			if v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"` {
				hasDS = true
			}
			if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
				t.Errorf("%s: variable %s does not use the datasource variable", b, v.Name)
			}
		}
		if !hasDS {
			t.Errorf("%s: no datasource variable of type datasource (query prometheus)", b)
		}
		ids := map[int]bool{}
		type cell struct{ x, y int }
		used := map[cell]int{}
		targets := 0
		for _, p := range d.AllPanels() {
			where := fmt.Sprintf("%s: panel %d %q", b, p.ID, p.Title)
			if p.ID == 0 || ids[p.ID] {
				t.Errorf("%s: missing or duplicate id", where)
			}
			ids[p.ID] = true
			if !slices.Contains(known, p.Type) {
				t.Errorf("%s: type %q", where, p.Type)
			}
			if g := p.GridPos; g == nil || g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
				t.Errorf("%s: gridPos %+v", where, p.GridPos)
			} else {
				for x := g.X; x < g.X+g.W; x++ {
					for y := g.Y; y < g.Y+g.H; y++ {
						if other, ok := used[cell{x, y}]; ok {
							t.Errorf("%s overlaps panel %d at (%d,%d)", where, other, x, y)
							x, y = g.X+g.W, g.Y+g.H
						}
						used[cell{x, y}] = p.ID
					}
				}
			}
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: datasource %+v, want the datasource variable", where, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no targets", where)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				targets++
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: missing or duplicate refId %q", where, tg.RefID)
				}
				refs[tg.RefID] = true
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s target %s: no expr", where, tg.RefID)
				}
				if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s target %s: datasource %+v", where, tg.RefID, tg.Datasource)
				}
			}
		}
		if targets == 0 {
			t.Errorf("%s: no targets at all", b)
		}
	}
}

// TestMetricsNamespaced: every metric the files use is the binary's own or the Go runtime's
// and process collectors' (which both binaries register).
func TestMetricsNamespaced(t *testing.T) {
	for _, b := range Binaries {
		used, err := Used(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range used {
			if !strings.HasPrefix(m, b+"_") && !strings.HasPrefix(m, "go_") && !strings.HasPrefix(m, "process_") {
				t.Errorf("%s uses %s: neither %s_, go_ nor process_", b, m, b)
			}
		}
	}
}

// TestCdcmirrorMetricsDescribed: every metric cdcmirror's dashboard and rules use is
// described by the collectors it registers (mirrorprom under the namespace cdcmirror, the Go
// and process collectors). examples/cdcmirror/observability_test.go proves they are exported
// by the running command.
func TestCdcmirrorMetricsDescribed(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(mirrorprom.New(&mirrorprom.Options{Namespace: "cdcmirror"}), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	described := Described(reg)
	used, err := Used("cdcmirror")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range used {
		if !described[Family(m)] {
			t.Errorf("cdcmirror's files use %s, which no collector of cdcmirror describes", m)
		}
	}
}

func TestSelectors(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []Selector
	}{
		{`up`, []Selector{{Metric: "up"}}},
		{`sum by (pipeline, le) (rate(a_bucket{x="1",y=~"$p"}[5m])) / on(instance) group_left(z) b`,
			[]Selector{{Metric: "a_bucket", Labels: []string{"x", "y"}}, {Metric: "b"}}},
		{`max without (a) (c) > bool 2 and d offset 5m or absent(e{f!="by"})`,
			[]Selector{{Metric: "c"}, {Metric: "d"}, {Metric: "e", Labels: []string{"f"}}}},
		{`time() - last{q="}"} > 10 * 1024 * 1e3`, []Selector{{Metric: "last", Labels: []string{"q"}}}},
		{`sum(rate(x[$__rate_interval])) by (y)`, []Selector{{Metric: "x"}}},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m:1m])))`, []Selector{{Metric: "h_bucket"}}},
	} {
		got, err := Selectors(c.expr)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Selectors(%q) = %+v, %v; want %+v", c.expr, got, err, c.want)
		}
	}
	if got, err := GroupingLabels(`sum by (a, b) (x) / ignoring(c) group_left(d) y`); err != nil || !reflect.DeepEqual(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("GroupingLabels = %v, %v", got, err)
	}
	for _, bad := range []string{`{__name__="x"}`, `x{__name__="y"}`, `rate(x[5m)`, `x{a="b`} {
		if _, err := Selectors(bad); err == nil {
			t.Errorf("Selectors(%q): no error", bad)
		}
	}
}

func TestMissing(t *testing.T) {
	exported, err := ParseExposition("# HELP a x\na_total{p=\"1\",q=\"a b, c=\\\"d\"} 3\nh_bucket{p=\"1\",le=\"+Inf\"} 1\nh_sum{p=\"1\"} 1\nh_count{p=\"1\"} 1\n")
	if err != nil {
		t.Fatal(err)
	}
	exprs := []Expr{
		{Where: "e1", Expr: `rate(a_total{p="1",instance=~".*"}[5m]) / h_count`},
		{Where: "e2", Expr: `h_bucket{le="1",r="2"}`},
		{Where: "e3", Expr: `nope_total + cond_total`},
		{Where: "e4", Expr: `gone_total`},
		{Where: "v", Expr: `a_total`, Label: "z"},
		{Where: "g", Expr: `sum by (p, instance, w) (rate(a_total[5m])) / on (p) group_left(le) sum by (p, le) (h_bucket)`},
		{Where: "l", Expr: `a_total`, Legend: []string{"q", "job", "x"}},
		{Where: "c", Expr: `sum by (k) (cond_total)`},
	}
	got := Missing(exprs, exported, map[string]string{"cond_total": "only on a conflict", "gone_total": "renamed"},
		map[string]bool{"cond_total": true})
	want := []string{
		"e2: metric h_bucket has no label r",
		"e3: metric nope_total is not exported",
		"e4: gone_total is listed as conditional (renamed) but no collector describes it",
		"g: groups or labels its legend by w, which none of its metrics has",
		"l: groups or labels its legend by x, which none of its metrics has",
		"v: metric a_total has no label z",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Missing:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCollected: a collector's series read as a scrape of them would be.
func TestCollected(t *testing.T) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Buckets: []float64{1}}, []string{"p"})
	h.WithLabelValues("x").Observe(0.5)
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g"}, []string{"p", "role"})
	g.WithLabelValues("x", "active").Set(1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(h, g)
	got, err := Collected(reg)
	if err != nil {
		t.Fatal(err)
	}
	want := Exported{"h_seconds_bucket": {"p": true, "le": true}, "h_seconds_sum": {"p": true}, "h_seconds_count": {"p": true},
		"g": {"p": true, "role": true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Collected = %v, want %v", got, want)
	}
}

func TestSubstitute(t *testing.T) {
	got, err := Substitute(`rate(x{a=~"$pipeline",b=~"${store}"}[$__rate_interval]) [$__range]`, []string{"pipeline", "store"})
	if want := `rate(x{a=~".*",b=~".*"}[5m]) [1h]`; err != nil || got != want {
		t.Errorf("Substitute = %q, %v; want %q", got, err, want)
	}
	if _, err := Substitute(`x{a=~"$nope"}`, []string{"pipeline"}); err == nil {
		t.Error("an unknown variable is substituted")
	}
}

func runPromtool(t *testing.T, promtool string, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool, args...).CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
