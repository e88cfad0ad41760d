package mirror

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// snake writes a Go field name as the parser's key: SnapshotChunk -> snapshot_chunk,
// CAFile -> ca_file, ServerID -> server_id, DSN -> dsn.
func snake(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// structKeys lists the keys the fields of t stand for, by the parser's naming, nested
// structs (KafkaTLS) as sections.
func structKeys(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		k := prefix + snake(f.Name)
		*out = append(*out, k)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			structKeys(ft, k+".", out)
		}
	}
}

// TestConfigKeysCoverTheStructs: ConfigKeys -- what the hand-written parser reads -- names
// every field of SourceConfig (its nested sections included) and RunnerConfig, and nothing
// else, so a field added without its key, a key read into nothing, or a new section missing
// from everySection (ConfigKeys would not see its keys) fails here.
func TestConfigKeysCoverTheStructs(t *testing.T) {
	keys := ConfigKeys()
	for _, sec := range []struct {
		section string
		typ     reflect.Type
	}{{"source", reflect.TypeOf(SourceConfig{})}, {"runner", reflect.TypeOf(RunnerConfig{})}, {"state_store", reflect.TypeOf(StateStoreConfig{})}} {
		var want []string
		structKeys(sec.typ, sec.section+".", &want)
		var got []string
		for _, k := range keys {
			if strings.HasPrefix(k, sec.section+".") {
				got = append(got, k)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the parser reads\n  %v\nthe struct has\n  %v", sec.section, got, want)
		}
	}
	// Both forms: every key of the one-pipeline form is a key of each pipelines: entry, but
	// pipeline: (name: there) and the file's own state: and state_store:.
	for _, k := range keys {
		if strings.HasPrefix(k, "pipelines") || k == "state" || k == "pipeline" || strings.HasPrefix(k, "state_store") {
			continue
		}
		if !slices.Contains(keys, "pipelines[]."+k) {
			t.Errorf("%s is read in the one-pipeline form but not in a pipelines: entry", k)
		}
	}
	if !slices.Contains(keys, "pipelines[].name") || !slices.Contains(keys, "sinks[].config.batch.max_docs") {
		t.Errorf("ConfigKeys lacks pipelines[].name or the sink's keys: %v", keys)
	}
}
