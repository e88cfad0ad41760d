package sink

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// The client the sink builds trusts the configured CA, sends the configured credentials, and
// a rejection does not echo them.
func TestTransportTLSAndAuth(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		if strings.HasPrefix(strings.ToLower(r.Header.Get("Authorization")), "apikey ") {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"type":"security_exception"},"status":401}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"nodes":{"n1":{"version":"8.19.0","build_flavor":"default"}}}`))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted-CA case logs a handshake error
	srv.StartTLS()
	defer srv.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))

	cfg := Config{ID: "tls", URL: srv.URL, Index: "i", TLS: TLS{CA: ca},
		Auth: Auth{Type: AuthBasic, Username: "elastic", Password: "pw-secret-1"}}
	k, err := New(cfg, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.detectEngine(context.Background()); err != nil || k.engine != Elasticsearch {
		t.Fatalf("through TLS with the configured CA: %v (engine %v)", err, k.engine)
	}
	if len(auths) != 1 || !strings.HasPrefix(auths[0], "Basic ") {
		t.Fatalf("Authorization %q, want basic", auths)
	}

	// Without the CA the server is not trusted.
	cfg.TLS = TLS{}
	k2, err := New(cfg, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	if err := k2.detectEngine(context.Background()); err == nil || !cdc.IsPermanent(err) {
		t.Fatalf("an unknown CA: %v, want a permanent failure", err)
	}

	// API key; the 401 is fatal (not backpressure) and does not carry the key.
	cfg.TLS = TLS{CA: ca}
	cfg.Auth = Auth{Type: AuthAPIKey, APIKey: "a2V5LXNlY3JldC0y"}
	k3, err := New(cfg, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k3.Close()
	err = k3.detectEngine(context.Background())
	var bp *cdc.BackpressureError
	if err == nil || errors.As(err, &bp) || !cdc.IsPermanent(err) || strings.Contains(err.Error(), "a2V5") || !strings.Contains(err.Error(), "authentication failed: the cluster refused the credentials (api key)") {
		t.Fatalf("401: %v (Authorization %q)", err, auths)
	}
	if got := auths[len(auths)-1]; !strings.EqualFold(got, "ApiKey a2V5LXNlY3JldC0y") {
		t.Fatalf("Authorization %q", got)
	}
}

// The client the sink builds does not ask for compressed answers (the cluster would spend CPU
// compressing them).
func TestTransportAsksNoCompression(t *testing.T) {
	var mu sync.Mutex
	var enc []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		enc = append(enc, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"nodes":{"n1":{"version":"2.19.0"}}}`))
	}))
	defer srv.Close()
	k, err := New(Config{ID: "gz", URL: srv.URL, Index: "i", Auth: Auth{Type: AuthNone}}, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.detectEngine(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(enc) != 1 || enc[0] != "" {
		t.Fatalf("Accept-Encoding %q, want none", enc)
	}
}
