package sink

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/internal/config/configtest"
)

// FuzzSinkConfig feeds ParseConfig arbitrary YAML, seeded with every sink entry of the
// repository's example configurations, the package tests' entries and edge cases, each also
// with a marker planted in its values (configtest.Plant). ParseConfig must never panic; every
// error is a *ConfigError whose text quotes no value (configtest.CheckNoValue: not a password,
// not a DSN, not even an id); a configuration it accepts is a fixed point: written back as
// YAML (credentials included, "${" escaped as "$${") it parses to the same Config.
func FuzzSinkConfig(f *testing.F) {
	configtest.Setenv(f)
	for _, s := range sinkSeeds(f) {
		for _, p := range configtest.Plant(s) {
			f.Add([]byte(p))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := ParseConfig(doc)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("not a *ConfigError: %T %v", err, err)
			}
			configtest.CheckNoValue(t, doc, err)
			return
		}
		again := encodeSinkEntry(t, c)
		c2, err := ParseConfig(again)
		if err != nil {
			t.Fatalf("the accepted configuration written back is refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("written back and read again it changes:\n%#v\n%#v\n%s", c, c2, again)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a configuration Validate refuses: %v", err)
		}
	})
}

// encodeSinkEntry writes c as a sinks: entry ParseConfig reads back to c: the credentials
// (which marshal as [redacted]) put back, and every "${" escaped so expansion restores it.
func encodeSinkEntry(t *testing.T, c Config) []byte {
	t.Helper()
	b, err := yaml.Marshal(struct {
		Type   string `yaml:"type"`
		Config Config `yaml:"config"`
	}{"elasticsearch", c})
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	setSecret := func(n *yaml.Node, path []string, v Secret) {
		for _, k := range path {
			var next *yaml.Node
			for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					next = n.Content[i+1]
				}
			}
			n = next
		}
		if n != nil {
			n.Value, n.Tag, n.Style = string(v), "!!str", yaml.DoubleQuotedStyle
		}
	}
	doc := root.Content[0]
	setSecret(doc, []string{"config", "auth", "password"}, c.Auth.Password)
	setSecret(doc, []string{"config", "auth", "api_key"}, c.Auth.APIKey)
	setSecret(doc, []string{"config", "tls", "key"}, c.TLS.Key)
	escapeRefs(doc)
	out, err := yaml.Marshal(&root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// escapeRefs writes every "${" of a value as "$${", which expansion turns back into "${".
func escapeRefs(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = strings.ReplaceAll(n.Value, "${", "$${")
		n.Tag = "!!str"
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			continue
		}
		escapeRefs(c)
	}
}

// sinkSeeds: the sinks: entries of the example mirror configurations, the tests' entries and
// edge cases.
func sinkSeeds(f *testing.F) []string {
	seeds := []string{specYAML,
		"type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i}\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: https://es.example:9200\n  index: 'cdc-{db}.{schema}.{table}'\n" +
			"  id_fields: [tenant, id]\n  id_separator: '::'\n  auth: {type: api_key, api_key: \"${ES_API_KEY}\"}\n" +
			"  auto_create_index: false\n  keyless: dead_letter\n  request_timeout: 5s\n  connect_timeout: 1s\n" +
			"  batch: {max_docs: 100, max_bytes: 2048}\n  concurrency: 8\n  delete_retention: 48h\n  item_retries: 0\n" +
			"  refresh: wait_for\n  number_of_shards: 3\n  number_of_replicas: 1\n" +
			"  mapping: {decimal: double, json: flattened, uint64: keyword}\n  tls: {ca_file: /etc/ca.pem}\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: 'literal-$${not_a_var}'\n  auth: {type: basic, username: u, password: 'p$${x}'}\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: i\n  shared_owner: orders-consumers\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: i\n  shared_owner: \"" + configtest.Marker + "\\t\"\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: i\n  concurrency: ${" + configtest.SecretEnv + "}\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: http://u:" + configtest.Marker + "@x:1\n  index: i\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: \"" + configtest.Marker + "-{tabel}\"\n  id_fields: [" + configtest.Marker + ", " + configtest.Marker + "]\n",
		"type: elasticsearch\nconfig: &a {id: a, url: 'http://x:1', index: i, <<: *a}\n",
		"type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, {k: " + configtest.Marker + "}: x}\n",
		"type: elasticsearch\nconfig: !!binary " + configtest.Marker + "\n",
		"type: elasticsearch\nconfig: {id: [a], url: {x: 1}, index: !custom i, concurrency: 1e400, number_of_replicas: -1}\n",
		"type: elasticsearch\nconfig:\n", "type: elasticsearch\n", "", "~", "[]", "- a\n", "type: elasticsearch\nconfig: {}\nname: x\n",
		"type: elasticsearch\nconfig:\n  id: a\n  id: b\n",
		"type: elasticsearch\nconfig:\n  id: a\n  urls: [https://n1:9200, 'https://n2:9200']\n  index: i\n  tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem, server_name: es.internal}\n",
		"type: elasticsearch\nconfig:\n  id: a\n  urls: [http://n1:9200, https://" + configtest.Marker + ":9200, 'http://n1:9200', '']\n  url: http://x:1\n  index: i\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: https://x:1\n  index: i\n  tls:\n    cert: |\n      -----BEGIN CERTIFICATE-----\n      Y2VydA==\n      -----END CERTIFICATE-----\n" +
			"    key: \"-----BEGIN PRIVATE KEY-----\\n" + configtest.Marker + "\\n-----END PRIVATE KEY-----\\n\"\n    server_name: \"" + configtest.Marker + " x\"\n",
		"type: elasticsearch\nconfig:\n  id: a\n  url: https://x:1\n  index: i\n  tls:\n    cert: \"-----BEGIN CERTIFICATE-----\\nY2VydA==\\n-----END CERTIFICATE-----\\n\"\n" +
			"    key: \"-----BEGIN EC PRIVATE KEY-----\\nc2VjcmV0\\n-----END EC PRIVATE KEY-----\\n\"\n",
		"type: elasticsearch\nconfig:\n  tls:\n    ca: |\n      -----BEGIN CERTIFICATE-----\n      " + configtest.Marker + "\n      -----END CERTIFICATE-----\n",
	}
	for _, doc := range configtest.Files(f, "../examples/cdcmirror/postgres.yaml", "../examples/cdcmirror/mysql.yaml",
		"../examples/cdcmirror/postgres-opensearch.yaml", "../examples/cdcmirror/mysql-opensearch.yaml",
		"../examples/cdcmirror/pipelines.yaml") {
		var m struct {
			Sinks     []yaml.Node `yaml:"sinks"`
			Pipelines []struct {
				Sinks []yaml.Node `yaml:"sinks"`
			} `yaml:"pipelines"`
		}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			f.Fatal(err)
		}
		entries := m.Sinks
		for _, p := range m.Pipelines {
			entries = append(entries, p.Sinks...)
		}
		if len(entries) == 0 {
			f.Fatal("an example configuration without a sinks: entry")
		}
		for i := range entries {
			b, err := yaml.Marshal(&entries[i])
			if err != nil {
				f.Fatal(err)
			}
			seeds = append(seeds, string(b))
		}
	}
	return seeds
}
