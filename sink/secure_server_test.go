package sink

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// The sink's configuration on the secured servers (es-secure, os-secure): tls: ca_file, ca,
// cert/key (files and inline), server_name, each accepted or refused as it should be, and the
// real 401 and 403 answers surfacing as permanent errors that say what to fix. Both servers
// start as stock clusters (action.auto_create_index unset) and other tests may prepare them,
// so no test here writes through a claim or depends on the setting: the engine check, the
// start check and a _bulk to an index the admin made stand for every request.

func secureSink(t *testing.T, s *searchtest.Secure, cfg Config) *Sink {
	t.Helper()
	cfg.ID, cfg.URL, cfg.Index = "secure", s.URL, "h2a-secure-{table}"
	// A loaded machine can take seconds over a TLS handshake: bounds far above the defaults.
	cfg.ConnectTimeout, cfg.RequestTimeout = Duration(time.Minute), Duration(2*time.Minute)
	if cfg.Auth.Type == "" {
		cfg.Auth = Auth{Type: AuthBasic, Username: s.User, Password: Secret(s.Password)}
	}
	k, err := New(cfg, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantPermanent checks err is a permanent failure, not backpressure, containing every part.
func wantPermanent(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	var bp *cdc.BackpressureError
	if err == nil || !cdc.IsPermanent(err) || errors.As(err, &bp) {
		t.Fatalf("%s: %v, want a permanent failure", what, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: %q lacks %q", what, err, p)
		}
	}
}

func TestSecureSinkTLS(t *testing.T) {
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) {
		ctx := context.Background()
		want := Elasticsearch
		if s.OpenSearch() {
			want = OpenSearch
		}
		certOnly := Auth{Type: AuthNone}
		for name, c := range map[string]Config{
			"ca_file":                          {TLS: TLS{CAFile: s.CAFile}},
			"inline ca and server_name":        {TLS: TLS{CA: string(s.CA), ServerName: "localhost"}},
			"cert_file and key_file, no auth:": {Auth: certOnly, TLS: TLS{CAFile: s.CAFile, CertFile: s.ClientCertFile, KeyFile: s.ClientKeyFile}},
			"inline cert and key, no auth:":    {Auth: certOnly, TLS: TLS{CAFile: s.CAFile, Cert: fileText(t, s.ClientCertFile), Key: Secret(fileText(t, s.ClientKeyFile))}},
		} {
			k := secureSink(t, s, c)
			if err := k.detectEngine(ctx); err != nil || k.engine != want {
				t.Fatalf("%s: %v (engine %v)", name, err, k.engine)
			}
			// The start check gets through too: a stock cluster is refused as such, one
			// another test prepared passes.
			if err := k.CheckCluster(ctx); err != nil && !errors.Is(err, esfence.FencingUnenforced) {
				t.Fatalf("%s: start check: %v, want nil or fencing_unenforced", name, err)
			}
		}
		for name, c := range map[string]Config{
			"no CA (the system's roots)":                   {},
			"a server_name the certificate does not carry": {TLS: TLS{CAFile: s.CAFile, ServerName: "es.invalid"}},
		} {
			err := secureSink(t, s, c).detectEngine(ctx)
			wantPermanent(t, name, err, "certificate", "check tls")
		}
	})
}

func TestSecureSinkAuthErrors(t *testing.T) {
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) {
		ctx := context.Background()

		// 401, from the engine check and from the start check.
		pw := "wrong-" + estest.RandomHex(t, 4)
		k := secureSink(t, s, Config{Auth: Auth{Type: AuthBasic, Username: s.User, Password: Secret(pw)}, TLS: TLS{CAFile: s.CAFile}})
		err := k.detectEngine(ctx)
		wantPermanent(t, "401", err, "reading the cluster's version: authentication failed: the cluster refused the credentials (basic)")
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("401 quotes the password: %v", err)
		}
		wantPermanent(t, "401 at the start check", k.CheckCluster(ctx), "authentication failed: the cluster refused the credentials (basic)")

		// 403: a user with no cluster privilege at all, and read on h2a-* only.
		index := estest.UniqueName(t, "h2a-secure-sink")
		s.Index(t, index, `{"aliases":{"`+index+`-w":{}}}`)
		user, password := s.NewUser(t, "h2a-secure-sink", searchtest.Grant{Index: []string{"read"}, Patterns: []string{"h2a-*"}})
		k = secureSink(t, s, Config{Auth: Auth{Type: AuthBasic, Username: user, Password: Secret(password)}, TLS: TLS{CAFile: s.CAFile}})
		err = k.detectEngine(ctx)
		wantPermanent(t, "403 engine check", err, "reading the cluster's version: permission denied: action cluster:monitor/nodes/info", "for user "+user)
		if !s.OpenSearch() {
			wantPermanent(t, "403 engine check", err, "granted by the cluster privileges", "monitor")
		}
		err = k.CheckCluster(ctx)
		wantPermanent(t, "403 start check", err, "permission denied: action cluster:monitor/", "for user "+user)
		var ae *search.AuthError
		if !errors.As(err, &ae) {
			t.Fatalf("403 start check: no AuthError in %v", err)
		}
		t.Logf("%s: %v", s.Server, err)

		// 403 for a _bulk item: the user may send _bulk (writes on h2a-w-* on
		// Elasticsearch, the cluster-level bulk action on OpenSearch) but not write the index.
		g := searchtest.Grant{Cluster: []string{"monitor"}, Index: []string{"write"}, Patterns: []string{"h2a-w-*"}}
		if s.OpenSearch() {
			g = searchtest.Grant{Cluster: []string{"cluster_monitor", "indices:data/write/bulk"}, Index: []string{"read"}, Patterns: []string{"h2a-*"}}
		}
		user, password = s.NewUser(t, "h2a-secure-sink", g)
		k = secureSink(t, s, Config{Auth: Auth{Type: AuthBasic, Username: user, Password: Secret(password)}, TLS: TLS{CAFile: s.CAFile}})
		body := []byte(`{"index":{"_index":"` + index + `-w","_id":"1","version":1,"version_type":"external"}}` + "\n{\"a\":1}\n")
		o := k.send(ctx, &chunk{body: body, spans: []span{{0, len(body), &action{}}}})
		if len(o.dead) != 0 {
			t.Fatalf("a refused item was dead-lettered: %+v", o.dead)
		}
		wantPermanent(t, "403 _bulk item", o.fatal, "_bulk item: permission denied: action", "indices:data/write/bulk[s]", "for user "+user)
		if !s.OpenSearch() {
			wantPermanent(t, "403 _bulk item", o.fatal, "on indices "+index, "granted by the index privileges", "write")
		}
		t.Logf("%s: %v", s.Server, o.fatal)
	})
}
