package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/internal/stocktest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// stdFix is the request a stock cluster needs.
const stdFix = `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}`

// configFor writes validConfig with its sink at url and returns its path.
func configFor(t *testing.T, url string) string {
	t.Helper()
	dir := t.TempDir()
	text := strings.NewReplacer("STATE", dir+"/state.db", "DLQ", dir+"/dlq", "http://127.0.0.1:1", url).Replace(validConfig)
	path := filepath.Join(dir, "cdcmirror.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCommand runs one command and returns what it printed and its exit status.
func runCommand(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	err := command(t.Context(), args, &out, &out, nil)
	code := exitStatus(&out, err)
	return out.String(), code
}

// prepare-cluster on a fake stock node: a dry run prints the request and sends nothing, a
// user without the privilege is told which one and given the request, an allowed one applies
// it, a second run says it is already enforced; the cluster's own rules are kept; false
// already forbids every auto-creation.
func TestPrepareClusterCommand(t *testing.T) {
	c := searchtest.New(t, nil)
	st := stocktest.New()
	st.Install(c)
	cfg := configFor(t, c.URL)

	out, code := runCommand(t, "prepare-cluster", "--config", cfg, "--dry-run")
	want := "cluster fake-cluster-uuid at " + c.URL + " (pipelines orders):\n" +
		"  not enforced: action.auto_create_index is true (its default: no persistent or transient value is set): every index name can be auto-created, including df-w-*\n" +
		"  would send: " + stdFix + "\n" +
		"cdcmirror: 1 of 1 clusters do not enforce the rule (dry run: nothing sent)\n"
	if out != want || code != 1 || len(st.Updates()) != 0 {
		t.Fatalf("dry run: exit %d, %d updates, printed\n%s\nwant\n%s", code, len(st.Updates()), out, want)
	}

	st.Deny(false, true)
	out, code = runCommand(t, "prepare-cluster", "--config", cfg)
	for _, w := range []string{"  not applied: esfence: updating action.auto_create_index: ",
		"  the sinks' credentials lack the privilege to update cluster settings (Elasticsearch: the manage cluster privilege; OpenSearch: cluster:admin/settings/update",
		"  send it as a user who may: " + stdFix + "\n"} {
		if !strings.Contains(out, w) || code != 1 {
			t.Fatalf("without the privilege: exit %d, printed\n%s\nwant a line with %q", code, out, w)
		}
	}

	st.Deny(false, false)
	out, code = runCommand(t, "prepare-cluster", "--config", cfg)
	if !strings.Contains(out, "  applied: "+stdFix+"\n  now enforced: action.auto_create_index is \"-df-w-*,+*\" (persistent)\n") || code != 0 || len(st.Updates()) != 1 {
		t.Fatalf("apply: exit %d, printed\n%s", code, out)
	}
	out, code = runCommand(t, "prepare-cluster", "--config", cfg)
	if !strings.Contains(out, "  already enforced: action.auto_create_index is \"-df-w-*,+*\" (persistent)\n") || code != 0 || len(st.Updates()) != 1 {
		t.Fatalf("again: exit %d, printed\n%s", code, out)
	}

	own := "+logs-*,+*"
	st.Set("persistent", &own)
	out, _ = runCommand(t, "prepare-cluster", "--config", cfg, "--dry-run")
	if !strings.Contains(out, `would send: PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+logs-*,+*"}}`) {
		t.Fatalf("the cluster's own rules are not kept:\n%s", out)
	}
	off := "false"
	st.Set("persistent", &off)
	out, code = runCommand(t, "prepare-cluster", "--config", cfg)
	if !strings.Contains(out, `already enforced: action.auto_create_index is "false" (persistent), which forbids auto-creating any index`) || code != 0 {
		t.Fatalf("false: exit %d, printed\n%s", code, out)
	}
}

// run against a stock cluster refuses the pipeline at once, before its source is opened (the
// PostgreSQL server of validConfig does not exist), and exits 2 with the request and the
// command that fixes it; no dead-letter file is created.
func TestRunRefusesUnenforcedCluster(t *testing.T) {
	c := searchtest.New(t, nil)
	stocktest.New().Install(c)
	cfg := configFor(t, c.URL)
	out, code := runCommand(t, "--config", cfg, "--metrics-addr", "", "--progress", "never")
	for _, w := range []string{"cdcmirror: refusing to start: the cluster may auto-create df-w-* indices", "fencing_unenforced", stdFix,
		"fix: cdcmirror prepare-cluster --config FILE"} {
		if !strings.Contains(out, w) || code != 2 {
			t.Fatalf("exit %d, printed\n%s\nwant %q", code, out, w)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), "dlq")); !os.IsNotExist(err) {
		t.Fatalf("the refused pipeline created its dead-letter file (%v)", err)
	}
}

// On the shared servers, which hold the rule while a test runs (EnforceAutoCreateRule),
// prepare-cluster changes nothing.
func TestPrepareClusterAlreadyEnforced(t *testing.T) {
	mirrortest.EachEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		out, code := runCommand(t, "prepare-cluster", "--config", configFor(t, node.URL))
		if code != 0 || !strings.Contains(out, "  already enforced: action.auto_create_index is \"-df-w-*,+*\" (persistent)\n") {
			t.Fatalf("exit %d, printed\n%s", code, out)
		}
	})
}

