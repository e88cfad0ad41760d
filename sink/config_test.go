package sink

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/statestore"
)

const specYAML = `
type: elasticsearch
config:
  id: es-orders
  url: "https://es:9200"           # HTTP(S) endpoint
  index: "cdc-{db}.{table}"        # template or static name
  auth:
    type: basic                    # basic | api_key | none
    username: elastic
    password: "${ES_PASSWORD}"     # ${ENV} expansion
`

func TestParseConfigSpecExample(t *testing.T) {
	t.Setenv("ES_PASSWORD", "s3cr3t-Pa55")
	c, err := ParseConfig([]byte(specYAML))
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "es-orders" || c.URL != "https://es:9200" || c.Index != "cdc-{db}.{table}" ||
		c.Auth.Type != AuthBasic || c.Auth.Username != "elastic" || string(c.Auth.Password) != "s3cr3t-Pa55" {
		t.Fatalf("parsed %+v", c)
	}
	if !c.AutoCreate() || c.IDSeparator != DefaultIDSeparator || time.Duration(c.DeleteRetention) != DefaultDeleteRetention {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestParseConfigSpecExamples(t *testing.T) {
	t.Setenv("ES_API_KEY", "VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw==")
	c, err := ParseConfig([]byte(`
type: elasticsearch
config:
  id: es-customers
  url: "https://my-cluster.es.cloud:9243"
  index: customers               # static index (no placeholders)
  id_fields: [customer_id]       # override the source PK
  auth:
    type: api_key
    api_key: "${ES_API_KEY}"
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.Type != AuthAPIKey || len(c.IDFields) != 1 || c.IDFields[0] != "customer_id" {
		t.Fatalf("parsed %+v", c)
	}
	c, err = ParseConfig([]byte(`
type: elasticsearch
config:
  id: es-dev
  url: "http://elasticsearch:9200"
  index: "cdc-{db}.{table}"      # per-table indices
  auth:
    type: none
  auto_create_index: false
  tls: {ca_file: /etc/ca.pem}
  request_timeout: 5s
  batch: {max_docs: 100, max_bytes: 1048576}
  concurrency: 4
  delete_retention: 72h
  mapping: {decimal: keyword, uint64: keyword, json: flattened}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.AutoCreate() || c.Concurrency != 4 || time.Duration(c.DeleteRetention) != 72*time.Hour || c.Batch.MaxDocs != 100 ||
		time.Duration(c.RequestTimeout) != 5*time.Second || c.TLS.CAFile != "/etc/ca.pem" || c.Mapping.Decimal != "keyword" {
		t.Fatalf("parsed %+v", c)
	}
}

func TestParseConfigUnsetVariableIsNamed(t *testing.T) {
	_, err := ParseConfig([]byte(strings.Replace(specYAML, "ES_PASSWORD", "TRIBUTARY_SURELY_UNSET_VAR", 1)))
	if err == nil || !strings.Contains(err.Error(), "TRIBUTARY_SURELY_UNSET_VAR") || !strings.Contains(err.Error(), "not set") {
		t.Fatalf("got %v, want an error naming the unset variable", err)
	}
}

func TestParseConfigExpansionKeepsText(t *testing.T) {
	// A password that looks like YAML structure or a number arrives as written.
	for _, pw := range []string{"123", "yes", "a: b\nc", "{x}", "$notavar", "null"} {
		t.Setenv("ES_PASSWORD", pw)
		c, err := ParseConfig([]byte(specYAML))
		if err != nil {
			t.Fatalf("password %q: %v", pw, err)
		}
		if string(c.Auth.Password) != pw {
			t.Fatalf("password %q arrived as %q", pw, c.Auth.Password)
		}
	}
	t.Setenv("N", "7")
	_, err := ParseConfig([]byte("type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: \"i$${x}\"\n  concurrency: ${N}\n"))
	if err == nil || !strings.Contains(err.Error(), "index") {
		t.Fatalf("index with a literal ${ should fail the naming rules (braces), got %v", err)
	}
	c, err := ParseConfig([]byte("type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: i\n  concurrency: ${N}\n"))
	if err != nil || c.Concurrency != 7 {
		t.Fatalf("concurrency from ${N}: %v %+v", err, c)
	}
}

// TestParseConfigKeyless: keyless defaults to refuse and accepts dead_letter.
func TestParseConfigKeyless(t *testing.T) {
	for y, want := range map[string]string{
		"type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i}\n":                       KeylessRefuse,
		"type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, keyless: refuse}\n":      KeylessRefuse,
		"type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, keyless: dead_letter}\n": KeylessDeadLetter,
	} {
		c, err := ParseConfig([]byte(y))
		if err != nil || c.Keyless != want {
			t.Errorf("%q: keyless %q, %v; want %q", y, c.Keyless, err, want)
		}
	}
}

func TestParseConfigValidation(t *testing.T) {
	cases := map[string]string{
		`type: must be "elasticsearch"`: "type: kafka\nconfig: {id: a, url: 'http://x:1', index: i}\n",
		"url (or urls) is required":     "type: elasticsearch\nconfig: {id: a, index: i}\n",
		"set url or urls, not both":     "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', urls: ['http://y:1'], index: i}\n",
		"urls[1] must be an http":       "type: elasticsearch\nconfig: {id: a, urls: ['http://x:1', 'x:1'], index: i}\n",
		"urls[0] must not carry":        "type: elasticsearch\nconfig: {id: a, urls: ['http://u:p@x:1'], index: i}\n",
		"urls[1] repeats urls[0]":       "type: elasticsearch\nconfig: {id: a, urls: ['http://x:1', 'http://x:1'], index: i}\n",
		"all http:// or all https://":   "type: elasticsearch\nconfig: {id: a, urls: ['http://x:1', 'https://y:1'], index: i}\n",
		"urls[0] is empty":              "type: elasticsearch\nconfig: {id: a, urls: [''], index: i}\n",
		"set cert_file or cert":         "type: elasticsearch\nconfig: {id: a, url: 'https://x:1', index: i, tls: {cert_file: /c, cert: x, key_file: /k}}\n",
		"set key_file or key":           "type: elasticsearch\nconfig: {id: a, url: 'https://x:1', index: i, tls: {cert_file: /c, key_file: /k, key: x}}\n",
		"needs its key":                 "type: elasticsearch\nconfig: {id: a, url: 'https://x:1', index: i, tls: {cert_file: /c}}\n",
		"and a key its certificate":     "type: elasticsearch\nconfig: {id: a, url: 'https://x:1', index: i, tls: {key_file: /k}}\n",
		"cert holds no PEM":             "type: elasticsearch\nconfig: {id: a, url: 'https://x:1', index: i, tls: {cert: x, key_file: /k}}\n",
		"key holds no PEM":              "type: elasticsearch\nconfig: {id: a, url: 'https://x:1', index: i, tls: {cert_file: /c, key: x}}\n",
		"server_name must be":           "type: elasticsearch\nconfig: {id: a, url: 'https://x:1', index: i, tls: {server_name: 'a b'}}\n",
		"id is required":                "type: elasticsearch\nconfig: {url: 'http://x:1', index: i}\n",
		"http:// or https://":           "type: elasticsearch\nconfig: {id: a, url: 'ftp://x', index: i}\n",
		"unknown placeholder":           "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: 'x-{tabel}'}\n",
		"starts with -, _ or +":         "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: '_x'}\n",
		"contains one of":               "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: 'a b'}\n",
		"needs username and":            "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, auth: {type: basic}}\n",
		"needs api_key":                 "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, auth: {type: api_key}}\n",
		"basic, api_key or none":        "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, auth: {type: kerberos}}\n",
		`line 2: unknown key "idfields" in config: did you mean "id_fields"?`: "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, idfields: [x]}\n",
		"backslash":            "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, id_separator: '\\'}\n",
		"not a duration":       "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, request_timeout: soon}\n",
		"df-w-":                "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: 'df-w-{table}'}\n",
		"must not carry":       "type: elasticsearch\nconfig: {id: a, url: 'http://u:p@x:1', index: i}\n",
		"decimal must be":      "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, mapping: {decimal: float}}\n",
		"keyless must be":      "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, keyless: drop}\n",
		"shared_owner must be": "type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, shared_owner: ' lead'}\n",
	}
	for want, y := range cases {
		_, err := ParseConfig([]byte(y))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", y, err, want)
		}
	}
}

// urls: lists the nodes (Nodes), tls: takes a client certificate and key (files or inline)
// and a server name; the key is a Secret.
func TestParseConfigURLsAndTLS(t *testing.T) {
	const key = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"
	const cert = "-----BEGIN CERTIFICATE-----\nY2VydA==\n-----END CERTIFICATE-----\n"
	t.Setenv("ES_CLIENT_KEY", key)
	c, err := ParseConfig([]byte("type: elasticsearch\nconfig:\n  id: a\n  urls: [https://n1:9200, https://n2:9200, https://n3:9200]\n  index: i\n" +
		"  tls:\n    ca_file: /etc/ca.pem\n    cert: |\n      " + strings.ReplaceAll(strings.TrimSpace(cert), "\n", "\n      ") + "\n" +
		"    key: ${ES_CLIENT_KEY}\n    server_name: es.internal\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Nodes(); len(got) != 3 || got[2] != "https://n3:9200" || c.URL != "" {
		t.Fatalf("nodes %v", got)
	}
	if string(c.TLS.Key) != key || c.TLS.Cert != cert || c.TLS.ServerName != "es.internal" || c.TLS.CAFile != "/etc/ca.pem" {
		t.Fatalf("tls %+v", c.TLS)
	}
	y, _ := yaml.Marshal(c)
	for _, o := range []string{c.String(), fmt.Sprintf("%v %+v %#v", c, c.TLS, c.TLS), string(y)} {
		if strings.Contains(o, "c2VjcmV0") {
			t.Fatalf("the key leaked: %s", o)
		}
	}
	if c, err := ParseConfig([]byte("type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, tls: {cert_file: /c, key_file: /k}}\n")); err != nil || len(c.Nodes()) != 1 {
		t.Fatalf("url with cert_file and key_file: %v %v", err, c.Nodes())
	}
	// Files are read by New, and a missing one is named by its key.
	_, err = New(Config{ID: "a", URL: "https://x:1", Index: "i", TLS: TLS{CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem"}}, "p", statestore.NewMemory(), nil)
	if err == nil || !strings.Contains(err.Error(), "reading cert_file") {
		t.Fatalf("missing cert_file: %v", err)
	}
	// A key that does not match its certificate: named, never quoted.
	_, err = New(Config{ID: "a", URL: "https://x:1", Index: "i", TLS: TLS{Cert: cert, Key: Secret(key)}}, "p", statestore.NewMemory(), nil)
	if err == nil || strings.Contains(err.Error(), "c2VjcmV0") || !strings.Contains(err.Error(), "client certificate") {
		t.Fatalf("a bad pair: %v", err)
	}
}

func TestConfigNeverShowsCredentials(t *testing.T) {
	const pw, key = "hunter2-very-secret", "QVBJLUtFWS1zZWNyZXQ="
	t.Setenv("ES_PASSWORD", pw)
	c, err := ParseConfig([]byte(specYAML))
	if err != nil {
		t.Fatal(err)
	}
	c.Auth.APIKey = key // both set, to check both fields
	j, _ := json.Marshal(c)
	y, _ := yaml.Marshal(c)
	jp, _ := json.Marshal(&c)
	outs := []string{
		c.String(), c.GoString(), string(j), string(jp), string(y),
		fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q %x", c, c, c, c, c, c),
		fmt.Sprintf("%v %+v %#v %s %q %x %X", c.Auth, c.Auth, c.Auth, c.Auth, c.Auth, c.Auth, c.Auth),
		fmt.Sprintf("%v %+v %#v %s %q %x", &c, &c, &c, &c, &c, &c),
		fmt.Sprintf("%v %s %q %x %#v", c.Auth.Password, c.Auth.Password, c.Auth.Password, c.Auth.Password, c.Auth.Password),
	}
	c.Auth.Type = "bogus"
	outs = append(outs, fmt.Sprint(c.Validate()))
	for _, o := range outs {
		if strings.Contains(o, pw) || strings.Contains(o, key) || strings.Contains(o, "68756e746572") {
			t.Fatalf("credential leaked: %s", o)
		}
	}
	if !strings.Contains(c.String(), redacted) {
		t.Fatalf("String does not say the password is set: %s", c.String())
	}
}

func TestParseConfigErrorsDoNotQuoteSecrets(t *testing.T) {
	// A secret expanded into a field of the wrong type must not be echoed by the decoder.
	t.Setenv("SECRET_N", "topsecret-value")
	_, err := ParseConfig([]byte("type: elasticsearch\nconfig:\n  id: a\n  url: http://x:1\n  index: i\n  concurrency: ${SECRET_N}\n"))
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("got %v", err)
	}
}

func TestValidationErrorsDoNotQuoteValues(t *testing.T) {
	// Any value may come from ${ENV}; a value refused by validation is named by its field only.
	t.Setenv("SECRET_V", "topsecret-value")
	want := map[string]string{"auth type": "auth: type", "duration": "duration", "decimal": "decimal must",
		"json": "json must", "uint64": "uint64 must", "entry type": "type: must", "shared owner": "shared_owner must"}
	for name, body := range map[string]string{
		"auth type":    "  auth:\n    type: ${SECRET_V}\n",
		"duration":     "  request_timeout: ${SECRET_V}\n",
		"decimal":      "  mapping:\n    decimal: ${SECRET_V}\n",
		"json":         "  mapping:\n    json: ${SECRET_V}\n",
		"uint64":       "  mapping:\n    uint64: ${SECRET_V}\n",
		"shared owner": "  shared_owner: \"${SECRET_V}\\t\"\n",
		"entry type":   "",
	} {
		typ := "elasticsearch"
		if name == "entry type" {
			typ = "${SECRET_V}"
		}
		_, err := ParseConfig([]byte("type: " + typ + "\nconfig:\n  id: a\n  url: http://x:1\n  index: i\n" + body))
		if err == nil || strings.Contains(err.Error(), "topsecret") || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: got %v, want an error naming %q without the value", name, err, want[name])
		}
	}
}

// TestParseConfigSharedOwner: shared_owner is read as written, and refused when empty of
// printable text, too long or padded, naming the key only.
func TestParseConfigSharedOwner(t *testing.T) {
	c, err := ParseConfig([]byte("type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i, shared_owner: orders-consumers}\n"))
	if err != nil || c.SharedOwner != "orders-consumers" {
		t.Fatalf("parsed %+v, %v", c, err)
	}
	if c, err := ParseConfig([]byte("type: elasticsearch\nconfig: {id: a, url: 'http://x:1', index: i}\n")); err != nil || c.SharedOwner != "" {
		t.Fatalf("default: %q, %v", c.SharedOwner, err)
	}
	for _, bad := range []string{" Qz7", "Qz7 ", "Qz7\x01", strings.Repeat("Qz7", 100)} {
		c := Config{ID: "a", URL: "http://x:1", Index: "i", SharedOwner: bad}
		err := c.Normalize()
		if err == nil || !strings.Contains(err.Error(), "shared_owner") || strings.Contains(err.Error(), "Qz7") {
			t.Errorf("%q: %v, want a shared_owner error quoting nothing", bad, err)
		}
	}
}
