package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type walkInner struct {
	MaxDocs int `yaml:"max_docs"`
}

type walkBase struct {
	Shared string `yaml:"shared"`
}

type walkSelf struct{ v string }

func (s *walkSelf) UnmarshalYAML(n *yaml.Node) error { s.v = n.Value; return nil }

type walkDoc struct {
	walkBase `yaml:",inline"`
	Name     string                `yaml:"name"`
	Batch    *walkInner            `yaml:"batch"`
	List     []walkInner           `yaml:"list"`
	Named    map[string]*walkInner `yaml:"named"`
	Raw      yaml.Node             `yaml:"raw"`
	Self     walkSelf              `yaml:"self"`
	Any      any                   `yaml:"any"`
	Wait     Duration              `yaml:"wait"`
	Timeout  time.Duration         `yaml:"timeout"`
	Skipped  string                `yaml:"-"`
	Plain    bool
}

func parse(t *testing.T, y string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(y), &n); err != nil {
		t.Fatal(err)
	}
	return &n
}

// TestCheckKeys: the walker follows inline structs, pointers, lists and string-keyed maps,
// stops at a yaml.Node, a type that unmarshals itself and an interface, and reports each
// unknown key with its line, section path, known keys and suggestion.
func TestCheckKeys(t *testing.T) {
	n := parse(t, `shared: a
name: b
batch: {max_docs: 1, max_doc: 2}
list:
  - {max_docs: 1}
  - {maxdocs: 1}
named:
  one: {Max_Docs: 1}
raw: {anything: 1}
self: {anything: 1}
any: {anything: 1}
plain: true
skipped: x
nmae: c
`)
	got := CheckKeys(n, reflect.TypeOf(walkDoc{}), "top")
	known := "shared, name, batch, list, named, raw, self, any, wait, timeout, plain"
	want := []string{
		`line 3: unknown key "max_doc" in top.batch: did you mean "max_docs"? (known: max_docs)`,
		`line 6: unknown key "maxdocs" in top.list[1]: did you mean "max_docs"? (known: max_docs)`,
		`line 8: unknown key "Max_Docs" in top.named.one: did you mean "max_docs"? (known: max_docs)`,
		`line 13: unknown key "skipped" in top: (known: ` + known + `)`,
		`line 14: unknown key "nmae" in top: did you mean "name"? (known: ` + known + `)`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("problem %d\n  %s\nwant\n  %s", i, got[i], want[i])
		}
	}
	if got[4].Unknown != "nmae" || got[4].Suggestion != "name" || got[4].Key != "top" || got[4].Line != 14 {
		t.Errorf("fields of the problem: %+v", got[4])
	}
	if ps := CheckKeys(parse(t, "x: 1\n"), reflect.TypeOf(walkDoc{}), ""); len(ps) != 1 ||
		ps[0].String() != `line 1: unknown key "x" at the top level: (known: `+known+`)` {
		t.Errorf("top level: %v", ps)
	}
	// Anchors and merge keys are checked where they are used.
	if ps := CheckKeys(parse(t, "base: &b {max_docs: 1, bad: 2}\n"), reflect.TypeOf(map[string]walkInner{}), ""); len(ps) != 1 || ps[0].Key != "base" {
		t.Errorf("anchor: %v", ps)
	}
	if ps := CheckKeys(parse(t, "a: &b {max_docs: 1}\nc: {<<: *b, max_docs: 2}\n"), reflect.TypeOf(map[string]walkInner{}), ""); len(ps) != 0 {
		t.Errorf("merge key: %v", ps)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"type", "dsn", "publication", "slot", "snapshot", "snapshot_chunk", "server_id", "topics", "topic_pattern"}
	for key, want := range map[string]string{
		"publicaton": "publication", "Publication": "publication", "server-id": "server_id", "SERVER_ID": "server_id",
		"snapshot_chunks": "snapshot_chunk", "tpye": "type", "slto": "slot", "topcis": "topics", "topic-pattern": "topic_pattern",
		"zzz": "", "ds": "dsn", "d": "", "tables": "", "snap": "",
	} {
		if got := Suggest(key, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
	// Two known keys as close: no guess.
	if got := Suggest("ab", []string{"ax", "xb"}); got != "" {
		t.Errorf("a tie suggests %q", got)
	}
}

// TestKeys: every key path a type accepts, sections included; LeafKeys without sections.
func TestKeys(t *testing.T) {
	got := Keys(reflect.TypeOf(walkDoc{}))
	want := []string{"shared", "name", "batch", "batch.max_docs", "list", "list[].max_docs", "named", "named.<name>.max_docs",
		"raw", "self", "any", "wait", "timeout", "plain"}
	if !slices.Equal(got, want) {
		t.Errorf("Keys\n  %v\nwant\n  %v", got, want)
	}
	leaves := LeafKeys(reflect.TypeOf(walkDoc{}))
	wantLeaves := []string{"shared", "name", "batch.max_docs", "list[].max_docs", "named.<name>.max_docs", "raw", "self", "any", "wait", "timeout", "plain"}
	if !slices.Equal(leaves, wantLeaves) {
		t.Errorf("LeafKeys\n  %v\nwant\n  %v", leaves, wantLeaves)
	}
}

// TestDecodeAtValueProblems: values of the wrong type are reported with their key paths and
// lines of the file -- on a line holding several values, the one the type names -- and never
// quoted; a duration's own error does not stop the others.
func TestDecodeAtValueProblems(t *testing.T) {
	n := parse(t, "name: x\nbatch: {max_docs: Qz7many}\nlist: [{max_docs: Qz7}]\nwait: Qz7soon\ntimeout: Qz7x\nplain: Qz7\n")
	var d walkDoc
	err := DecodeAt(n, &d, "sinks[0].config")
	want := `line 2: sinks[0].config.batch.max_docs: must be a whole number; ` +
		`line 3: sinks[0].config.list[0].max_docs: must be a whole number; ` +
		`line 4: sinks[0].config.wait: not a duration (use e.g. "30s", "24h"); ` +
		`line 5: sinks[0].config.timeout: must be a duration such as "30s"; ` +
		`line 6: sinks[0].config.plain: must be true or false`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n  %v\nwant\n  %s", err, want)
	}
	if strings.Contains(err.Error(), "Qz7") {
		t.Fatalf("a value is quoted: %v", err)
	}
	// A value its explicit tag does not fit: yaml names no line, the walker finds it.
	if err := DecodeAt(parse(t, "name: x\nbatch: {max_docs: !!float Qz7}\n"), &d, ""); err == nil ||
		err.Error() != "line 2: batch.max_docs: does not fit its explicit tag !!float" {
		t.Fatalf("explicit tag: %v", err)
	}
	var small map[string]int8
	if err := DecodeAt(parse(t, "a: 1\nb: 300\n"), &small, ""); err == nil ||
		err.Error() != "line 2: b: must be a whole number within the range of int8" {
		t.Fatalf("overflow: %v", err)
	}
}