// On the three-node cluster, started stock: prepare-cluster applies the rule (or finds it
// applied by an earlier run: it stays), and a pipeline then starts and mirrors its table.
func TestPrepareClusterThenRun(t *testing.T) {
	urls := testenv.RequireCluster(t)
	dsn := testenv.Require(t, testenv.PostgresDSN)
	testenv.HoldClusterSettings(t, urls[0])
	node := &mirrortest.Node{Node: estest.Connect(t, estest.Elasticsearch, urls[0])}
	var cur struct{ Persistent, Transient map[string]any }
	node.OK(t, esapi.ClusterGetSettingsRequest{FlatSettings: estest.Ptr(true)}).Decode(t, &cur)
	if v, ok := cur.Transient[estest.AutoCreateSetting]; ok {
		t.Skipf("the cluster holds a transient %s (%v); this test sends no transient setting", estest.AutoCreateSetting, v)
	}
	prev, set := cur.Persistent[estest.AutoCreateSetting]
	if set && prev != estest.AutoCreateRule {
		t.Skipf("the cluster holds another persistent %s (%v); this test sets only the standard rule", estest.AutoCreateSetting, prev)
	}

	sfx := estest.RandomHex(t, 4)
	name := "h3_cluster_" + sfx
	tb := mirrortest.NewPostgres(t, dsn, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), mirrortest.WaitBound)
		defer cancel()
		if src, err := pgcdc.New(dsn, &pgcdc.Options{Slot: name, Publication: name}); err == nil {
			_ = src.Drop(ctx)
		}
	})
	tb.Exec(t, tb.Insert(1, 50)...)
	index := "h3-cluster-" + name
	node.DeleteAtCleanup(t, index)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cdcmirror.yaml")
	text := fmt.Sprintf(`pipeline: h3-cluster
source:
  type: postgres
  dsn: "${%s}"
  tables: [public.%s]
  slot: %s
  publication: %s
sinks:
  - type: elasticsearch
    config:
      id: es-cluster
      url: "%s"
      index: "h3-cluster-{table}"
      auth: {type: none}
%s      number_of_shards: 1
state: %s
dlq: %s
`, testenv.PostgresDSN, name, name, name, urls[0], mirrortest.Engines[0].MappingYAML("      "), filepath.Join(dir, "state.db"), filepath.Join(dir, "dlq.jsonl"))
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	out, code := runCommand(t, "prepare-cluster", "--config", cfgPath)
	switch {
	case code != 0:
		t.Fatalf("prepare-cluster: exit %d, printed\n%s", code, out)
	case !set && !strings.Contains(out, "  applied: "+stdFix+"\n  now enforced: action.auto_create_index is \"-df-w-*,+*\" (persistent)\n"):
		t.Fatalf("on the stock cluster prepare-cluster printed\n%s", out)
	case set && !strings.Contains(out, "already enforced"):
		t.Fatalf("with the rule set prepare-cluster printed\n%s", out)
	}
	t.Logf("prepare-cluster (the rule was set before: %v):\n%s", set, out)

	run := startCommand(t, cfgPath)
	run.waitFor("every row in the index", node.Converged(t, index, tb, 50))
	run.stop()
}

