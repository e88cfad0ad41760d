package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
)

// TestExitStatusOfStartRefusal: a refusal prints every table and fix on lines of their own
// and exits 2, like any configuration that cannot work -- also one refusal per pipeline when
// several stopped; another failure exits 1.
func TestExitStatusOfStartRefusal(t *testing.T) {
	refusal := func(table string) error {
		return fmt.Errorf("cdc: pipeline \"p\": opening the source: %w", &cdc.StartError{Component: "pgcdc", Problems: []cdc.StartProblem{
			{Table: cdc.TableID{Connector: "postgres", Source: "shop", Database: "db", Schema: "public", Table: table},
				Problem: "the table does not exist", Fix: `did you mean public."MyOrders"?`}}})
	}
	var b bytes.Buffer
	if code := exitStatus(&b, refusal("myorders")); code != 2 {
		t.Fatalf("exit status %d, want 2", code)
	}
	want := "cdcmirror: refusing to start, the configuration cannot work (pgcdc):\n" +
		"  table postgres:shop/db.public.myorders: the table does not exist\n" +
		"    fix: did you mean public.\"MyOrders\"?\n"
	if b.String() != want {
		t.Fatalf("printed\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	joined := errors.Join(&mirror.PipelineError{Pipeline: "a", Err: refusal("a1")}, errors.New("other"),
		&mirror.PipelineError{Pipeline: "b", Err: refusal("b1")})
	if code := exitStatus(&b, joined); code != 2 || !strings.Contains(b.String(), "public.a1:") || !strings.Contains(b.String(), "public.b1:") {
		t.Fatalf("joined refusals: exit status %d, printed\n%s", code, b.String())
	}
	b.Reset()
	if code := exitStatus(&b, errors.New("boom")); code != 1 || b.String() != "cdcmirror: boom\n" {
		t.Fatalf("exit status %d, printed %q", code, b.String())
	}
}

// TestCommandRefusesMissingTables runs the command with each source against the real server
// and a captured table spelled in the wrong case: it returns at once with the source's
// refusal (exit status 2) naming the table and the near match.
func TestCommandRefusesMissingTables(t *testing.T) {
	sfx := estest.RandomHex(t, 4)
	run := func(t *testing.T, source string) string {
		t.Helper()
		// The cluster check comes first: a fake node that holds the rule passes it, and the
		// source refuses.
		url := searchtest.New(t, nil).URL
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "cdcmirror.yaml")
		cfg := "pipeline: mir-refusal\n" + source + `sinks:
  - type: elasticsearch
    config:
      id: es-refusal
      url: "` + url + `"
      index: "mir-` + sfx + `-{table}"
      auth: {type: none}
state: ` + filepath.Join(dir, "state.db") + `
dlq: ` + filepath.Join(dir, "dlq.jsonl") + "\n"
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
		defer cancel()
		var log syncBuffer
		err := command(ctx, []string{"--config", cfgPath, "--metrics-addr", "", "--progress", "never"}, &log, &log, nil)
		if !errors.Is(err, cdc.ErrStart) {
			t.Fatalf("command: %v, want a start refusal\n%s", err, log.String())
		}
		var out bytes.Buffer
		if code := exitStatus(&out, err); code != 2 {
			t.Fatalf("exit status %d, want 2", code)
		}
		return out.String()
	}
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		table := "Mir_Orders_" + sfx
		db := &mirrortest.Postgres{DSN: dsn, Table: table}
		db.Exec(t, `CREATE TABLE "`+table+`" (id int PRIMARY KEY)`)
		t.Cleanup(func() { db.Exec(t, `DROP TABLE IF EXISTS "`+table+`"`) })
		out := run(t, fmt.Sprintf("source:\n  type: postgres\n  dsn: \"${%s}\"\n  tables: [public.%s]\n  slot: mir_%s\n  publication: mir_%s\n",
			testenv.PostgresDSN, strings.ToLower(table), sfx, sfx))
		if !strings.Contains(out, "public."+strings.ToLower(table)+": the table does not exist") ||
			!strings.Contains(out, `fix: did you mean public."`+table+`"?`) {
			t.Fatalf("printed:\n%s", out)
		}
	})
	t.Run("mysql", func(t *testing.T) {
		dsnText := testenv.Require(t, testenv.MySQLDSN)
		dsn, err := testenv.ParseMySQLDSN(dsnText)
		if err != nil {
			t.Fatal(err)
		}
		table := "mir_Orders_" + sfx
		db := &mirrortest.MySQL{DSN: dsn, Table: table}
		db.Exec(t, "CREATE TABLE "+table+" (id INT PRIMARY KEY)")
		t.Cleanup(func() { db.Exec(t, "DROP TABLE IF EXISTS "+table) })
		out := run(t, fmt.Sprintf("source:\n  type: mysql\n  dsn: \"${%s}\"\n  tables: [%s]\n  server_id: %d\n",
			testenv.MySQLDSN, strings.ToLower(table), mirrortest.ServerID(t)))
		if !strings.Contains(out, strings.ToLower(table)+": the table does not exist") ||
			!strings.Contains(out, "fix: did you mean `"+dsn.DB+"`.`"+table+"`?") {
			t.Fatalf("printed:\n%s", out)
		}
	})
}
