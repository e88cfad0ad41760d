package main

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/tributary-dev/tributary/internal/testpki"
)

// testPKI is a CA, a server certificate for the name "db.test" only (no IP address) and a
// client certificate (internal/testpki), with the CA's PEM as a string.
type testPKI struct {
	caPEM                 string
	pool                  *x509.CertPool
	server                tls.Certificate
	clientCert, clientKey []byte
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := testpki.New(t, "db.test", "recordsvc")
	return &testPKI{caPEM: string(p.CAPEM), pool: p.Pool, server: p.Server, clientCert: p.ClientCert, clientKey: p.ClientKey}
}

// testCAPEM returns the PEM of a fresh CA certificate.
func testCAPEM(t *testing.T) string { return newTestPKI(t).caPEM }
