package mirror

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// validConfig is a complete one-pipeline configuration (today's cdcmirror format); tests
// break one thing at a time.
const validConfig = `
pipeline: orders
source:
  type: postgres
  dsn: "${MIRROR_TEST_DSN}"
  tables: [public.orders, items]
  slot: s1
sinks:
  - type: elasticsearch
    config:
      id: es
      url: "${MIRROR_TEST_URL}"
      index: "cdc-{db}.{table}"
      auth:
        type: basic
        username: elastic
        password: "${MIRROR_TEST_PASSWORD}"
state: /tmp/state.db
dlq: /tmp/dlq.jsonl
runner:
  batch_max_events: 10
  batch_max_wait: 50ms
`

// twoPipelines is the list form: one PostgreSQL and one MariaDB pipeline sharing the state.
const twoPipelines = `
state: /tmp/mirror.state
pipelines:
  - name: pg
    source:
      type: postgres
      dsn: "${MIRROR_TEST_DSN}"
      tables: [public.*]
    sinks:
      - type: elasticsearch
        config: {id: es, url: "${MIRROR_TEST_URL}", index: "pg-{table}", auth: {type: none}}
    dlq: /tmp/pg.dlq
    runner:
      backpressure_threshold: 30s
      lag_threshold: 1m
      lag_interval: 5s
  - name: maria
    source:
      type: mysql
      dsn: "mysql://app:p%40ss@db.example/shop"
      tables: [shop.*, other.orders]
    sinks:
      - type: elasticsearch
        config: {id: es, url: "${MIRROR_TEST_URL}", index: "my-{table}", auth: {type: none}}
    dlq: /tmp/maria.dlq
    runner: {unanswered_threshold: 15s}
`

const testPassword = "pw-Zq8#secret"

func setTestEnv(t *testing.T) {
	t.Setenv("MIRROR_TEST_DSN", "postgres://u:"+testPassword+"@127.0.0.1:5432/db")
	t.Setenv("MIRROR_TEST_URL", "http://127.0.0.1:9200")
	t.Setenv("MIRROR_TEST_PASSWORD", testPassword)
}

func TestConfigValid(t *testing.T) {
	setTestEnv(t)
	c, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pipelines) != 1 {
		t.Fatalf("%d pipelines", len(c.Pipelines))
	}
	p := c.Pipelines[0]
	if string(p.Source.DSN) != os.Getenv("MIRROR_TEST_DSN") || p.Sink.URL != os.Getenv("MIRROR_TEST_URL") ||
		string(p.Sink.Auth.Password) != testPassword {
		t.Fatal("${ENV} references were not expanded in the source and in the sink entry")
	}
	if p.Name != "orders" || len(p.Source.Tables) != 2 || p.Sink.ID != "es" || p.Runner.BatchMaxEvents != 10 ||
		p.Runner.BatchMaxWait != 50*time.Millisecond || c.State != "/tmp/state.db" || p.DLQ != "/tmp/dlq.jsonl" {
		t.Fatalf("decoded %+v", c)
	}
}

