package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/luamerge"
	"github.com/tributary-dev/tributary/store"
)

// suite is one YAML file: a program and its cases.
type suite struct {
	// Program is the path of the Lua file, relative to the YAML file; Source is the program
	// inline. Exactly one is set.
	Program string `yaml:"program"`
	Source  string `yaml:"source"`
	// Limits override the engine's defaults for every case of the file.
	Limits struct {
		MaxInstructions int64         `yaml:"max_instructions"`
		Timeout         time.Duration `yaml:"timeout"`
		MaxMemoryBytes  int64         `yaml:"max_memory_bytes"`
		MaxDepth        int           `yaml:"max_depth"`
		MaxOutputBytes  int           `yaml:"max_output_bytes"`
		MaxCallDepth    int           `yaml:"max_call_depth"`
	} `yaml:"limits"`
	Cases []testCase `yaml:"cases"`
}

// testCase is one run of the program and what it must do. Documents are YAML (or JSON, which
// is YAML) mappings; they become JSON in their written order, and numbers keep their literal,
// so an id beyond 2^53 reaches the program exact.
type testCase struct {
	Name         string    `yaml:"name"`
	Current      yaml.Node `yaml:"current"` // absent: there is no record
	CurrentTimes []string  `yaml:"current_times"`
	Incoming     yaml.Node `yaml:"incoming"`
	IncomingTime []string  `yaml:"incoming_times"`
	Context      struct {
		Store     string    `yaml:"store"`
		Namespace string    `yaml:"namespace"`
		Dataset   string    `yaml:"dataset"`
		Key       string    `yaml:"key"`
		KeyType   string    `yaml:"key_type"` // string (default) or int64
		Time      time.Time `yaml:"time"`
		Attempt   int       `yaml:"attempt"`
	} `yaml:"context"`
	// Exactly one expectation: a document, an action (delete or unchanged), or an error
	// whose message contains the given text.
	Expect      yaml.Node `yaml:"expect"`
	ExpectTimes []string  `yaml:"expect_times"`
	ExpectAct   string    `yaml:"expect_action"`
	ExpectError string    `yaml:"expect_error"`
}

func loadSuite(path string) (*suite, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var s suite
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	source := s.Source
	switch {
	case s.Program != "" && s.Source != "":
		return nil, "", fmt.Errorf("%s: set program or source, not both", path)
	case s.Program != "":
		b, err := os.ReadFile(filepath.Join(filepath.Dir(path), s.Program))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", path, err)
		}
		source = string(b)
	case s.Source == "":
		return nil, "", fmt.Errorf("%s: no program", path)
	}
	return &s, source, nil
}

func (s *suite) options() *luamerge.Options {
	return &luamerge.Options{
		MaxInstructions: s.Limits.MaxInstructions, Timeout: s.Limits.Timeout, MaxMemoryBytes: s.Limits.MaxMemoryBytes,
		MaxDepth: s.Limits.MaxDepth, MaxOutputBytes: s.Limits.MaxOutputBytes, MaxCallDepth: s.Limits.MaxCallDepth,
	}
}

