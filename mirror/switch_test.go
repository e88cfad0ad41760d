package mirror

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// switchConfig is a one-pipeline configuration whose source: is source (YAML, indented for
// it) and whose state file is state.
func switchConfig(t *testing.T, source, state string) *Config {
	t.Helper()
	t.Setenv("MIRROR_TEST_URL", "http://127.0.0.1:1")
	t.Setenv("MIRROR_TEST_DSN", "postgres://u@127.0.0.1:1/db")
	c, err := ParseConfig([]byte("pipeline: orders\nsource:\n" + source + `sinks:
  - type: elasticsearch
    config: {id: es, url: "${MIRROR_TEST_URL}", index: "cdc-{table}", auth: {type: none}}
state: ` + state + "\ndlq: /tmp/w32-switch.dlq\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	switchPG  = "  type: postgres\n  dsn: \"${MIRROR_TEST_DSN}\"\n  tables: [public.orders]\n"
	switchDbz = "  type: debezium\n  name: postgres\n  brokers: [\"127.0.0.1:1\"]\n  topics: [t]\n"
)

// TestSwitchRefusesOtherPipelines: two configurations that are not one pipeline on the two
// paths are refused before anything is touched, each naming the fix; so is a prepare step
// for a switch to debezium.
func TestSwitchRefusesOtherPipelines(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		to, from   *Config
		prepare    bool
		wantInText string
	}{
		{"state files", switchConfig(t, switchDbz, "/tmp/a.db"), switchConfig(t, switchPG, "/tmp/b.db"), false, "different state files"},
		{"source names", switchConfig(t, strings.Replace(switchDbz, "name: postgres", "name: shop", 1), "/tmp/a.db"), switchConfig(t, switchPG, "/tmp/a.db"), false, "give the new source name: postgres"},
		{"same path", switchConfig(t, switchPG, "/tmp/a.db"), switchConfig(t, switchPG, "/tmp/a.db"), false, "a switch goes between"},
		{"prepare to debezium", switchConfig(t, switchDbz, "/tmp/a.db"), switchConfig(t, switchPG, "/tmp/a.db"), true, "no prepare step"},
	} {
		_, err := Switch(ctx, c.to, c.from, "orders", &SwitchOptions{Prepare: c.prepare})
		if !errors.Is(err, ErrSwitchRefused) || !strings.Contains(err.Error(), c.wantInText) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if _, err := Switch(ctx, switchConfig(t, switchDbz, "/tmp/a.db"), switchConfig(t, switchPG, "/tmp/a.db"), "other", nil); !errors.Is(err, ErrNoPipeline) {
		t.Errorf("unknown pipeline: %v", err)
	}
}

// TestCheckpointKind tells the three sources' checkpoints apart.
func TestCheckpointKind(t *testing.T) {
	for cp, want := range map[string]string{
		"":                             "",
		"debezium1:0123456789abcdef:7": "debezium",
		`{"v":1,"lsn":"0/16B3748"}`:    "postgres",
		`{"v":1,"file":"mariadb-bin.000003","pos":1234,"gtid":"0-1-42","use_gtid":true}`: "mysql",
		"garbage": "unknown",
	} {
		if got := checkpointKind([]byte(cp)); got != want {
			t.Errorf("%q: %q, want %q", cp, got, want)
		}
	}
}
