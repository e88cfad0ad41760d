package mirror

import (
	"errors"
	"strings"
	"testing"
)

// The keys each section knows, as the error messages list them.
const (
	knownTop      = "state, state_store, pipelines, pipeline, source, sinks, dlq, runner"
	knownPipeline = "name, source, sinks, dlq, runner"
	knownSource   = "type, dsn, name, tables, snapshot, slot, publication, snapshot_chunk, flavor, server_id, positioning, " +
		"signal_table, brokers, topics, topic_pattern, group, infer_types, session_timeout, instance_id, catalog, " +
		"decimal_handling, plain_dates, kafka_tls, kafka_sasl"
	knownRunner = "batch_max_events, batch_max_bytes, batch_max_wait, batch_idle_wait, max_in_flight, backoff_min, backoff_max, " +
		"stall_threshold, backpressure_threshold, unanswered_threshold, lag_threshold, lag_interval"
	knownEntry  = "type, config"
	knownConfig = "id, url, urls, index, id_fields, id_separator, auth, auto_create_index, keyless, tls, request_timeout, " +
		"connect_timeout, batch, concurrency, delete_retention, item_retries, refresh, number_of_shards, " +
		"number_of_replicas, mapping, read_alias, retire_after, shared_owner"
)

// everyKeyConfig is a valid one-pipeline configuration with a line for each section a test
// below misspells a key of; line numbers are those of the file (the first line is 1).
const everyKeyConfig = `pipeline: orders
source:
  type: debezium
  brokers: [k:9092]
  topics: [t]
  kafka_tls:
    ca_file: /ca.pem
  kafka_sasl:
    mechanism: PLAIN
    username: u
    password: p
sinks:
  - type: elasticsearch
    config:
      id: es
      url: http://127.0.0.1:9200
      index: i
      number_of_replicas: 1
      auth:
        type: none
      tls:
        server_name: es
      batch:
        max_docs: 100
      mapping:
        decimal: keyword
state: /tmp/s.db
dlq: /tmp/d.jsonl
runner:
  batch_max_wait: 50ms
`