// TestExpandAt: every reference that cannot be expanded is named with its line and key path.
func TestExpandAt(t *testing.T) {
	t.Setenv("CONFIG_TEST_NAME", "n")
	n := parse(t, "name: ${CONFIG_TEST_NAME}\nbatch:\n  max_docs: ${CONFIG_TEST_UNSET_A}\nlist: [{max_docs: '${CONFIG_TEST_UNSET_B}'}]\n")
	ps := ExpandAt(n, reflect.TypeOf(walkDoc{}), "")
	want := "line 3: batch.max_docs: environment variable CONFIG_TEST_UNSET_A is not set; " +
		"line 4: list[0].max_docs: environment variable CONFIG_TEST_UNSET_B is not set"
	if ps.Error() != want {
		t.Fatalf("got\n  %v\nwant\n  %s", ps, want)
	}
	var d walkDoc
	if err := DecodeAt(parse(t, "name: ${CONFIG_TEST_NAME}\n"), &d, ""); err != nil || d.Name != "${CONFIG_TEST_NAME}" {
		t.Fatalf("DecodeAt does not expand: %q %v", d.Name, err)
	}
}

// TestKeyLines: every key and list element by its path, and a problem's line found from its
// key or the nearest enclosing one.
func TestKeyLines(t *testing.T) {
	lines := KeyLines(parse(t, "a:\n  b: 1\n  c:\n    - x\n    - {d: 2}\n"))
	for key, want := range map[string]int{"a": 1, "a.b": 2, "a.c": 3, "a.c[1]": 5, "a.c[1].d": 5, "a.c[0]": 4} {
		if lines[key] != want {
			t.Errorf("line of %s: %d, want %d", key, lines[key], want)
		}
	}
	if LineOf(lines, "a.c[1].e") != 5 || LineOf(lines, "a.z") != 1 || LineOf(lines, "q") != 0 {
		t.Errorf("LineOf: %d %d %d", LineOf(lines, "a.c[1].e"), LineOf(lines, "a.z"), LineOf(lines, "q"))
	}
}
