package main

import (
	"strings"
	"testing"
)

// everySectionConfig is a valid configuration with a line in each section a test below
// misspells a key of; line numbers are the file's (the first line is 1).
const everySectionConfig = `mode: all
listen:
  grpc: 127.0.0.1:0
  metrics: "off"
limits:
  max_items: 100
service:
  retry_attempts: 2
coalesce:
  max_batch: 10
lua:
  timeout: 1s
health:
  interval: 5s
shutdown:
  timeout: 5s
log:
  level: info
stores:
  main:
    kind: elasticsearch
    urls: ["https://h:9200"]
    tls:
      server_name: es
    health:
      dataset: probe
    queue:
      kind: kafka
      brokers: [k:9092]
      create_topics:
        partitions: 3
      tls:
        server_name: kafka
      sasl:
        mechanism: PLAIN
        username: u
        password: p
      worker:
        max_attempts: 3
`

// TestConfigErrorFormat: a misspelt key in any section is reported in the one format of the
// project's configuration errors -- one line of the file, the section by its path, a
// did-you-mean when a known key is close ('-' for '_', case, edit distance), the known keys
// -- and so are values of the wrong type and invalid values, by their key paths with their
// lines. The whole error is asserted.
func TestConfigErrorFormat(t *testing.T) {
	if _, err := parseConfig([]byte(everySectionConfig)); err != nil {
		t.Fatalf("the base configuration: %v", err)
	}
	const (
		store = "kind, uri, metadata_field, max_concurrency, ferretdb, urls, dataset_ttl, skip_dataset_check, username, password, api_key, timeout, tls, health, queue"
		queue = "kind, topic, dead_letter_topic, group, partitions, brokers, client_id, dial_timeout, request_timeout, delivery_timeout, max_fetch, fetch_max_wait, session_timeout, create_topics, tls, sasl, worker"
	)
	for _, tc := range []struct{ name, old, new, want string }{
		{"top level", "mode: all", "mdoe: all", `line 1: unknown key "mdoe" at the top level: did you mean "mode"? (known: mode, listen, limits, service, coalesce, lua, health, shutdown, log, stores)`},
		{"listen", "  metrics:", "  Metrics:", `line 4: unknown key "Metrics" in listen: did you mean "metrics"? (known: grpc, metrics, reflection)`},
		{"limits", "  max_items:", "  max-items:", `line 6: unknown key "max-items" in limits: did you mean "max_items"? (known: max_request_bytes, max_response_bytes, max_document_bytes, max_items)`},
		{"service", "  retry_attempts:", "  retry_attempt:", `line 8: unknown key "retry_attempt" in service: did you mean "retry_attempts"? (known: merge_budget, retry_attempts, backoff_base, backoff_max, deadline_reserve)`},
		{"coalesce", "  max_batch:", "  max_bacth:", `line 10: unknown key "max_bacth" in coalesce: did you mean "max_batch"? (known: disabled, window, max_batch, queue_limit, max_in_flight)`},
		{"lua", "  timeout: 1s", "  timout: 1s", `line 12: unknown key "timout" in lua: did you mean "timeout"? (known: max_instructions, timeout, max_input_bytes, max_output_bytes, max_depth, max_memory_bytes, max_call_depth, max_program_bytes, max_cached_programs)`},
		{"health", "  interval: 5s", "  intervall: 5s", `line 14: unknown key "intervall" in health: did you mean "interval"? (known: interval, timeout)`},
		{"shutdown", "  timeout: 5s", "  timeout: 5s\n  drain: 1s", `line 17: unknown key "drain" in shutdown: (known: timeout, drain_delay)`},
		{"log", "  level: info", "  levle: info", `line 18: unknown key "levle" in log: did you mean "level"? (known: level)`},
		{"a store", "    urls:", "    ulrs:", `line 22: unknown key "ulrs" in stores.main: did you mean "urls"? (known: ` + store + `)`},
		{"a store, two keys as close", "    kind: elasticsearch", "    kind: elasticsearch\n    url: x", `line 22: unknown key "url" in stores.main: (known: ` + store + `)`},
		{"a store's tls", "      server_name: es", "      server-name: es", `line 24: unknown key "server-name" in stores.main.tls: did you mean "server_name"? (known: ca_file, ca, cert_file, key_file, server_name)`},
		{"a store's health", "      dataset: probe", "      datset: probe", `line 26: unknown key "datset" in stores.main.health: did you mean "dataset"? (known: namespace, dataset, key)`},
		{"a queue", "      brokers:", "      broker:", `line 29: unknown key "broker" in stores.main.queue: did you mean "brokers"? (known: ` + queue + `)`},
		{"create_topics", "        partitions: 3", "        partition: 3", `line 31: unknown key "partition" in stores.main.queue.create_topics: did you mean "partitions"? (known: partitions, replication_factor)`},
		{"a queue's tls", "        server_name: kafka", "        servername: kafka", `line 33: unknown key "servername" in stores.main.queue.tls: did you mean "server_name"? (known: ca_file, cert_file, key_file, server_name, insecure_skip_verify)`},
		{"sasl", "        password: p", "        password: p\n        pasword: q", `line 38: unknown key "pasword" in stores.main.queue.sasl: did you mean "password"? (known: mechanism, username, password)`},
		{"worker", "        max_attempts: 3", "        max_atempts: 3", `line 39: unknown key "max_atempts" in stores.main.queue.worker: did you mean "max_attempts"? (known: max_attempts, backoff_base, backoff_max, commit_timeout)`},
		{"a value of the wrong type", "  max_items: 100", "  max_items: many", `line 6: limits.max_items: must be a whole number`},
		{"a duration", "  interval: 5s", "  interval: soon", `line 14: health.interval: must be a duration such as "30s"`},
		{"a list", `    urls: ["https://h:9200"]`, `    urls: https://h:9200`, `line 22: stores.main.urls: must be a list`},
		{"an invalid value", "  level: info", "  level: loud", `line 18: log.level: must be debug, info, warn or error`},
		{"an invalid value in a store", "    kind: elasticsearch", "    kind: solr", `line 21: stores.main.kind: must be memory, mongodb, elasticsearch or opensearch`},
		{"an unset variable", "  level: info", "  level: ${RECORDSVC_TEST_SURELY_UNSET}", `line 18: log.level: environment variable RECORDSVC_TEST_SURELY_UNSET is not set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(everySectionConfig, tc.old, tc.new, 1)
			if text == everySectionConfig {
				t.Fatal("the test's replacement did not apply")
			}
			_, err := parseConfig([]byte(text))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}
