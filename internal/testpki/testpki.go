// Package testpki makes a throwaway public-key infrastructure for tests of TLS: a CA, a server
// certificate for one DNS name only (no IP address, so that a test must name the server) and a
// client certificate, with the PEM a configuration takes. Nothing here is used outside tests.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// PKI is a CA and the certificates it signed.
type PKI struct {
	CA    *x509.Certificate
	CAPEM []byte
	// Pool holds CA alone.
	Pool *x509.CertPool
	// Server is the server's certificate and key, for the DNS name given to New.
	Server tls.Certificate
	// ClientCert and ClientKey are the client's certificate and key, PEM.
	ClientCert, ClientKey []byte
}

// New makes a CA, a server certificate for serverName (a DNS name, also its common name) and a
// client certificate whose common name is clientCN, valid from an hour ago for a day.
func New(t testing.TB, serverName, clientCN string) *PKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	p := &PKI{CA: ca, CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	sc, sk := leaf(2, serverName, x509.ExtKeyUsageServerAuth, []string{serverName})
	if p.Server, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	p.ClientCert, p.ClientKey = leaf(3, clientCN, x509.ExtKeyUsageClientAuth, nil)
	return p
}