// TestConfigBatchIdleWait: runner.batch_idle_wait reaches the runner's options, a negative
// value (never close a batch for quiet) included.
func TestConfigBatchIdleWait(t *testing.T) {
	setTestEnv(t)
	for _, tc := range []struct {
		text string
		want time.Duration
	}{{"", 0}, {"  batch_idle_wait: 20ms\n", 20 * time.Millisecond}, {"  batch_idle_wait: -1ms\n", -time.Millisecond}} {
		c, err := ParseConfig([]byte(validConfig + tc.text))
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		pc := &c.Pipelines[0]
		if got := runnerOptions(pc, nil, nil).BatchIdleWait; got != tc.want {
			t.Fatalf("%q: BatchIdleWait %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestConfigPipelines(t *testing.T) {
	setTestEnv(t)
	c, err := ParseConfig([]byte(twoPipelines))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Names(); len(got) != 2 || got[0] != "pg" || got[1] != "maria" || c.State != "/tmp/mirror.state" {
		t.Fatalf("pipelines %v, state %q", got, c.State)
	}
	r := c.Pipeline("pg").Runner
	if r.BackpressureThreshold != 30*time.Second || r.LagThreshold != time.Minute || r.LagInterval != 5*time.Second {
		t.Fatalf("runner %+v", r)
	}
	if r := c.Pipeline("maria").Runner; r.UnansweredThreshold != 15*time.Second {
		t.Fatalf("maria's runner %+v", r)
	}
	if c.Pipeline("maria").Sink.Index != "my-{table}" || c.Pipeline("nope") != nil {
		t.Fatal("Pipeline looks up the wrong entries")
	}
}

// Every configuration error says which key (or variable) is wrong, and on which line.
func TestConfigErrors(t *testing.T) {
	setTestEnv(t)
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"unknown top-level key", "state:", "stat: x\nstate:", []string{`line 18: unknown key "stat"`}},
		{"unknown source key", "  slot: s1", "  slto: s1", []string{`line 7: unknown key "slto" in source:`}},
		{"unknown runner key", "  batch_max_events: 10", "  batch_max_event: 10", []string{`unknown key "batch_max_event" in runner:`}},
		{"unknown sink key", "      index:", "      indexx: x\n      index:", []string{`line 13: unknown key "indexx" in sinks[0].config: did you mean "index"? (known: id, url, urls, index,`}},
		{"unset variable in the source", "${MIRROR_TEST_DSN}", "${MIRROR_TEST_UNSET}", []string{"line 5: source.dsn: environment variable MIRROR_TEST_UNSET is not set"}},
		{"unset variable in the sink", "${MIRROR_TEST_URL}", "${MIRROR_TEST_UNSET}", []string{"line 12: sinks[0].config.url: environment variable MIRROR_TEST_UNSET is not set"}},
		{"missing source", "source:\n  type: postgres\n  dsn: \"${MIRROR_TEST_DSN}\"\n  tables: [public.orders, items]\n  slot: s1\n", "", []string{"source: is required"}},
		{"missing source type", "  type: postgres\n", "", []string{"line 3: source.type: is required"}},
		{"mysql key on postgres", "  slot: s1", "  server_id: 7", []string{"line 7: source.server_id: is a mysql setting"}},
		{"missing pipeline", "pipeline: orders", "", []string{"pipeline: is required"}},
		{"bad pipeline name", "pipeline: orders", "pipeline: or/ders", []string{"line 2: pipeline: use letters"}},
		{"bad snapshot", "  slot: s1", "  snapshot: sometimes", []string{"line 7: source.snapshot: must be initial or never"}},
		{"missing state", "state: /tmp/state.db", "", []string{"state: is required"}},
		{"bad duration", "batch_max_wait: 50ms", "batch_max_wait: soon", []string{"line 22: runner.batch_max_wait: not a duration"}},
		{"negative duration", "batch_max_wait: 50ms", "stall_threshold: -1s", []string{"line 22: runner.stall_threshold: must not be negative"}},
		{"bad integer", "batch_max_events: 10", "batch_max_events: many", []string{"line 21: runner.batch_max_events: must be a whole number"}},
		{"backoff bounds", "batch_max_wait: 50ms", "backoff_min: 2s\n  backoff_max: 1s", []string{"line 23: runner.backoff_max: is below backoff_min"}},
		{"bad table", "[public.orders, items]", "[public.orders, pub*.x]", []string{"line 6: source.tables[1]: a schema cannot be a pattern"}},
		{"partial pattern", "[public.orders, items]", "[public.ord*]", []string{"source.tables[0]: only a whole table name can be a pattern"}},
		{"tables not a list", "[public.orders, items]", "public.orders", []string{"line 6: source.tables: must be a list"}},
		{"twice", "  slot: s1", "  slot: s1\n  slot: s2", []string{"line 8: source.slot: is given twice"}},
		{"bad slot", "  slot: s1", "  slot: S-1", []string{"source.slot: use a-z"}},
		{"both forms", "state:", "pipelines: []\nstate:", []string{"pipelines: with pipelines:, write name:"}},
		{"state and state_store", "state: /tmp/state.db", "state: /tmp/state.db\nstate_store: {type: postgres, dsn: \"${MIRROR_TEST_DSN}\"}", []string{"state_store: and state: exclude each other"}},
		{"state_store type", "state: /tmp/state.db", "state_store: {type: redis, dsn: x}", []string{"state_store.type: must be postgres or mysql"}},
		{"state_store dsn", "state: /tmp/state.db", "state_store: {type: mysql, dsn: \"mysql://u:" + testPassword + "@h/db\"}", []string{"state_store.dsn: the MySQL connection string is not"}},
		{"state_store dsn parameter", "state: /tmp/state.db", "state_store: {type: mysql, dsn: \"u:" + testPassword + "@tcp(h:3306)/?tls=true\"}", []string{`state_store.dsn: the MySQL connection string's parameter "tls" is not supported`}},
		{"state_store lease", "state: /tmp/state.db", "state_store: {type: postgres, dsn: \"${MIRROR_TEST_DSN}\", lease_ttl: 500ms}", []string{"state_store.lease_ttl: must be at least 1s"}},
		{"state_store schema", "state: /tmp/state.db", "state_store: {type: postgres, dsn: \"${MIRROR_TEST_DSN}\", schema: \"a-b\"}", []string{"state_store.schema: use letters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(validConfig, tc.old, tc.new, 1)
			if text == validConfig {
				t.Fatal("the test's replacement did not apply")
			}
			_, err := ParseConfig([]byte(text))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Errorf("error %q quotes the password", err)
			}
		})
	}
}

