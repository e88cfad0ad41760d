package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/config/configtest"
	"github.com/tributary-dev/tributary/mirror"
)

// TestConfigReference keeps CONFIG.md true: every key mirror's parser accepts
// (mirror.ConfigKeys: its own sections as the parser reads them, the sink entry's from
// sink.Config's yaml tags) has a row in one of its tables, and every key a row names is
// accepted. CONFIG.md documents the sections once, for both forms ("the same keys in each
// entry of pipelines:"), so a documented key K also stands for pipelines[].K.
func TestConfigReference(t *testing.T) {
	md, err := os.ReadFile("CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	accepted := mirror.ConfigKeys()
	check := func(t testing.TB, md string) {
		documented := configtest.ReferenceKeys(md)
		for _, k := range documented {
			if slices.Contains(accepted, "pipelines[]."+k) {
				documented = append(documented, "pipelines[]."+k)
			}
		}
		configtest.CheckReference(t, "CONFIG.md", documented, accepted)
	}
	check(t, string(md))

	// The check itself: a reference without the row of a key, or with a row for a key that
	// does not exist, fails it -- in mirror's sections and in the sink's.
	for _, tc := range []struct{ row, renamed, missing string }{
		{"| `lag_interval` |", "| `lag_intervals` |", "lag_interval"},
		{"| `batch.max_docs` |", "| `batch.max_doc` |", "sinks[].config.batch.max_docs"},
		{"| `kafka_sasl.username` |", "| `kafka_sasl.user` |", "source.kafka_sasl.username"},
	} {
		changed := strings.Replace(string(md), tc.row, tc.renamed, 1)
		if changed == string(md) {
			t.Fatalf("CONFIG.md has no row %s", tc.row)
		}
		rec := &recorder{}
		check(rec, changed)
		if len(rec.errs) != 2 || !strings.Contains(rec.errs[0], tc.missing) || !strings.Contains(rec.errs[1], "documents keys the configuration does not accept") {
			t.Errorf("renaming %s: the check said %q", tc.row, rec.errs)
		}
	}
}

// TestConfigReferenceExample: the example of CONFIG.md is a valid configuration.
func TestConfigReferenceExample(t *testing.T) {
	md, err := os.ReadFile("CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"ORDERS_PG_DSN", "SHOP_MYSQL_DSN", "ES_PASSWORD", "ES_API_KEY"} {
		t.Setenv(v, "x")
	}
	t.Setenv("ORDERS_PG_DSN", "postgres://mirror:pw@db:5432/orders")
	t.Setenv("SHOP_MYSQL_DSN", "mirror:pw@tcp(db:3306)/shop")
	blocks := configtest.MarkdownYAML(string(md))
	if len(blocks) != 1 {
		t.Fatalf("CONFIG.md has %d YAML blocks, want its one example", len(blocks))
	}
	if _, err := mirror.ParseConfig([]byte(blocks[0])); err != nil {
		t.Fatalf("CONFIG.md's example: %v", err)
	}
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	parts := []string{format}
	for _, a := range args {
		s, _ := a.(string)
		parts = append(parts, s)
	}
	r.errs = append(r.errs, strings.Join(parts, " "))
}
