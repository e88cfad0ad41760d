package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/privtest"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// recordsvc's search stores on the secured servers (es-secure, os-secure): the CA from a file
// and inline, a client certificate with a server name, a stopped node listed first, a role
// that does not cover one dataset (ERROR_KIND_PERMISSION_DENIED for that dataset's items only,
// naming the action), and a wrong password (authentication failed; the store NOT_SERVING).

// TestSecureSearchStores runs per secured server (searchtest.EachSecure): elasticsearch,
// opensearch.
func TestSecureSearchStores(t *testing.T) {
	searchtest.EachSecure(t, func(t *testing.T, a *searchtest.Secure) {
		kind := "elasticsearch"
		if a.OpenSearch() {
			kind = "opensearch"
		}
		testSecureSearchStores(t, a, kind)
	})
}

func testSecureSearchStores(t *testing.T, a *searchtest.Secure, kind string) {
	sec := a.Secure
	base := uniqueName("recordsvc-secure")
	ok, denied := base+"-ok", base+"-denied"
	a.Index(t, ok, "")
	a.Index(t, denied, "")
	// The record store's least-privilege role (store/searchstore's Privileges table); the
	// client certificate's own role (tributary_cert) allows every action.
	role := privtest.Pick(a, privtest.ESRecordStore, privtest.OSRecordStore)
	user, password := a.NewUser(t, base, role.Grant([]string{base + "-ok*"}))
	t.Setenv("RECORDSVC_TEST_CA_PEM", string(a.CA))
	t.Setenv("RECORDSVC_TEST_PASSWORD", password)
	byAddress := strings.Replace(sec.URL, "://localhost:", "://127.0.0.1:", 1)
	health := fmt.Sprintf("health: {dataset: %s-health}", ok) // in the role's pattern; need not exist
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
health: {interval: 5s, timeout: 5s} # generous: a slow check must not flap the status
stores:
  cafile:
    kind: %[1]s
    urls: [%[2]q, %[3]q]
    username: %[4]s
    password: "${RECORDSVC_TEST_PASSWORD}"
    tls: {ca_file: %[5]q}
    %[6]s
  inline:
    kind: %[1]s
    urls: [%[3]q]
    username: %[4]s
    password: "${RECORDSVC_TEST_PASSWORD}"
    tls:
      ca: "${RECORDSVC_TEST_CA_PEM}"
    %[6]s
  cert:
    kind: %[1]s
    urls: [%[7]q]
    tls: {ca_file: %[5]q, cert_file: %[8]q, key_file: %[9]q, server_name: localhost}
    %[6]s
  wrongpw:
    kind: %[1]s
    urls: [%[3]q]
    username: %[4]s
    password: not-the-password
    tls: {ca_file: %[5]q}
    %[6]s
`, kind, estest.ClosedURL(t, "https"), sec.URL, user, sec.CAFile, health, byAddress, sec.ClientCertFile, sec.ClientKeyFile), modeServer)
	// Generous, not testCtx's minute: TLS handshakes with the secured servers take seconds on a
	// loaded machine, and the health checks (every 5 s) must have run for every store.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)

	for _, store := range []string{"cafile", "inline", "cert"} {
		t.Run(store, func(t *testing.T) {
			w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{
				put(addr(store, "ns", ok, store), doc(`{"n":1}`), ifAbsent()),
				put(addr(store, "ns", denied, store), doc(`{"n":1}`), nil),
			}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr(store, "ns", ok, store), addr(store, "ns", denied, store)}})
			if err != nil {
				t.Fatal(err)
			}
			if store == "cert" {
				// The certificate's own role covers every index.
				wantOutcomes(t, "write", w.Results, recordv1.Outcome_OUTCOME_CREATED, recordv1.Outcome_OUTCOME_CREATED)
				wantOutcomes(t, "read", r.Results, recordv1.Outcome_OUTCOME_FOUND, recordv1.Outcome_OUTCOME_FOUND)
				return
			}
			wantOutcomes(t, "write", w.Results, recordv1.Outcome_OUTCOME_CREATED, recordv1.ErrorKind_ERROR_KIND_PERMISSION_DENIED)
			wantOutcomes(t, "read", r.Results, recordv1.Outcome_OUTCOME_FOUND, recordv1.ErrorKind_ERROR_KIND_PERMISSION_DENIED)
			for _, e := range []*recordv1.Error{w.Results[1].Error, r.Results[1].Error} {
				if e == nil || e.Retryable || !strings.Contains(e.Message, "permission denied: action indices:") || !strings.Contains(e.Message, denied) {
					t.Fatalf("the refusal: %+v", e)
				}
			}
			if !strings.Contains(w.Results[1].Error.Message, "indices:admin/get") || !strings.Contains(r.Results[1].Error.Message, "indices:data/read/mget[shard]") {
				t.Fatalf("the refusals do not name the actions: %q, %q", w.Results[1].Error.Message, r.Results[1].Error.Message)
			}
		})
	}
	t.Run("wrongpw", func(t *testing.T) {
		r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr("wrongpw", "ns", ok, "x")}})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcomes(t, "read", r.Results, recordv1.ErrorKind_ERROR_KIND_PERMISSION_DENIED)
		if m := r.Results[0].Error.Message; !strings.Contains(m, "authentication failed") || strings.Contains(m, "not-the-password") {
			t.Fatalf("the refusal: %q", m)
		}
	})
	t.Run("health", func(t *testing.T) {
		for store, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
			"cafile": healthpb.HealthCheckResponse_SERVING, "inline": healthpb.HealthCheckResponse_SERVING,
			"cert": healthpb.HealthCheckResponse_SERVING, "wrongpw": healthpb.HealthCheckResponse_NOT_SERVING,
		} {
			eventually(t, ctx, "storage health of "+store+" is "+want.String(), func() bool { return healthOf(ctx, s, storageServicePrefix+store) == want })
		}
	})
	t.Run("metrics", func(t *testing.T) {
		series := `recordsvc_items_total{op="put",result="error_permission_denied",store="cafile"}`
		if v, _ := scrape(t, s.metrics, series); v != 1 {
			t.Fatalf("%s = %v, want 1", series, v)
		}
	})
}

// tlsProxy is a TLS server that requires a client certificate of pki's CA and relays each
// connection to target in plain TCP: a MongoDB server with TLS, as far as the client can tell.
type tlsProxy struct {
	l        net.Listener
	accepted atomic.Int64 // handshakes completed with a client certificate
	wg       sync.WaitGroup
}

func startTLSProxy(t *testing.T, pki *testPKI, target string) *tlsProxy {
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pki.server},
		ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	p := &tlsProxy{l: l}
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			track(c)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer c.Close()
				tc := c.(*tls.Conn)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := tc.HandshakeContext(ctx)
				cancel()
				if err != nil || len(tc.ConnectionState().PeerCertificates) == 0 {
					return
				}
				p.accepted.Add(1)
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				go func() { _, _ = io.Copy(up, tc); _ = up.Close() }()
				_, _ = io.Copy(tc, up)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// TestSecureMongoDBTLS: a MongoDB store's tls (an inline CA, a client certificate and key in
// two files, a server name the address does not carry) reaches a server that requires all of
// them: the real server (FerretDB) behind a TLS proxy.
func TestSecureMongoDBTLS(t *testing.T) {
	uri := testenv.Require(t, testenv.MongoURI)
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	pki := newTestPKI(t)
	proxy := startTLSProxy(t, pki, u.Host)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, pki.clientCert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pki.clientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RECORDSVC_TEST_CA_PEM", pki.caPEM)
	db := strings.ReplaceAll(uniqueName("recordsvc_tls"), "-", "_")
	dropDatabase(t, uri, db)
	proxied := "mongodb://" + proxy.l.Addr().String() + "/"
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: "off"}
stores:
  main:
    kind: mongodb
    uri: %q
    ferretdb: %v
    timeout: 30s
    tls:
      ca: "${RECORDSVC_TEST_CA_PEM}"
      cert_file: %q
      key_file: %q
      server_name: db.test
`, proxied, isFerretDB(t, uri), certFile, keyFile), modeServer)
	ctx := testCtx(t)
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", db, "people", "ada"), doc(`{"n":1}`), ifAbsent())}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "write", w.Results, recordv1.Outcome_OUTCOME_CREATED)
	r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr("main", db, "people", "ada")}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "read", r.Results, recordv1.Outcome_OUTCOME_FOUND)
	if proxy.accepted.Load() == 0 {
		t.Fatal("no connection came through the TLS proxy")
	}
}
