package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sample files pass: they are the command's documentation by example.
func TestSamplesPass(t *testing.T) {
	var out bytes.Buffer
	passed, failed, err := run(context.Background(), &out, true, "testdata/visits.yaml", "testdata/limits.yaml")
	if err != nil || failed != 0 || passed != 7 {
		t.Fatalf("passed %d, failed %d, err %v\n%s", passed, failed, err, out.String())
	}
}

// A case whose program does something else is reported as failed, with what it did.
func TestFailingCasesAreReported(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cases.yaml")
	err := os.WriteFile(file, []byte(`
source: "return function(current, incoming) return {n = incoming.n + 1} end"
cases:
  - name: right
    incoming: {n: 1}
    expect: {n: 2}
  - name: wrong document
    incoming: {n: 1}
    expect: {n: 3}
  - name: wrong action
    incoming: {n: 1}
    expect_action: delete
  - name: no error
    incoming: {n: 1}
    expect_error: boom
  - name: unexpected error
    incoming: {}
    expect: {n: 1}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	passed, failed, err := run(context.Background(), &out, false, file)
	if err != nil || passed != 1 || failed != 4 {
		t.Fatalf("passed %d, failed %d, err %v\n%s", passed, failed, err, out.String())
	}
	for _, want := range []string{
		`wrong document: returned {"n":2}, want {"n":3}`,
		`wrong action: returned the document {"n":2}, want delete`,
		`no error: succeeded, want an error containing "boom"`,
		`unexpected error: failed: store: lua merge program, line 1: raised an error`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadFilesAreErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"unknown field": "program: x.lua\nsurprise: 1\n",
		"no program":    "cases: []\n",
		"missing lua":   "program: missing.lua\n",
		"two expects":   "source: 'return function() return {} end'\ncases:\n  - expect: {}\n    expect_action: delete\n",
		"bad number":    "source: 'return function() return {} end'\ncases:\n  - incoming: {n: 0x1F}\n    expect: {}\n",
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := run(context.Background(), &bytes.Buffer{}, false, file); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
