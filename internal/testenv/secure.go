package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Variables of the secured servers (es-secure, os-secure) and of the three-node cluster
// (escluster), written to .testenv/env by `make testenv-up`.
const (
	ESSecureURL                = "TRIBUTARY_ES_SECURE_URL"
	ESSecureCA                 = "TRIBUTARY_ES_SECURE_CA"
	ESSecureUser               = "TRIBUTARY_ES_SECURE_USER"
	ESSecurePassword           = "TRIBUTARY_ES_SECURE_PASSWORD"
	ESSecureClientCert         = "TRIBUTARY_ES_SECURE_CLIENT_CERT"
	ESSecureClientKey          = "TRIBUTARY_ES_SECURE_CLIENT_KEY"
	ESSecureClientUser         = "TRIBUTARY_ES_SECURE_CLIENT_USER"
	OpenSearchSecureURL        = "TRIBUTARY_OPENSEARCH_SECURE_URL"
	OpenSearchSecureCA         = "TRIBUTARY_OPENSEARCH_SECURE_CA"
	OpenSearchSecureUser       = "TRIBUTARY_OPENSEARCH_SECURE_USER"
	OpenSearchSecurePassword   = "TRIBUTARY_OPENSEARCH_SECURE_PASSWORD"
	OpenSearchSecureClientCert = "TRIBUTARY_OPENSEARCH_SECURE_CLIENT_CERT"
	OpenSearchSecureClientKey  = "TRIBUTARY_OPENSEARCH_SECURE_CLIENT_KEY"
	OpenSearchSecureClientUser = "TRIBUTARY_OPENSEARCH_SECURE_CLIENT_USER"
	// ESClusterURLs is the comma-separated http URLs of escluster's three nodes, node 1 first.
	ESClusterURLs = "TRIBUTARY_ES_CLUSTER_URLS"
)

// SecureServer names one of the secured servers.
type SecureServer int

const (
	// SecureES is es-secure: Elasticsearch 8.19 with TLS, the file, native and PKI realms.
	SecureES SecureServer = iota
	// SecureOpenSearch is os-secure: OpenSearch 2.19 with the security plugin.
	SecureOpenSearch
)

func (s SecureServer) String() string {
	if s == SecureOpenSearch {
		return "os-secure"
	}
	return "es-secure"
}

// vars returns the server's variables in the order of Secure's fields.
func (s SecureServer) vars() [7]string {
	if s == SecureOpenSearch {
		return [7]string{OpenSearchSecureURL, OpenSearchSecureCA, OpenSearchSecureUser, OpenSearchSecurePassword,
			OpenSearchSecureClientCert, OpenSearchSecureClientKey, OpenSearchSecureClientUser}
	}
	return [7]string{ESSecureURL, ESSecureCA, ESSecureUser, ESSecurePassword,
		ESSecureClientCert, ESSecureClientKey, ESSecureClientUser}
}

// Secure is how to reach a secured server: its https URL, the PEM file of the CA that signed its
// certificate (and the client's), the admin (an Elasticsearch superuser; OpenSearch all_access,
// allowed to use the security REST API) that creates the users and roles a test needs, and a
// client certificate and key that authenticate as ClientUser when no Authorization header is sent.
type Secure struct {
	Server         SecureServer
	URL            string
	CAFile         string
	User           string
	Password       string
	ClientCertFile string
	ClientKeyFile  string
	ClientUser     string
}

// RequireSecure returns the settings of a secured server, or skips the test when any of its
// variables is unset.
func RequireSecure(t testing.TB, s SecureServer) Secure {
	t.Helper()
	var v [7]string
	for i, name := range s.vars() {
		v[i] = os.Getenv(name)
		if v[i] == "" {
			t.Skipf("integration test skipped: %s is unset (the %s server: run `make testenv-up` and `. .testenv/env`, or `make check`)", name, s)
		}
	}
	return Secure{Server: s, URL: v[0], CAFile: v[1], User: v[2], Password: v[3],
		ClientCertFile: v[4], ClientKeyFile: v[5], ClientUser: v[6]}
}

// CAPool returns a pool holding the server's CA.
func (s Secure) CAPool() (*x509.CertPool, error) {
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", s.CAFile)
	}
	return pool, nil
}

// TLSConfig returns a TLS configuration that verifies the server with its CA; with clientCert it
// also presents the client certificate.
func (s Secure) TLSConfig(clientCert bool) (*tls.Config, error) {
	pool, err := s.CAPool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert {
		pair, err := tls.LoadX509KeyPair(s.ClientCertFile, s.ClientKeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// RequireCluster returns the http URLs of escluster's three nodes (node 1 first), or skips the test
// when TRIBUTARY_ES_CLUSTER_URLS is unset. A fault test stops, kills, pauses and starts one node
// with Servers.Run("stop", "escluster", "--node", "2", "--mode", "kill") and the like.
func RequireCluster(t testing.TB) []string {
	t.Helper()
	v := Require(t, ESClusterURLs)
	var urls []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}
