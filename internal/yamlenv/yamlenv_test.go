package yamlenv

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestExpand(t *testing.T) {
	t.Setenv("YE_A", "alpha")
	t.Setenv("YE_EMPTY", "")
	for in, want := range map[string]string{
		"plain":              "plain",
		"${YE_A}":            "alpha",
		"x-${YE_A}-${YE_A}":  "x-alpha-alpha",
		"$${YE_A}":           "${YE_A}",
		"cost $5 and $":      "cost $5 and $",
		"[${YE_EMPTY}]":      "[]",
		"$$${YE_A}":          "$${YE_A}", // "$" then the literal "${"
		"${YE_A}$${literal}": "alpha${literal}",
	} {
		got, err := Expand(in)
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestExpandErrors(t *testing.T) {
	t.Setenv("YE_SECRET", "hunter2")
	for in, want := range map[string]string{
		"${YE_UNSET_VARIABLE}": "YE_UNSET_VARIABLE is not set",
		"${YE_A":               "unterminated",
		"${hunter2 pass}":      "invalid environment variable name",
		"${}":                  "invalid environment variable name",
		"${1X}":                "invalid environment variable name",
	} {
		_, err := Expand(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Expand(%q): %v, want an error containing %q and no value", in, err, want)
		}
	}
}

func TestExpandNodeValuesOnlyAndRetyping(t *testing.T) {
	t.Setenv("YE_N", "42")
	t.Setenv("YE_KEY", "k")
	var doc yaml.Node
	src := "${YE_KEY}: ${YE_N}\nquoted: \"${YE_N}\"\nlist:\n  - ${YE_N}\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	if err := ExpandNode(&doc); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := doc.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out["${YE_KEY}"] != 42 {
		t.Errorf("plain value: %#v (keys are never expanded, plain values are re-typed)", out)
	}
	if out["quoted"] != "42" {
		t.Errorf("quoted value %#v, want the text \"42\"", out["quoted"])
	}
	if l, ok := out["list"].([]any); !ok || len(l) != 1 || l[0] != 42 {
		t.Errorf("list %#v", out["list"])
	}
}

func TestExpandNodeNamesTheLine(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: 1\nb:\n  c: ${YE_NOT_SET_ANYWHERE}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	err := ExpandNode(&doc)
	if err == nil || !strings.HasPrefix(err.Error(), "line 3: ") || !strings.Contains(err.Error(), "YE_NOT_SET_ANYWHERE") {
		t.Fatalf("got %v", err)
	}
}