// TestConfigErrorFormat: a misspelt key in any section, mirror's own or the sink entry's, is
// reported in one format -- one line number of the file, the section, a did-you-mean when a
// known key is close (edit distance, '-' for '_', case), the known keys -- and so is a value
// of the wrong type, with its key's path. A key that an unknown one is likely a misspelling
// of is not reported again as missing. The whole error is asserted.
func TestConfigErrorFormat(t *testing.T) {
	if _, err := ParseConfig([]byte(everyKeyConfig)); err != nil {
		t.Fatalf("the base configuration: %v", err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"top level", "state:", "stat:", `line 27: unknown key "stat" at the top level: did you mean "state"? (known: ` + knownTop + `)`},
		{"top level, no suggestion", "dlq: /tmp/d.jsonl", "dlq: /tmp/d.jsonl\nzzz: 1", `line 29: unknown key "zzz" at the top level: (known: ` + knownTop + `)`},
		{"source", "  topics: [t]", "  topcis: [t]", `line 5: unknown key "topcis" in source: did you mean "topics"? (known: ` + knownSource + `)`},
		{"source, a new key", "  topics: [t]", "  topics: [t]\n  topic_patern: x", `line 6: unknown key "topic_patern" in source: did you mean "topic_pattern"? (known: ` + knownSource + `)`},
		{"source, dash", "  topics: [t]", "  topics: [t]\n  plain-dates: true", `line 6: unknown key "plain-dates" in source: did you mean "plain_dates"? (known: ` + knownSource + `)`},
		{"source, case", "  topics: [t]", "  topics: [t]\n  Group: g", `line 6: unknown key "Group" in source: did you mean "group"? (known: ` + knownSource + `)`},
		{"source.kafka_tls", "    ca_file:", "    cafile:", `line 7: unknown key "cafile" in source.kafka_tls: did you mean "ca_file"? (known: ca_file, cert_file, key_file, server_name)`},
		{"source.kafka_sasl", "    password: p", "    password: p\n    pasword: q", `line 12: unknown key "pasword" in source.kafka_sasl: did you mean "password"? (known: mechanism, username, password)`},
		{"runner", "  batch_max_wait:", "  batch_max_wiat:", `line 30: unknown key "batch_max_wiat" in runner: did you mean "batch_max_wait"? (known: ` + knownRunner + `)`},
		{"sink entry", "  - type: elasticsearch", "  - tpye: elasticsearch", `line 13: unknown key "tpye" in sinks[0]: did you mean "type"? (known: ` + knownEntry + `)`},
		{"sink config", "      number_of_replicas: 1", "      number_of_replica: 1", `line 18: unknown key "number_of_replica" in sinks[0].config: did you mean "number_of_replicas"? (known: ` + knownConfig + `)`},
		{"sink auth", "        type: none", "        typ: none", `line 20: unknown key "typ" in sinks[0].config.auth: did you mean "type"? (known: type, username, password, api_key)`},
		{"sink tls", "        server_name: es", "        servername: es", `line 22: unknown key "servername" in sinks[0].config.tls: did you mean "server_name"? (known: ca_file, ca, cert_file, cert, key_file, key, server_name)`},
		{"sink batch", "        max_docs: 100", "        max-docs: 100", `line 24: unknown key "max-docs" in sinks[0].config.batch: did you mean "max_docs"? (known: max_docs, max_bytes)`},
		{"sink mapping", "        decimal: keyword", "        decimals: keyword", `line 26: unknown key "decimals" in sinks[0].config.mapping: did you mean "decimal"? (known: decimal, json, uint64)`},
		{"sink value of the wrong type", "        max_docs: 100", "        max_docs: many", `line 24: sinks[0].config.batch.max_docs: must be a whole number`},
		{"sink duration", "      index: i", "      index: i\n      request_timeout: soon", `line 18: sinks[0].config.request_timeout: not a duration (use e.g. "30s", "24h")`},
		{"sink invalid value", "        type: none", "        type: basic", `line 19: sinks[0].config.auth: type basic needs username and password`},
		{"sink invalid list element", "      url: http://127.0.0.1:9200", "      urls: [http://127.0.0.1:9200, x]", `line 16: sinks[0].config: urls[1] must be an http:// or https:// address`},
		{"sink entry type", "  - type: elasticsearch", "  - type: kafka", `line 13: sinks[0].type: must be "elasticsearch"`},
		{"mirror value of the wrong type", "  batch_max_wait: 50ms", "  batch_max_events: many", `line 30: runner.batch_max_events: must be a whole number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(everyKeyConfig, tc.old, tc.new, 1)
			if text == everyKeyConfig {
				t.Fatal("the test's replacement did not apply")
			}
			_, err := ParseConfig([]byte(text))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}
}

// TestConfigErrorFormatPipelines: the list form names each entry's sections by its index,
// with lines of the file.
func TestConfigErrorFormatPipelines(t *testing.T) {
	setTestEnv(t)
	for _, tc := range []struct{ name, old, new, want string }{
		{"pipeline entry", "    dlq: /tmp/maria.dlq", "    dlqq: /tmp/maria.dlq",
			"line 25: unknown key \"dlqq\" in pipelines[1]: did you mean \"dlq\"? (known: " + knownPipeline + ")"},
		{"second pipeline's sink", `index: "my-{table}"`, `indx: "my-{table}"`,
			`line 24: unknown key "indx" in pipelines[1].sinks[0].config: did you mean "index"? (known: ` + knownConfig + `)`},
		{"second pipeline's runner", "{unanswered_threshold: 15s}", "{unanswered_treshold: 15s}",
			`line 26: unknown key "unanswered_treshold" in pipelines[1].runner: did you mean "unanswered_threshold"? (known: ` + knownRunner + `)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(twoPipelines, tc.old, tc.new, 1)
			if text == twoPipelines {
				t.Fatal("the test's replacement did not apply")
			}
			_, err := ParseConfig([]byte(text))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}
