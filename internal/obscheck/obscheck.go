// Package obscheck keeps the dashboards and alert rules of observability/ true: it reads
// them, checks every PromQL expression with promtool (Debian's prometheus package), extracts
// the metric names and label names they use, and compares those with what a binary exports.
//
// The tests that use it: this package's (promtool, the dashboards' structure, cdcmirror's
// names against mirror/mirrorprom's descriptors; no servers), and
// examples/cdcmirror/observability_test.go and examples/recordsvc/observability_test.go,
// which run the real command in-process, scrape its /metrics and fail naming every metric
// (or label) a dashboard or rule uses that the binary does not export.
package obscheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// Binaries are the programs observability/ has a dashboard and a rule file for.
var Binaries = []string{"cdcmirror", "recordsvc"}

// Dir is the repository's observability directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "observability")
}

// RulesPath and DashboardPath are a binary's files.
func RulesPath(binary string) string {
	return filepath.Join(Dir(), "prometheus", binary+".rules.yml")
}

func DashboardPath(binary string) string {
	return filepath.Join(Dir(), "grafana", binary+".json")
}

// Expr is one PromQL expression of a dashboard or rule file.
type Expr struct {
	Where string // "cdcmirror.rules.yml: alert CdcmirrorDeadLetters", "cdcmirror.json: panel 3 "Healthy" target A"
	Expr  string // as written (a dashboard's with Grafana's variables)
	// Label is set for a Grafana label_values(Expr, Label) variable: the label must be
	// exported on Expr's metric.
	Label string
	// Legend are the labels a panel target's legend shows ({{label}}): each must be exported
	// on one of the expression's metrics.
	Legend []string
}

// Promtool returns promtool's path; without it the test fails with how to install it.
func Promtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed to check observability/ (Debian: apt-get install prometheus; `scripts/testenv/testenv up` installs it): %v", err)
	}
	return p
}

// RuleFile is the part of a Prometheus rule file obscheck reads.
type RuleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// LoadRules reads a binary's rule file.
func LoadRules(binary string) (*RuleFile, error) {
	b, err := os.ReadFile(RulesPath(binary))
	if err != nil {
		return nil, err
	}
	var f RuleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", RulesPath(binary), err)
	}
	return &f, nil
}

// RuleExprs are the expressions of a binary's rule file.
func RuleExprs(binary string) ([]Expr, error) {
	f, err := LoadRules(binary)
	if err != nil {
		return nil, err
	}
	var out []Expr
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			out = append(out, Expr{Where: binary + ".rules.yml: " + name, Expr: r.Expr})
		}
	}
	return out, nil
}

// Dashboard is the part of a Grafana dashboard obscheck reads.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel (a row holds its panels when collapsed).
type Panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *Datasource `json:"datasource"`
	GridPos    *GridPos    `json:"gridPos"`
	Targets    []Target    `json:"targets"`
	Panels     []Panel     `json:"panels"`
}

type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type GridPos struct {
	H, W, X, Y int
}