// All problems come at once, each with its line, in file order.
func TestConfigAllErrorsAtOnce(t *testing.T) {
	setTestEnv(t)
	text := strings.NewReplacer("  slot: s1", "  slto: s1", "batch_max_wait: 50ms", "batch_max_wait: soon",
		"pipeline: orders", "pipeline: or/ders", "dlq: /tmp/dlq.jsonl", "").Replace(validConfig)
	_, err := ParseConfig([]byte(text))
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want a *ConfigError", err)
	}
	var lines []int
	for _, p := range ce.Problems {
		lines = append(lines, p.Line)
	}
	want := []string{"line 2: pipeline: use letters", `line 7: unknown key "slto"`, "dlq: is required", "line 22: runner.batch_max_wait: not a duration"}
	if len(ce.Problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	for i := 1; i < len(lines); i++ {
		if lines[i] != 0 && lines[i] < lines[i-1] {
			t.Errorf("problems out of file order: lines %v", lines)
		}
	}
}

func TestConfigPipelinesErrors(t *testing.T) {
	setTestEnv(t)
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"duplicate name", "name: maria", "name: pg", []string{"line 17: pipelines[1].name: pipelines[0] has the same name"}},
		{"shared dlq", "dlq: /tmp/maria.dlq", "dlq: /tmp/pg.dlq", []string{"pipelines[1].dlq: pipelines[0] uses the same dead-letter file"}},
		{"top-level key with pipelines", "state: /tmp/mirror.state", "state: /tmp/mirror.state\ndlq: x", []string{"with pipelines:, write name:"}},
		{"unknown pipeline key", "    dlq: /tmp/pg.dlq", "    dql: /tmp/pg.dlq", []string{`line 12: unknown key "dql" in pipelines[0]: did you mean "dlq"?`}},
		{"postgres key on mysql", "      tables: [shop.*, other.orders]", "      tables: [shop.*]\n      slot: x", []string{"pipelines[1].source.slot: is a postgres setting"}},
		{"bad signal table", "      tables: [shop.*, other.orders]", "      tables: [shop.*]\n      signal_table: shop.*", []string{"pipelines[1].source.signal_table: must be db.table or a table name"}},
		{"bad mysql dsn", "mysql://app:p%40ss@db.example/shop", "app:p%40ss@db.example:3306/shop", []string{"pipelines[1].source.dsn: a MySQL DSN is"}},
		{"two sinks", "        config: {id: es, url: \"${MIRROR_TEST_URL}\", index: \"my-{table}\", auth: {type: none}}\n",
			"        config: {id: es, url: \"${MIRROR_TEST_URL}\", index: \"my-{table}\", auth: {type: none}}\n      - type: elasticsearch\n        config: {id: es2}\n",
			[]string{"pipelines[1].sinks: a pipeline has one sink"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(twoPipelines, tc.old, tc.new, 1)
			if text == twoPipelines {
				t.Fatal("the test's replacement did not apply")
			}
			_, err := ParseConfig([]byte(text))
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
	// Two PostgreSQL pipelines on one database need their own slots: the defaults differ per
	// pipeline, a slot both name is refused.
	text := strings.Replace(strings.Replace(strings.Replace(twoPipelines, "type: mysql", "type: postgres", 1),
		`dsn: "mysql://app:p%40ss@db.example/shop"`, `dsn: "${MIRROR_TEST_DSN}"`, 1), "[shop.*, other.orders]", "[shop.*]", 1)
	if _, err := ParseConfig([]byte(text)); err != nil {
		t.Fatalf("two pipelines with default slots on one database: %v", err)
	}
	text = strings.ReplaceAll(text, "tables: [", "slot: s1\n      tables: [")
	if _, err := ParseConfig([]byte(text)); err == nil || !strings.Contains(err.Error(), "pipelines[1].source.slot: pipelines[0] reads the same slot") {
		t.Fatalf("a shared slot: %v", err)
	}
}

func TestConfigSinkCount(t *testing.T) {
	setTestEnv(t)
	entry := validConfig[strings.Index(validConfig, "  - type:"):strings.Index(validConfig, "state:")]
	for n, want := range map[int]string{0: "sinks: needs one entry", 2: "a pipeline has one sink"} {
		text := strings.Replace(validConfig, entry, strings.Repeat(entry, n), 1)
		if n == 0 {
			text = strings.Replace(text, "sinks:\n", "sinks: []\n", 1)
		}
		if _, err := ParseConfig([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d sinks: error %v, want one containing %q", n, err, want)
		}
	}
	if _, err := ParseConfig([]byte(strings.Replace(validConfig, "sinks:\n"+entry, "", 1))); err == nil || !strings.Contains(err.Error(), "sinks: needs one entry") {
		t.Errorf("no sinks: error %v", err)
	}
}

// A value that fails to decode may be a secret after expansion: errors name the key's line and
// the expected type, never the value.
func TestConfigErrorsNeverQuoteValues(t *testing.T) {
	setTestEnv(t)
	for _, text := range []string{
		strings.Replace(validConfig, "runner:\n  batch_max_events: 10\n  batch_max_wait: 50ms\n", "runner: ${MIRROR_TEST_PASSWORD}\n", 1),
		strings.Replace(strings.Replace(validConfig, "type: postgres", "type: mysql", 1), "  slot: s1", "  server_id: ${MIRROR_TEST_PASSWORD}", 1),
		strings.Replace(validConfig, "pipeline: orders", "pipeline: ${MIRROR_TEST_PASSWORD}", 1),
		strings.Replace(validConfig, "batch_max_wait: 50ms", "batch_max_wait: ${MIRROR_TEST_PASSWORD}", 1),
		strings.Replace(validConfig, "snapshot", "x", 1) + "  snapshot: ${MIRROR_TEST_PASSWORD}\n",
		strings.Replace(strings.Replace(validConfig, "type: postgres", "type: mysql", 1), "${MIRROR_TEST_DSN}", "app:${MIRROR_TEST_PASSWORD}@db:3306/x", 1),
		strings.Replace(strings.Replace(validConfig, "type: postgres", "type: mysql", 1), "${MIRROR_TEST_DSN}", "mysql://app:${MIRROR_TEST_PASSWORD}@db:x/y", 1),
		strings.Replace(validConfig, "username: elastic", "username: [${MIRROR_TEST_PASSWORD}]", 1),
	} {
		_, err := ParseConfig([]byte(text))
		if err == nil {
			t.Fatal("accepted")
		}
		if strings.Contains(err.Error(), testPassword) || strings.Contains(err.Error(), "Zq8") {
			t.Fatalf("error quotes the secret: %v", err)
		}
	}
}

// "$${" is a literal "${", and a lone "$" stays.
func TestConfigLiteralDollar(t *testing.T) {
	setTestEnv(t)
	text := strings.Replace(validConfig, "state: /tmp/state.db", "state: /tmp/$${HOME}/a$b.db", 1)
	c, err := ParseConfig([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if c.State != "/tmp/${HOME}/a$b.db" {
		t.Fatalf("state = %q", c.State)
	}
}

// A Config built in Go is validated by Open with keys named as in the list form.
func TestConfigGoStructValidation(t *testing.T) {
	c := &Config{State: filepath.Join(t.TempDir(), "s"), Pipelines: []PipelineConfig{{Name: "a", Source: SourceConfig{Type: "mysql"}}}}
	_, err := Open(c, nil)
	for _, w := range []string{"pipelines[0].source.dsn: is required", "pipelines[0].source.tables: MySQL needs", "pipelines[0].dlq: is required", "pipelines[0].sinks[0]:"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	if _, err := os.Stat(c.State); !os.IsNotExist(err) {
		t.Errorf("a refused configuration created the state file (%v)", err)
	}
}

// The shipped configurations are valid when their variables are set, and build their sources.
func TestConfigExamplesParse(t *testing.T) {
	t.Setenv("TRIBUTARY_PG_DSN", "postgres://postgres@127.0.0.1:35432/postgres")
	t.Setenv("TRIBUTARY_MYSQL_DSN", "tributary:tributary@tcp(127.0.0.1:33306)/test")
	t.Setenv("TRIBUTARY_ES_URL", "http://127.0.0.1:39200")
	t.Setenv("TRIBUTARY_OPENSEARCH_URL", "http://127.0.0.1:39201")
	t.Setenv("TRIBUTARY_KAFKA_BROKERS", "127.0.0.1:39092")
	files, err := filepath.Glob("../examples/cdcmirror/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("example configurations: %v (%v)", files, err)
	}
	for _, f := range files {
		c, err := LoadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.Pipelines {
			src, err := newSource(&c.Pipelines[i], nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			closeSource(src)
		}
	}
}

func TestParseMySQLDSN(t *testing.T) {
	for in, want := range map[string]mysqlDSN{
		"app:p@ss:w@rd@tcp(db.example:3306)/shop?parseTime=true": {user: "app", password: "p@ss:w@rd", addr: "db.example:3306", db: "shop"},
		"app@tcp(db:3307)/":               {user: "app", addr: "db:3307"},
		"mysql://app:p%40ss@db.example/x": {user: "app", password: "p@ss", addr: "db.example:3306", db: "x"},
		"mysql://app:pw@[::1]:3310":       {user: "app", password: "pw", addr: "[::1]:3310"},
	} {
		d, err := parseMySQLDSN(in)
		if err != nil || d != want {
			t.Errorf("parsed %+v, %v; want %+v", d, err, want)
		}
	}
	for _, bad := range []string{"app:secretpw@db.example:3306/shop", "secretpw", "app:secretpw@tcp(db.example:3306",
		":secretpw@tcp(h:1)/x", "mysql://:secretpw@h:1/x", "mysql://app:secretpw@h:x/y", "app:secretpw@tcp(h:1)/x?tls=true",
		"app:secretpw@tcp(h)/x", "mysql://app:secretpw@h:1/x/y"} {
		_, err := parseMySQLDSN(bad)
		if err == nil {
			t.Fatalf("accepted a malformed DSN")
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Fatalf("error quotes the DSN: %v", err)
		}
	}
}

// The sink's keyless key is accepted in the sinks: entry.
func TestConfigKeyless(t *testing.T) {
	setTestEnv(t)
	c, err := ParseConfig([]byte(strings.Replace(validConfig, "      index:", "      keyless: dead_letter\n      index:", 1)))
	if err != nil || c.Pipelines[0].Sink.Keyless != "dead_letter" {
		t.Fatalf("keyless: %v", err)
	}
}

// A file that is not YAML, or not a mapping, is one problem, with the line where it is known.
func TestConfigNotYAML(t *testing.T) {
	for text, want := range map[string]string{
		"pipeline: [unclosed\n": "line ",
		"- a\n- b\n":            "must be a YAML mapping",
	} {
		_, err := ParseConfig([]byte(text))
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want one problem containing %q", text, err, want)
		}
	}
}

// debeziumConfig is a pipeline reading Debezium's topics instead of a database.
const debeziumConfig = `
pipeline: shop
source:
  type: debezium
  name: shop
  brokers: [127.0.0.1:9092]
  topic_pattern: 'shop\.public\..*'
  group: shop-mirror
  infer_types: true
  positioning: gtid
  session_timeout: 10s
  instance_id: host-1
  kafka_tls: {ca_file: /etc/kafka/ca.pem}
  kafka_sasl: {mechanism: SCRAM-SHA-512, username: mirror, password: "${MIRROR_TEST_PASSWORD}"}
sinks:
  - type: elasticsearch
    config: {id: es, url: "${MIRROR_TEST_URL}", index: "{table}", auth: {type: none}}
state: /tmp/state.db
dlq: /tmp/dlq.jsonl
`

func TestConfigDebezium(t *testing.T) {
	setTestEnv(t)
	c, err := ParseConfig([]byte(debeziumConfig))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pipelines[0]
	s := p.Source
	if s.Type != "debezium" || len(s.Brokers) != 1 || s.TopicPattern != `shop\.public\..*` || s.Group != "shop-mirror" || !s.InferTypes ||
		s.Positioning != "gtid" || s.SessionTimeout != 10*time.Second || s.InstanceID != "host-1" {
		t.Fatalf("decoded %+v", s)
	}
	if s.KafkaTLS == nil || s.KafkaTLS.CAFile != "/etc/kafka/ca.pem" || s.KafkaSASL == nil || string(s.KafkaSASL.Password) != testPassword {
		t.Fatalf("kafka_tls %+v, kafka_sasl set %v", s.KafkaTLS, s.KafkaSASL != nil)
	}
	if q := debeziumQueue(&p); q.TLS == nil || q.SASL == nil || q.SASL.Mechanism != "SCRAM-SHA-512" {
		t.Fatal("kafka_tls and kafka_sasl do not reach the consumer's Config")
	}
	p.Source.KafkaTLS = nil // its CA file does not exist here: newSource would read it
	if debeziumGroup(&p) != "shop-mirror" {
		t.Fatalf("group %q", debeziumGroup(&p))
	}
	p.Source.Group = ""
	if debeziumGroup(&p) != "tributary-shop" {
		t.Fatalf("default group %q", debeziumGroup(&p))
	}
	src, err := newSource(&p, nil, nil)
	if err != nil {
		t.Fatalf("newSource: %v", err)
	}
	if _, ok := src.(cdc.LagReporter); !ok {
		t.Error("a debezium source does not report its group's lag")
	}
	closeSource(src)
	for _, catalog := range []string{"postgres", "mysql"} {
		q := p
		q.Source.Catalog, q.Source.DSN = catalog, "postgres://u@127.0.0.1:1/db"
		if catalog == "mysql" {
			q.Source.DSN = "u:p@tcp(127.0.0.1:1)/db"
		}
		src, err := newSource(&q, nil, nil)
		if err != nil {
			t.Fatalf("newSource with a %s catalog: %v", catalog, err)
		}
		closeSource(src)
	}
	for _, tc := range []struct{ old, new, want string }{
		{"  brokers: [127.0.0.1:9092]\n", "", "source.brokers: is required"},
		{"[127.0.0.1:9092]", "[kafka]", "source.brokers[0]: is not host:port"},
		{"  topic_pattern: 'shop\\.public\\..*'\n", "", "source.topics: is required"},
		{"  group: shop-mirror", "  topics: [a]", "source.topic_pattern: is set beside topics"},
		{"'shop\\.public\\..*'", "'(('", "source.topic_pattern: is not a regular expression"},
		{"  group: shop-mirror", "  tables: [a.b]", "source.tables: is not a debezium setting"},
		{"  infer_types: true", "  infer_types: maybe", "source.infer_types: must be true or false"},
		{"positioning: gtid", "positioning: lsn", "source.positioning: must be gtid or file"},
		{"type: debezium", "type: postgres", "source.type: brokers, topics, topic_pattern, group, infer_types, session_timeout, instance_id, catalog, decimal_handling, plain_dates, kafka_tls and kafka_sasl are debezium settings"},
		{"mechanism: SCRAM-SHA-512", "mechanism: GSSAPI", "source.kafka_sasl.mechanism: must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{"{ca_file: /etc/kafka/ca.pem}", "{cert_file: /x.pem}", "source.kafka_tls: cert_file and key_file go together"},
		{"{ca_file: /etc/kafka/ca.pem}", "{ca_flie: x}", `unknown key "ca_flie"`},
		{"session_timeout: 10s", "session_timeout: -1s", "source.session_timeout: must not be negative"},
		{"  group: shop-mirror", "  dsn: x", "source.catalog: is required with dsn:"},
		{"  group: shop-mirror", "  catalog: postgres", "source.dsn: is required with catalog:"},
		{"  group: shop-mirror", "  catalog: oracle\n  dsn: x", "source.catalog: must be postgres or mysql"},
		{"  group: shop-mirror", "  catalog: mysql\n  dsn: nonsense", "source.dsn: a MySQL DSN is"},
		{"  group: shop-mirror", "  decimal_handling: double", "source.decimal_handling: must be precise or string"},
	} {
		text := strings.Replace(debeziumConfig, tc.old, tc.new, 1)
		if text == debeziumConfig {
			t.Fatalf("%q: the replacement did not apply", tc.old)
		}
		_, err := ParseConfig([]byte(text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q -> %q: error %v, want %q", tc.old, tc.new, err, tc.want)
		}
	}
}

func closeSource(src cdc.Source) {
	if c, ok := src.(io.Closer); ok {
		c.Close()
	}
}
