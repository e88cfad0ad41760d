package main

import (
	"os"
	"strings"
	"testing"

	internalconfig "github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/config/configtest"
)

// TestConfigReference keeps CONFIG.md true: every key the configuration types accept
// (internal/config.Keys over their yaml tags) has a row in one of its tables, and every key
// a row names is accepted.
func TestConfigReference(t *testing.T) {
	md, err := os.ReadFile("CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	accepted := internalconfig.Keys(configType)
	configtest.CheckReference(t, "CONFIG.md", configtest.ReferenceKeys(string(md)), accepted)

	// The check itself: a reference without the row of a key, or with a row for a key that
	// does not exist, fails it.
	without := strings.Replace(string(md), "| `lua.max_depth` |", "| `lua.max_deep` |", 1)
	if without == string(md) {
		t.Fatal("CONFIG.md has no row for lua.max_depth")
	}
	rec := &recorder{}
	configtest.CheckReference(rec, "CONFIG.md", configtest.ReferenceKeys(without), accepted)
	if len(rec.errs) != 2 || !strings.Contains(rec.errs[0], "lua.max_depth") || !strings.Contains(rec.errs[1], "lua.max_deep") {
		t.Errorf("the check missed a renamed row: %q", rec.errs)
	}
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, strings.TrimSpace(strings.ReplaceAll(format, "%s", "")+" "+strings.Join(toStrings(args), " ")))
}

func toStrings(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i], _ = a.(string)
	}
	return out
}