// On the secured servers, stock: a user with the monitor privilege alone is told which
// privilege updating the setting needs and given the request, a user without monitor which
// privilege reading it needs; the setting stays as it was; a run with either is refused with
// the request, before its source (which does not exist) is opened.
func TestPrepareClusterWithoutThePrivilege(t *testing.T) {
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) {
		testenv.HoldClusterSettings(t, s.URL)
		settings := func() string {
			return string(s.Must(t, "GET", "/_cluster/settings?flat_settings=true", ""))
		}
		before := settings()
		if strings.Contains(before, estest.AutoCreateSetting) {
			t.Skipf("the server holds %s (%s): it is not stock", estest.AutoCreateSetting, before)
		}
		monitor := []string{"monitor"}
		if s.OpenSearch() {
			monitor = []string{"cluster_monitor"}
		}
		config := func(user, password string) string {
			dir := t.TempDir()
			text := strings.NewReplacer("STATE", dir+"/state.db", "DLQ", dir+"/dlq",
				`url: "http://127.0.0.1:1", index: "cdc-{table}", auth: {type: none}`,
				fmt.Sprintf(`url: %q, index: "h3-{table}", tls: {ca_file: %q}, auth: {type: basic, username: %q, password: %q}`, s.URL, s.CAFile, user, password),
			).Replace(validConfig)
			path := filepath.Join(dir, "cdcmirror.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}

		user, pw := newUser(t, s, "h3-prep", monitor)
		cfg := config(user, pw)
		out, code := runCommand(t, "prepare-cluster", "--config", cfg)
		for _, w := range []string{"  not enforced: action.auto_create_index is true (its default",
			"  not applied: esfence: updating action.auto_create_index: ",
			"  the sinks' credentials lack the privilege to update cluster settings",
			"  send it as a user who may: " + stdFix + "\n"} {
			if code != 1 || !strings.Contains(out, w) {
				t.Fatalf("monitor only: exit %d, printed\n%s\nwant %q", code, out, w)
			}
		}
		if strings.Contains(out, pw) {
			t.Fatal("the password was printed")
		}
		t.Logf("prepare-cluster as a user with monitor only:\n%s", out)
		out, code = runCommand(t, "--config", cfg, "--metrics-addr", "", "--progress", "never")
		if code != 2 || !strings.Contains(out, stdFix) || !strings.Contains(out, "fencing_unenforced") {
			t.Fatalf("run: exit %d, printed\n%s", code, out)
		}

		user, pw = newUser(t, s, "h3-prep-nomon", nil)
		out, code = runCommand(t, "prepare-cluster", "--config", config(user, pw))
		if code != 1 || !strings.Contains(out, "  cannot read action.auto_create_index: ") ||
			!strings.Contains(out, "  the sinks' credentials lack the monitor cluster privilege") {
			t.Fatalf("without monitor: exit %d, printed\n%s", code, out)
		}
		if after := settings(); after != before {
			t.Fatalf("the cluster settings changed: %s -> %s", before, after)
		}
	})
}

// newUser is a user whose role holds the cluster privileges and read on h3-*.
func newUser(t *testing.T, s *searchtest.Secure, base string, cluster []string) (user, password string) {
	t.Helper()
	return s.NewUser(t, base, searchtest.Grant{Cluster: cluster, Index: []string{"read"}, Patterns: []string{"h3-*"}})
}