// call builds the merge call of a case.
func (c *testCase) call(source string) (*store.MergeCall, error) {
	call := &store.MergeCall{Program: source}
	if !c.Current.IsZero() {
		j, err := toJSON(&c.Current)
		if err != nil {
			return nil, fmt.Errorf("current: %w", err)
		}
		call.Current = &store.Document{JSON: j, Times: c.CurrentTimes}
	}
	in := []byte(`{}`)
	if !c.Incoming.IsZero() {
		j, err := toJSON(&c.Incoming)
		if err != nil {
			return nil, fmt.Errorf("incoming: %w", err)
		}
		in = j
	}
	call.Incoming = store.Document{JSON: in, Times: c.IncomingTime}
	ctx := c.Context
	key := store.StringKey(cmp(ctx.Key, "test"))
	if ctx.KeyType == "int64" {
		n, err := strconv.ParseInt(ctx.Key, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("context.key: %w", err)
		}
		key = store.Int64Key(n)
	} else if ctx.KeyType != "" && ctx.KeyType != "string" {
		return nil, fmt.Errorf("context.key_type %q: use string or int64", ctx.KeyType)
	}
	call.Context = store.MergeContext{
		Addr:    store.Address{Store: cmp(ctx.Store, "test"), Namespace: cmp(ctx.Namespace, "test"), Dataset: cmp(ctx.Dataset, "test"), Key: key},
		Time:    ctx.Time,
		Attempt: max(ctx.Attempt, 1),
	}
	if call.Context.Time.IsZero() {
		call.Context.Time = time.Unix(0, 0).UTC()
	}
	return call, nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// check compares what the program did with what the case expects; it returns "" when they
// agree, or why not.
func (c *testCase) check(res store.MergeResult, err error) (string, error) {
	expectations := 0
	for _, set := range []bool{!c.Expect.IsZero(), c.ExpectAct != "", c.ExpectError != ""} {
		if set {
			expectations++
		}
	}
	if expectations != 1 {
		return "", errors.New("set exactly one of expect, expect_action and expect_error")
	}
	if c.ExpectError != "" {
		switch {
		case err == nil:
			return "succeeded, want an error containing " + strconv.Quote(c.ExpectError), nil
		case !strings.Contains(err.Error(), c.ExpectError):
			return "failed with " + strconv.Quote(err.Error()) + ", want an error containing " + strconv.Quote(c.ExpectError), nil
		}
		return "", nil
	}
	if err != nil {
		return "failed: " + err.Error(), nil
	}
	if c.ExpectAct != "" {
		want := map[string]store.MergeAction{"delete": store.MergeDelete, "unchanged": store.MergeUnchanged}
		a, ok := want[c.ExpectAct]
		if !ok {
			return "", fmt.Errorf("expect_action %q: use delete or unchanged", c.ExpectAct)
		}
		if res.Action != a {
			return "returned " + describe(res) + ", want " + c.ExpectAct, nil
		}
		return "", nil
	}
	want, err := toJSON(&c.Expect)
	if err != nil {
		return "", fmt.Errorf("expect: %w", err)
	}
	if res.Action != store.MergeWrite {
		return "returned " + describe(res) + ", want the document " + string(want), nil
	}
	same, err := sameJSON(res.Doc.JSON, want)
	if err != nil {
		return "", err
	}
	if !same {
		return "returned " + string(res.Doc.JSON) + ", want " + string(want), nil
	}
	if c.ExpectTimes != nil && !sameSet(res.Doc.Times, c.ExpectTimes) {
		return fmt.Sprintf("marked date-times %v, want %v", res.Doc.Times, c.ExpectTimes), nil
	}
	return "", nil
}

func describe(res store.MergeResult) string {
	switch res.Action {
	case store.MergeDelete:
		return "delete"
	case store.MergeUnchanged:
		return "unchanged"
	}
	return "the document " + string(res.Doc.JSON)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s]--; seen[s] < 0 {
			return false
		}
	}
	return true
}

// toJSON writes a YAML node as JSON, keeping mapping order and number literals.
func toJSON(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(b, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return err
			}
			b.WriteString(strconv.FormatBool(v))
		case "!!int", "!!float":
			lit := strings.ReplaceAll(n.Value, "_", "")
			if !json.Valid([]byte(lit)) {
				return fmt.Errorf("line %d: %q is not a JSON number; write it as JSON would", n.Line, n.Value)
			}
			b.WriteString(lit)
		default:
			s, _ := json.Marshal(n.Value)
			b.Write(s)
		}
	default:
		return fmt.Errorf("line %d: unsupported YAML node", n.Line)
	}
	return nil
}

// sameJSON compares two JSON values: objects as sets of members, numbers by exact value.
func sameJSON(a, b []byte) (bool, error) {
	var x, y any
	for _, d := range []struct {
		data []byte
		v    *any
	}{{a, &x}, {b, &y}} {
		dec := json.NewDecoder(bytes.NewReader(d.data))
		dec.UseNumber()
		if err := dec.Decode(d.v); err != nil {
			return false, err
		}
	}
	return equal(x, y), nil
}

func equal(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := y.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	}
	return x == y
}
