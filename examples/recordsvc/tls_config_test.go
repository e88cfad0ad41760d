package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/config/configtest"
)

// TestConfigStoreCredentialsAndTLSRefusals: every inconsistent credential or TLS setting of a
// store is refused, naming its field and never its value.
func TestConfigStoreCredentialsAndTLSRefusals(t *testing.T) {
	const v = "VALUE-NEVER-QUOTED"
	for _, tc := range []struct{ yaml, want string }{
		{"stores: {s: {kind: elasticsearch, urls: ['https://h:9200'], tls: {ca_file: " + v + ", ca: " + v + "}}}", "stores.s.tls: ca_file and ca are two ways"},
		{"stores: {s: {kind: elasticsearch, urls: ['https://h:9200'], tls: {ca: " + v + "}}}", "stores.s.tls.ca: must be PEM"},
		{"stores: {s: {kind: elasticsearch, urls: ['https://h:9200'], tls: {cert_file: " + v + "}}}", "stores.s.tls: cert_file and key_file go together"},
		{"stores: {s: {kind: opensearch, urls: ['https://h:9200'], tls: {server_name: 'h:" + v + "'}}}", "stores.s.tls.server_name: must be a host name"},
		{"stores: {s: {kind: elasticsearch, urls: ['http://h:9200'], tls: {server_name: h}}}", "stores.s.tls: is set, and no url is https://"},
		{"stores: {s: {kind: elasticsearch, urls: ['https://h:9200'], username: " + v + "}}", "stores.s: username and password go together"},
		{"stores: {s: {kind: elasticsearch, urls: ['https://h:9200'], username: u, password: " + v + ", api_key: " + v + "}}", "stores.s.api_key: is set, and so are username and password"},
		{"stores: {s: {kind: elasticsearch, urls: ['https://h:9200', 'https://u:" + v + "@h2:9200'], api_key: " + v + "}}", "stores.s.urls[1]: holds user:password@"},
		{"stores: {s: {kind: memory, tls: {ca_file: " + v + "}}}", "stores.s.tls: is not a setting of kind memory"},
		{"stores: {s: {kind: memory, api_key: " + v + "}}", "stores.s.api_key: is a setting of kind elasticsearch or opensearch only"},
		{"stores: {s: {kind: mongodb, uri: 'mongodb://h', password: " + v + "}}", "MongoDB's credentials go in the uri"},
		{"stores: {s: {kind: mongodb, uri: 'mongodb://h/?tls=true&tlsCAFile=/" + v + "', tls: {server_name: h}}}", "stores.s.tls: is set, and the uri has TLS options"},
		{"stores: {s: {kind: mongodb, uri: 'mongodb://h', tls: {key_file: " + v + "}}}", "stores.s.tls: cert_file and key_file go together"},
		{"stores: {s: {kind: elasticsearch, urls: ['https://h:9200'], tls: {ca_fil: x}}}", `line 1: unknown key "ca_fil" in stores.s.tls: did you mean "ca_file"? (known: ca_file, ca, cert_file, key_file, server_name)`},
	} {
		_, err := parseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n  error %v,\n  want it to contain %q", tc.yaml, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), v) {
			t.Errorf("%s: the error quotes a value: %v", tc.yaml, err)
		}
	}
}

// TestConfigStoreCredentialsAndTLSAccepted: the settings CONFIG.md documents are accepted and
// reach the store's options.
func TestConfigStoreCredentialsAndTLSAccepted(t *testing.T) {
	ca := testCAPEM(t)
	t.Setenv("H2B_TEST_CA", ca)
	c, err := parseConfig([]byte(`stores:
  es:
    kind: elasticsearch
    urls: [https://es-1:9200, https://es-2:9200]
    username: recordsvc
    password: secret
    tls: {ca: "${H2B_TEST_CA}", server_name: es.internal}
  os:
    kind: opensearch
    urls: [https://os:9200]
    api_key: a2V5
    tls: {ca_file: /etc/ca.pem, cert_file: /etc/client.pem, key_file: /etc/client.key}
  mongo:
    kind: mongodb
    uri: mongodb://mongo:27017/?authMechanism=MONGODB-X509
    tls: {ca_file: /etc/ca.pem, cert_file: /etc/client.pem, key_file: /etc/client.key, server_name: mongo.internal}
  mongo-uri:
    kind: mongodb
    uri: mongodb://mongo:27017/?tls=true&tlsCAFile=/etc/ca.pem&tlsCertificateKeyFile=/etc/client-and-key.pem
`))
	if err != nil {
		t.Fatal(err)
	}
	es := c.Stores["es"]
	if es.Username != "recordsvc" || es.Password != "secret" || es.TLS == nil || es.TLS.CA != ca || es.TLS.ServerName != "es.internal" {
		t.Fatalf("es store: %+v %+v", es, es.TLS)
	}
	caPEM, cert, key, err := es.TLS.material()
	if err != nil || string(caPEM) != ca || cert != nil || key != nil {
		t.Fatalf("material: %d %v %v %v", len(caPEM), cert, key, err)
	}
}

// TestBuildTLSFileErrors: a TLS file that cannot be used stops the start naming the store and
// the key, never the path or the file's content.
func TestBuildTLSFileErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "SECRET-PATH-not-pem")
	if err := os.WriteFile(notPEM, []byte("SECRET-CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tls  string
		want string
	}{
		{"{ca_file: " + filepath.Join(dir, "SECRET-PATH-missing") + "}", "stores.s: tls.ca_file: the file does not exist"},
		{"{ca_file: " + notPEM + "}", "stores.s: tls.ca_file: is not PEM"},
		{"{ca_file: " + dir + "}", "stores.s: tls.ca_file: is not a regular file"},
		{"{cert_file: " + notPEM + ", key_file: " + notPEM + "}", "stores.s: tls: cert_file and key_file do not hold"},
	} {
		for _, kind := range []string{"elasticsearch", "mongodb"} {
			doc := "stores: {s: {kind: " + kind + ", urls: ['https://127.0.0.1:1'], tls: " + tc.tls + "}}"
			if kind == "mongodb" {
				doc = "stores: {s: {kind: mongodb, uri: 'mongodb://127.0.0.1:1', tls: " + tc.tls + "}}"
			}
			c, err := parseConfig([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", doc, err)
			}
			rt, err := build(context.Background(), c, modeServer, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				_ = rt.closeParts(context.Background())
				t.Fatalf("%s: built", doc)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("%s: %v, want %q and no path or content", doc, err, tc.want)
			}
		}
	}
}

// TestConfigDocExampleParses: CONFIG.md's example configuration is valid as written.
func TestConfigDocExampleParses(t *testing.T) {
	configtest.Setenv(t)
	t.Setenv("OS_CA_PEM", testCAPEM(t))
	t.Setenv("MONGO_PASSWORD", "pw")
	blocks := configtest.MarkdownYAML(configtest.Files(t, "CONFIG.md")[0])
	if len(blocks) == 0 {
		t.Fatal("CONFIG.md has no yaml block")
	}
	for _, b := range blocks {
		if _, err := parseConfig([]byte(b)); err != nil {
			t.Errorf("CONFIG.md example:\n%s\n%v", b, err)
		}
	}
}