type Target struct {
	RefID        string      `json:"refId"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	Datasource   *Datasource `json:"datasource"`
}

var legendLabel = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// Variable is a templating variable.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *Datasource     `json:"datasource"`
}

// LoadDashboard reads a binary's dashboard; unknown fields are allowed (Grafana's model is
// large), the JSON must be valid.
func LoadDashboard(binary string) (*Dashboard, error) {
	b, err := os.ReadFile(DashboardPath(binary))
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardPath(binary), err)
	}
	return &d, nil
}

// AllPanels are the dashboard's panels, those inside rows included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func(ps []Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// DashboardExprs are the expressions of a binary's dashboard: every panel target's, and every
// query variable's label_values(selector, label).
func DashboardExprs(binary string) ([]Expr, error) {
	d, err := LoadDashboard(binary)
	if err != nil {
		return nil, err
	}
	var out []Expr
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			var legend []string
			for _, m := range legendLabel.FindAllStringSubmatch(t.LegendFormat, -1) {
				legend = append(legend, m[1])
			}
			out = append(out, Expr{Where: fmt.Sprintf("%s.json: panel %d %q target %s", binary, p.ID, p.Title, t.RefID), Expr: t.Expr, Legend: legend})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v)
		if err != nil {
			return nil, fmt.Errorf("%s.json: variable %s: %w", binary, v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("%s.json: variable %s: query %q is not label_values(selector, label)", binary, v.Name, q)
		}
		out = append(out, Expr{Where: fmt.Sprintf("%s.json: variable %s", binary, v.Name), Expr: m[1], Label: m[2]})
	}
	return out, nil
}

// variableQuery is a query variable's query: a string, or {"query": string}.
func variableQuery(v Variable) (string, error) {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &o); err != nil {
		return "", err
	}
	return o.Query, nil
}

// grafanaDurations stand for Grafana's interval variables when an expression is checked.
var grafanaDurations = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

var grafanaVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// Substitute replaces Grafana's variables in a dashboard expression: interval variables by a
// duration, the dashboard's own (vars) by ".*" (they may stand only inside a regular
// expression's quotes: anywhere else promtool refuses the result).
func Substitute(expr string, vars []string) (string, error) {
	var bad []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sm := grafanaVar.FindStringSubmatch(m)
		name := sm[1] + sm[2]
		if d, ok := grafanaDurations[name]; ok {
			return d
		}
		if slices.Contains(vars, name) {
			return ".*"
		}
		bad = append(bad, name)
		return m
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("unknown variables %v", bad)
	}
	return out, nil
}

// DashboardVars are the names of a dashboard's variables.
func DashboardVars(binary string) ([]string, error) {
	d, err := LoadDashboard(binary)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range d.Templating.List {
		out = append(out, v.Name)
	}
	return out, nil
}

// Selector is a metric a expression selects and the labels its matchers name.
type Selector struct {
	Metric string
	Labels []string
}

// aggregations may be followed by by/without before their parenthesis.
var aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true}

// grouping keywords take a parenthesised label list.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// operators and literals that are identifiers.
var wordOps = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true,
	"nan": true, "atan2": true}

// Selectors returns the metric selectors of a PromQL expression: every identifier that is
// not a function, an aggregation, a keyword or inside a label list, with the label names its
// matchers use. A selector without a metric name ({__name__=...}) is refused: its metrics
// could not be checked.
func Selectors(expr string) ([]Selector, error) {
	sels, _, err := parse(expr)
	return sels, err
}

// GroupingLabels are the labels of an expression's by, without, on, ignoring, group_left
// and group_right lists.
func GroupingLabels(expr string) ([]string, error) {
	_, labels, err := parse(expr)
	return labels, err
}

func parse(expr string) ([]Selector, []string, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, nil, err
	}
	var out []Selector
	var grouped []string
	next := func(i int) string {
		if i+1 < len(toks) {
			return toks[i+1].text
		}
		return ""
	}
	skip := func(i int, open, close string) (int, error) {
		depth := 0
		for j := i; j < len(toks); j++ {
			switch toks[j].text {
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					return j, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %s in %q", open, expr)
	}
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		switch {
		case tk.kind == tokIdent:
			w := strings.ToLower(tk.text)
			switch {
			case grouping[w]:
				if next(i) == "(" {
					j, err := skip(i+1, "(", ")")
					if err != nil {
						return nil, nil, err
					}
					for k := i + 2; k < j; k++ {
						if toks[k].kind == tokIdent {
							grouped = append(grouped, toks[k].text)
						}
					}
					i = j
				}
				continue
			case wordOps[w]:
				continue
			case next(i) == "(":
				continue // a function or an aggregation
			case aggregations[w] && grouping[strings.ToLower(next(i))]:
				continue
			}
			sel := Selector{Metric: tk.text}
			if next(i) == "{" {
				j, err := skip(i+1, "{", "}")
				if err != nil {
					return nil, nil, err
				}
				for k := i + 2; k < j; k++ {
					if toks[k].kind == tokIdent && k+1 < j && isMatchOp(toks[k+1].text) {
						if toks[k].text == "__name__" {
							return nil, nil, fmt.Errorf("%q: a __name__ matcher cannot be checked; name the metric", expr)
						}
						sel.Labels = append(sel.Labels, toks[k].text)
					}
				}
				i = j
			}
			out = append(out, sel)
		case tk.text == "{":
			return nil, nil, fmt.Errorf("%q: a selector without a metric name cannot be checked", expr)
		case tk.text == "[":
			j, err := skip(i, "[", "]")
			if err != nil {
				return nil, nil, err
			}
			i = j
		}
	}
	return out, grouped, nil
}

func isMatchOp(s string) bool { return s == "=" || s == "!=" || s == "=~" || s == "!~" }

type tokKind int

const (
	tokIdent tokKind = iota
	tokString
	tokNumber
	tokPunct
)

type token struct {
	kind tokKind
	text string
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string in %q", s)
			}
			out = append(out, token{tokString, s[i : j+1]})
			i = j + 1
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9'):
			j := i
			for j < len(s) && (isIdent(s[j]) || s[j] == '.') {
				j++
			}
			out = append(out, token{tokNumber, s[i:j]})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			out = append(out, token{tokIdent, s[i:j]})
			i = j
		default:
			if i+1 < len(s) {
				switch two := s[i : i+2]; two {
				case "=~", "!=", "!~", "==", ">=", "<=":
					out = append(out, token{tokPunct, two})
					i += 2
					continue
				}
			}
			out = append(out, token{tokPunct, string(c)})
			i++
		}
	}
	return out, nil
}

// TargetLabels are added by Prometheus when it scrapes, not exported by the binaries.
var TargetLabels = []string{"instance", "job"}

// Exported is what a scrape exported: sample names (a histogram's _bucket, _sum and
// _count) with the label names seen on them.
type Exported map[string]map[string]bool

// ParseExposition reads Prometheus text exposition.
func ParseExposition(text string) (Exported, error) {
	out := Exported{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			return nil, fmt.Errorf("exposition line %q", line)
		}
		name := line[:end]
		labels := out[name]
		if labels == nil {
			labels = map[string]bool{}
			out[name] = labels
		}
		if line[end] == '{' {
			toks, err := lex(line[end:])
			if err != nil {
				return nil, err
			}
			for k := 0; k+1 < len(toks); k++ {
				if toks[k].kind == tokIdent && toks[k+1].text == "=" {
					labels[toks[k].text] = true
				}
				if toks[k].text == "}" {
					break
				}
			}
		}
	}
	return out, sc.Err()
}

// Missing checks every expression's selectors against what was exported, and returns one line
// per metric or label used but not exported. conditional names metrics that appear only under
// a condition the test could not force, each with its reason; they must be among described
// (the binary's collectors' Describe output, metric family names), else they are missing too.
func Missing(exprs []Expr, exported Exported, conditional map[string]string, described map[string]bool) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, e := range exprs {
		sels, err := Selectors(e.Expr)
		if err != nil {
			add(e.Where + ": " + err.Error())
			continue
		}
		if e.Label != "" {
			for i := range sels {
				sels[i].Labels = append(sels[i].Labels, e.Label)
			}
		}
		grouped, _ := GroupingLabels(e.Expr)
		for _, l := range append(grouped, e.Legend...) {
			if slices.Contains(TargetLabels, l) {
				continue
			}
			found, unknown := false, false
			for _, s := range sels {
				labels, ok := exported[s.Metric]
				unknown = unknown || !ok
				found = found || labels[l]
			}
			if !found && !unknown {
				add(fmt.Sprintf("%s: groups or labels its legend by %s, which none of its metrics has", e.Where, l))
			}
		}
		for _, s := range sels {
			labels, ok := exported[s.Metric]
			if !ok {
				if reason, cond := conditional[Family(s.Metric)]; cond {
					if !described[Family(s.Metric)] {
						add(fmt.Sprintf("%s: %s is listed as conditional (%s) but no collector describes it", e.Where, s.Metric, reason))
					}
					continue
				}
				add(fmt.Sprintf("%s: metric %s is not exported", e.Where, s.Metric))
				continue
			}
			for _, l := range s.Labels {
				if !labels[l] && !slices.Contains(TargetLabels, l) {
					add(fmt.Sprintf("%s: metric %s has no label %s", e.Where, s.Metric, l))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Collected is what c exports when scraped (what ParseExposition reads from a scrape of a
// binary serving c), for metrics a test cannot make the binary itself export: e.g.
// cdcmirror's active/standby series, which exist only with a shared state store, taken from
// mirrorprom's collector fed a Status with Leadership set.
func Collected(c prometheus.Collector) (Exported, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := Exported{}
	add := func(name string, labels []string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range labels {
			out[name][l] = true
		}
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName())
			}
			switch {
			case m.GetHistogram() != nil:
				add(name+"_bucket", append(labels, "le"))
				add(name+"_sum", labels)
				add(name+"_count", labels)
			case m.GetSummary() != nil:
				add(name, append(labels, "quantile"))
				add(name+"_sum", labels)
				add(name+"_count", labels)
			default:
				add(name, labels)
			}
		}
	}
	return out, nil
}

// Family is a sample name's metric family: without _bucket, _sum or _count.
func Family(name string) string {
	for _, sfx := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, sfx); ok {
			return f
		}
	}
	return name
}

// Described are the metric family names a collector (or a registry) describes.
func Described(c prometheus.Collector) map[string]bool {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var descs []string
	for d := range ch {
		descs = append(descs, d.String())
	}
	return DescNames(descs)
}

// DescNames are the fully qualified names in prometheus.Desc strings
// (Desc{fqName: "x", ...}), as a collector's Describe sends them.
func DescNames(descs []string) map[string]bool {
	out := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, d := range descs {
		if m := re.FindStringSubmatch(d); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// Used are the metrics a binary's dashboard and rules use, sorted.
func Used(binary string) ([]string, error) {
	exprs, err := AllExprs(binary)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, e := range exprs {
		sels, err := Selectors(e.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Where, err)
		}
		for _, s := range sels {
			set[s.Metric] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

// AllExprs are a binary's rule and dashboard expressions.
func AllExprs(binary string) ([]Expr, error) {
	rules, err := RuleExprs(binary)
	if err != nil {
		return nil, err
	}
	dash, err := DashboardExprs(binary)
	if err != nil {
		return nil, err
	}
	return append(rules, dash...), nil
}
