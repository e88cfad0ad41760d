package main

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// validConfig is a complete configuration; tests break one thing at a time.
const validConfig = `
pipeline: orders
source:
  type: postgres
  dsn: "${CDCMIRROR_TEST_DSN}"
  tables: [public.orders, items]
  slot: s1
sinks:
  - type: elasticsearch
    config:
      id: es
      url: "${CDCMIRROR_TEST_URL}"
      index: "cdc-{db}.{table}"
      auth:
        type: basic
        username: elastic
        password: "${CDCMIRROR_TEST_PASSWORD}"
state: /tmp/state.db
dlq: /tmp/dlq.jsonl
runner:
  batch_max_events: 10
  batch_max_wait: 50ms
`

const testPassword = "pw-Zq8#secret"

func setTestEnv(t *testing.T) {
	t.Setenv("CDCMIRROR_TEST_DSN", "postgres://u:"+testPassword+"@127.0.0.1:5432/db")
	t.Setenv("CDCMIRROR_TEST_URL", "http://127.0.0.1:9200")
	t.Setenv("CDCMIRROR_TEST_PASSWORD", testPassword)
}

func TestConfigValid(t *testing.T) {
	setTestEnv(t)
	c, err := parseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Source.DSN) != os.Getenv("CDCMIRROR_TEST_DSN") || c.Sink.URL != os.Getenv("CDCMIRROR_TEST_URL") ||
		string(c.Sink.Auth.Password) != testPassword {
		t.Fatal("${ENV} references were not expanded in the source and in the sink entry")
	}
	if c.Pipeline != "orders" || len(c.Source.Tables) != 2 || c.Sink.ID != "es" || c.Runner.BatchMaxEvents != 10 ||
		time.Duration(c.Runner.BatchMaxWait) != 50*time.Millisecond {
		t.Fatalf("decoded %+v", c)
	}
}

