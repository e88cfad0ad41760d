package kafkaqueue_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// testCA is a throwaway certificate authority for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafkaqueue test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate for loopback, usable by servers and clients, and its
// PEM certificate and key.
func (ca *testCA) issue(t *testing.T, serial int64) (tls.Certificate, []byte, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

func writeFile(t *testing.T, name string, data []byte) string {
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	serverCert, _, _ := ca.issue(t, 2)
	_, clientCertPEM, clientKeyPEM := ca.issue(t, 3)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	// The broker demands a client certificate from the same authority.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cluster.CreateTopic("t", 1, nil)
	caFile := writeFile(t, "ca.pem", ca.pem)
	certFile := writeFile(t, "client.pem", clientCertPEM)
	keyFile := writeFile(t, "client-key.pem", clientKeyPEM)
	base := kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "t", RequestTimeout: 2 * time.Second}

	t.Run("trusted CA and client certificate", func(t *testing.T) {
		cfg := base
		cfg.TLS = &kafkaqueue.TLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
		p, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Publish(t.Context(), []queue.Message{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
			t.Fatalf("Publish over TLS: %v", err)
		}
	})
	t.Run("untrusted broker certificate is Denied", func(t *testing.T) {
		cfg := base
		cfg.TLS = &kafkaqueue.TLS{CertFile: certFile, KeyFile: keyFile} // system roots only
		if _, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil); queue.KindOf(err) != queue.Denied {
			t.Fatalf("NewPublisher: %v, want Denied", err)
		}
	})
	t.Run("InsecureSkipVerify accepts the broker", func(t *testing.T) {
		cfg := base
		cfg.TLS = &kafkaqueue.TLS{CertFile: certFile, KeyFile: keyFile, InsecureSkipVerify: true}
		p, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
	})
	t.Run("CA file without certificates is Invalid", func(t *testing.T) {
		cfg := base
		cfg.TLS = &kafkaqueue.TLS{CAFile: writeFile(t, "empty.pem", []byte("not pem"))}
		if _, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil); queue.KindOf(err) != queue.Invalid {
			t.Fatalf("NewPublisher: %v, want Invalid", err)
		}
	})
}
