package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/testenv"
)

func TestConfigUnknownKeysNamed(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listne: {grpc: 127.0.0.1:0}\nstores: {m: {kind: memory}}", `line 1: unknown key "listne" at the top level: did you mean "listen"? (known: mode, listen, limits, service, coalesce, lua, health, shutdown, log, stores)`},
		{"stores:\n  m:\n    kind: memory\n    urll: [x]", `line 4: unknown key "urll" in stores.m: did you mean "urls"? (known: kind, uri, metadata_field, max_concurrency, ferretdb, urls, dataset_ttl, skip_dataset_check, username, password, api_key, timeout, tls, health, queue)`},
		{"stores:\n  m:\n    kind: memory\n    queue:\n      kind: kafka\n      brokerz: [a:1]", `line 6: unknown key "brokerz" in stores.m.queue: did you mean "brokers"? (known: kind, topic, dead_letter_topic, group, partitions, brokers, client_id, dial_timeout, request_timeout, delivery_timeout, max_fetch, fetch_max_wait, session_timeout, create_topics, tls, sasl, worker)`},
		{"lua: {max_instruction: 5}\nstores: {m: {kind: memory}}", `line 1: unknown key "max_instruction" in lua: did you mean "max_instructions"?`},
	} {
		_, err := parseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

// TestConfigEveryProblemAtOnce: unknown keys, a value of the wrong type and invalid values
// are reported together, each with its line or field.
func TestConfigEveryProblemAtOnce(t *testing.T) {
	_, err := parseConfig([]byte(`listen: {grpc: 127.0.0.1:0, metrics: "off", bogus: 1}
limits: {max_items: -5}
health: {interval: soon}
stores:
  main: {kind: memory, colour: red}
  other: {kind: nosuch}
extra: true
`))
	if err == nil {
		t.Fatal("a configuration with six problems was accepted")
	}
	for _, want := range []string{
		`line 1: unknown key "bogus" in listen:`,
		`line 5: unknown key "colour" in stores.main: (known: kind,`,
		`line 7: unknown key "extra" at the top level: (known: mode,`,
		`line 3: health.interval: must be a duration such as "30s"`,
		`line 2: limits.max_items: must not be negative`,
		`line 6: stores.other.kind: must be memory`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestConfigInvalidValuesNamed(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"stores: {}", "stores: at least one store is required"},
		{"mode: both\nstores: {m: {kind: memory}}", "mode: must be server, worker or all"},
		{"stores: {m: {kind: mysql}}", "stores.m.kind: must be memory"},
		{"stores: {m: {}}", "stores.m.kind: is required"},
		{"stores: {m: {kind: memory, uri: 'mongodb://x'}}", "stores.m.uri: is a setting of kind mongodb only"},
		{"stores: {m: {kind: mongodb}}", "stores.m.uri: is required"},
		{"stores: {m: {kind: elasticsearch, urls: ['localhost:9200']}}", "stores.m.urls[0]: must be an http"},
		{"stores: {m: {kind: memory, queue: {kind: rabbit}}}", "stores.m.queue.kind: must be memory or kafka"},
		{"stores: {m: {kind: memory, queue: {kind: kafka}}}", "stores.m.queue.brokers: is required"},
		{"stores: {m: {kind: memory, queue: {kind: memory, brokers: ['a:1']}}}", "stores.m.queue.brokers: is a setting of kind kafka only"},
		{"stores: {m: {kind: memory, queue: {kind: kafka, brokers: [a:1], topic: 'a b'}}}", "stores.m.queue.topic: must be"},
		{"stores: {'bad name': {kind: memory}}", "stores.bad name: a store name uses"},
		{"limits: {max_request_bytes: 10}\nstores: {m: {kind: memory}}", "limits.max_request_bytes: must be between"},
		{"limits: {max_items: -1}\nstores: {m: {kind: memory}}", "limits.max_items: must not be negative"},
		{"coalesce: {max_batch: 20000}\nstores: {m: {kind: memory}}", "coalesce.max_batch: exceeds limits.max_items"},
		{"health: {interval: 1s, timeout: 2s}\nstores: {m: {kind: memory}}", "health.timeout: must be positive and at most health.interval"},
		{"listen: {grpc: nowhere}\nstores: {m: {kind: memory}}", "listen.grpc: must be host:port"},
		{"log: {level: loud}\nstores: {m: {kind: memory}}", "log.level: must be"},
		{"lua: {timeout: -1s}\nstores: {m: {kind: memory}}", "lua.timeout: must not be negative"},
		{"shutdown: {drain_delay: -1s}\nstores: {m: {kind: memory}}", "shutdown.drain_delay: must not be negative"},
		{"stores: {m: {kind: memory, queue: {kind: memory, session_timeout: 6s}}}", "stores.m.queue.session_timeout: is a setting of kind kafka only"},
		{"stores: {m: {kind: memory, queue: {kind: kafka, brokers: [\"h:1\"], session_timeout: -6s}}}", "stores.m.queue.session_timeout: must not be negative"},
		{"stores: {a: {kind: memory, queue: {kind: memory, topic: t}}, b: {kind: memory, queue: {kind: memory, topic: t}}}",
			"stores.b.queue.topic: is also the topic of stores.a: a topic carries the records of one store"},
		{"stores: {a: {kind: memory, queue: {kind: kafka, brokers: ['h:1', 'h:2'], topic: t}}, b: {kind: memory, queue: {kind: kafka, brokers: ['h:2', 'h:1'], topic: t}}}",
			"stores.b.queue.topic: is also the topic of stores.a"},
		{"stores: {a: {kind: memory, queue: {kind: memory}}, b: {kind: memory, queue: {kind: memory, dead_letter_topic: tributary.records.a}}}",
			"stores.b.queue.dead_letter_topic: is the record topic of stores.a"},
	} {
		_, err := parseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

// Stores may share a dead-letter topic, and a topic name on different Kafka brokers.
func TestConfigTopicsSharedOnlyWhereSafe(t *testing.T) {
	for _, y := range []string{
		"stores: {a: {kind: memory, queue: {kind: memory, dead_letter_topic: d}}, b: {kind: memory, queue: {kind: memory, dead_letter_topic: d}}}",
		"stores: {a: {kind: memory, queue: {kind: kafka, brokers: ['h:1'], topic: t}}, b: {kind: memory, queue: {kind: kafka, brokers: ['g:1'], topic: t}}}",
		"stores: {a: {kind: memory, queue: {kind: memory, topic: t}}, b: {kind: memory, queue: {kind: kafka, brokers: ['g:1'], topic: t}}}",
	} {
		if _, err := parseConfig([]byte(y)); err != nil {
			t.Errorf("%q: %v, want it accepted", y, err)
		}
	}
}

// A value of the wrong type is reported by its field path; the value itself never appears,
// since after expansion it may be a secret.
func TestConfigTypeErrorsNameFieldNotValue(t *testing.T) {
	t.Setenv("RECORDSVC_TEST_SECRET", "hunter2-secret")
	_, err := parseConfig([]byte("limits:\n  max_items: ${RECORDSVC_TEST_SECRET}\nstores: {m: {kind: memory}}"))
	if err == nil || !strings.Contains(err.Error(), "line 2: limits.max_items: must be a whole number") {
		t.Fatalf("error %v, want it to name limits.max_items", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error quotes the value: %v", err)
	}
	_, err = parseConfig([]byte("health:\n  interval: often\nstores: {m: {kind: memory}}"))
	if err == nil || strings.Contains(err.Error(), "often") || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad duration: error %v, want line 2 and not the value", err)
	}
}

func TestConfigEnvExpansion(t *testing.T) {
	t.Setenv("RECORDSVC_TEST_URI", "mongodb://user:pw@db:27017/")
	t.Setenv("RECORDSVC_TEST_ITEMS", "500")
	c, err := parseConfig([]byte(`
limits:
  max_items: ${RECORDSVC_TEST_ITEMS}
stores:
  m: {kind: mongodb, uri: "${RECORDSVC_TEST_URI}", metadata_field: "meta$${x}"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxItems != 500 || c.Stores["m"].URI != "mongodb://user:pw@db:27017/" || c.Stores["m"].MetadataField != "meta${x}" {
		t.Errorf("expanded to max_items %d, uri %q, metadata_field %q", c.Limits.MaxItems, c.Stores["m"].URI, c.Stores["m"].MetadataField)
	}
	_, err = parseConfig([]byte("stores: {m: {kind: mongodb, uri: '${RECORDSVC_TEST_UNSET_VAR}'}}"))
	if err == nil || !strings.Contains(err.Error(), "environment variable RECORDSVC_TEST_UNSET_VAR is not set") || !strings.Contains(err.Error(), "stores.m.uri") {
		t.Errorf("unset variable: %v, want an error naming it and the field", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig([]byte("stores: {m: {kind: memory, queue: {kind: memory}}}"))
	if err != nil {
		t.Fatal(err)
	}
	q := c.Stores["m"].Queue
	if c.Listen.GRPC != defaultGRPCAddr || c.Limits.MaxRequestBytes != 64<<20 || c.Limits.MaxResponseBytes != 64<<20 ||
		c.Health.Interval != 5*time.Second || q.Topic != "tributary.records.m" || q.DeadLetterTopic != "tributary.records.m.dlq" ||
		q.Group != "tributary-recordsvc-m" || c.Stores["m"].Health.Dataset != defaultHealthDataset {
		t.Errorf("defaults not applied: %+v %+v", c, q)
	}
}

// run starts command and returns its error, for configurations that must not start.
func runCommand(t *testing.T, yamlText string, args ...string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return command(ctx, append([]string{"--config", path}, args...), io.Discard, func(listening) { cancel() })
}

func TestCommandRefusals(t *testing.T) {
	var usage usageError
	if err := command(context.Background(), nil, io.Discard, nil); !errors.As(err, &usage) {
		t.Errorf("no --config: %v, want a usage error", err)
	}
	if err := runCommand(t, "stores: {m: {kind: memory}}", "--mode", "both"); !errors.As(err, &usage) {
		t.Errorf("bad --mode: %v, want a usage error", err)
	}
	if err := runCommand(t, "stores: {m: {kind: memory}}\nbogus: 1"); !errors.As(err, &usage) || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown key: %v, want a usage error naming it", err)
	}
	err := runCommand(t, "listen: {grpc: 127.0.0.1:0, metrics: 'off'}\nstores: {m: {kind: memory, queue: {kind: memory}}}", "--mode", "server")
	if err == nil || !strings.Contains(err.Error(), "stores.m.queue: kind memory") {
		t.Errorf("memory queue in server mode: %v, want a refusal naming stores.m.queue", err)
	}
	// The health record's address is checked against the adapter's own rules (an index name
	// is lowercase) before anything listens; no server is contacted for that.
	err = runCommand(t, "listen: {grpc: 127.0.0.1:0, metrics: 'off'}\nstores: {m: {kind: elasticsearch, urls: ['http://127.0.0.1:1'], health: {dataset: UPPER}}}")
	if err == nil || !strings.Contains(err.Error(), "stores.m.health") {
		t.Errorf("invalid health address: %v, want a refusal naming stores.m.health", err)
	}
	for _, mode := range []string{modeWorker, modeAll} {
		var log testenv.LogBuffer
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte("listen: {grpc: 127.0.0.1:0, metrics: 'off'}\nstores: {m: {kind: memory}}"), 0o600); err != nil {
			t.Fatal(err)
		}
		err = command(context.Background(), []string{"--config", path, "--mode", mode}, &log, func(listening) { t.Errorf("mode %s without queues started", mode) })
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "no store has a queue") {
			t.Errorf("mode %s without queues: %v, want a usage error saying no store has a queue", mode, err)
		}
		if log.String() != "" {
			t.Errorf("mode %s without queues logged before refusing:\n%s", mode, log.String())
		}
	}
}

// TestConfigErrorsFoundByFuzzing: a key with a space was ignored (yaml's message did not
// match), and a value of an explicit tag it does not fit was quoted.
func TestConfigErrorsFoundByFuzzing(t *testing.T) {
	_, err := parseConfig([]byte("stores: {m: {kind: memory}}\n\"un known\": 1\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown key "un known"`) {
		t.Errorf("a key with a space: %v", err)
	}
	_, err = parseConfig([]byte("stores: {m: {kind: memory}}\nservice: {merge_budget: !!float hunter2}\n"))
	var ce *configError
	if err == nil || strings.Contains(err.Error(), "hunter2") || !errors.As(err, &ce) || !strings.Contains(err.Error(), "!!float") {
		t.Errorf("an explicit tag: %v", err)
	}
}