// The shipped configurations are valid when their variables are set.
func TestConfigExamplesParse(t *testing.T) {
	t.Setenv("TRIBUTARY_PG_DSN", "postgres://postgres@127.0.0.1:35432/postgres")
	t.Setenv("TRIBUTARY_MYSQL_DSN", "tributary:tributary@tcp(127.0.0.1:33306)/test")
	t.Setenv("TRIBUTARY_ES_URL", "http://127.0.0.1:39200")
	t.Setenv("TRIBUTARY_OPENSEARCH_URL", "http://127.0.0.1:39201")
	for _, f := range []string{"postgres.yaml", "mysql.yaml", "postgres-opensearch.yaml", "mysql-opensearch.yaml"} {
		c, err := loadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newSource(&c.Source, nil); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// Every configuration error says which key (or variable) is wrong.
func TestConfigErrors(t *testing.T) {
	setTestEnv(t)
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"unknown top-level key", "state:", "stat: x\nstate:", []string{`unknown key "stat"`, "line 18"}},
		{"unknown source key", "  slot: s1", "  slto: s1", []string{`unknown key "slto" in source:`, "line 7"}},
		{"unknown runner key", "  batch_max_events: 10", "  batch_max_event: 10", []string{`unknown key "batch_max_event" in runner:`}},
		{"unknown sink key", "      index:", "      indexx: x\n      index:", []string{"sinks[0]", "indexx"}},
		{"unset variable in the source", "${CDCMIRROR_TEST_DSN}", "${CDCMIRROR_TEST_UNSET}", []string{"CDCMIRROR_TEST_UNSET is not set", "line 5"}},
		{"unset variable in the sink", "${CDCMIRROR_TEST_URL}", "${CDCMIRROR_TEST_UNSET}", []string{"CDCMIRROR_TEST_UNSET is not set", "sinks[0]"}},
		{"missing source", "source:\n  type: postgres\n  dsn: \"${CDCMIRROR_TEST_DSN}\"\n  tables: [public.orders, items]\n  slot: s1\n", "", []string{"source: is required"}},
		{"missing source type", "  type: postgres\n", "", []string{"source.type: is required"}},
		{"mysql key on postgres", "  slot: s1", "  server_id: 7", []string{"source.server_id: is a mysql setting"}},
		{"missing pipeline", "pipeline: orders", "", []string{"pipeline: is required"}},
		{"bad snapshot", "  slot: s1", "  snapshot: sometimes", []string{"source.snapshot: must be initial or never"}},
		{"missing state", "state: /tmp/state.db", "", []string{"state: is required"}},
		{"bad duration", "batch_max_wait: 50ms", "batch_max_wait: soon", []string{"not a duration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(validConfig, tc.old, tc.new, 1)
			if text == validConfig {
				t.Fatal("the test's replacement did not apply")
			}
			_, err := parseConfig([]byte(text))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestConfigSinkCount(t *testing.T) {
	setTestEnv(t)
	entry := validConfig[strings.Index(validConfig, "  - type:"):strings.Index(validConfig, "state:")]
	for n, want := range map[int]string{0: "sinks: needs one entry", 2: "one sink per pipeline"} {
		text := strings.Replace(validConfig, entry, strings.Repeat(entry, n), 1)
		if n == 0 {
			text = strings.Replace(text, "sinks:\n", "sinks: []\n", 1)
		}
		if _, err := parseConfig([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d sinks: error %v, want one containing %q", n, err, want)
		}
	}
}

// A value that fails to decode may be a secret after expansion: errors name the key's line and
// the expected type, never the value.
func TestConfigErrorsNeverQuoteValues(t *testing.T) {
	setTestEnv(t)
	for _, text := range []string{
		strings.Replace(validConfig, "runner:\n  batch_max_events: 10\n  batch_max_wait: 50ms\n", "runner: ${CDCMIRROR_TEST_PASSWORD}\n", 1),
		strings.Replace(strings.Replace(validConfig, "type: postgres", "type: mysql", 1), "  slot: s1", "  server_id: ${CDCMIRROR_TEST_PASSWORD}", 1),
		strings.Replace(validConfig, "pipeline: orders", "pipeline: ${CDCMIRROR_TEST_PASSWORD}", 1),
	} {
		if text == validConfig {
			t.Fatal("the test's replacement did not apply")
		}
		_, err := parseConfig([]byte(text))
		if err == nil {
			t.Fatal("accepted")
		}
		t.Log(err)
		if strings.Contains(err.Error(), testPassword) || strings.Contains(err.Error(), "Zq8") {
			t.Fatalf("error quotes the secret: %v", err)
		}
	}
}

// "$${" is a literal "${", and a lone "$" stays.
func TestConfigLiteralDollar(t *testing.T) {
	setTestEnv(t)
	text := strings.Replace(validConfig, "state: /tmp/state.db", "state: /tmp/$${HOME}/a$b.db", 1)
	c, err := parseConfig([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if c.State != "/tmp/${HOME}/a$b.db" {
		t.Fatalf("state = %q", c.State)
	}
}

func TestParseMySQLDSN(t *testing.T) {
	d, err := parseMySQLDSN("app:p@ss:w@rd@tcp(db.example:3306)/shop?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	if d != (mysqlDSN{user: "app", password: "p@ss:w@rd", addr: "db.example:3306", db: "shop"}) {
		t.Fatalf("parsed %+v", d)
	}
	for _, bad := range []string{"app:secretpw@db.example:3306/shop", "secretpw", "app:secretpw@tcp(db.example:3306", ":secretpw@tcp(h:1)/x"} {
		_, err := parseMySQLDSN(bad)
		if err == nil {
			t.Fatalf("accepted a malformed DSN")
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Fatalf("error quotes the DSN: %v", err)
		}
	}
}

// A bad command line or configuration is a usage error (exit status 2), before anything opens.
func TestCommandUsageErrors(t *testing.T) {
	setTestEnv(t)
	dir := t.TempDir()
	good, bad := dir+"/good.yaml", dir+"/bad.yaml"
	valid := strings.Replace(validConfig, "state: /tmp/state.db", "state: "+dir+"/state.db", 1)
	if err := os.WriteFile(good, []byte(valid), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(valid, "  slot: s1", "  slto: s1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--config is required"},
		{[]string{"--config", good, "--progress", "sometimes"}, "--progress must be"},
		{[]string{"--config", dir + "/missing.yaml"}, "missing.yaml"},
		{[]string{"--config", bad}, `bad.yaml: line 7: unknown key "slto"`},
		{[]string{"--config", good, "extra"}, `unexpected argument "extra"`},
	} {
		var out strings.Builder
		err := command(t.Context(), tc.args, &out, nil)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(dir + "/state.db"); !os.IsNotExist(err) {
		t.Errorf("a usage error created the state file (%v)", err)
	}
}
