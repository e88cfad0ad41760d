package search_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/testpki"
)

// testPKI is a CA with a server certificate for the name "node.test" only (no IP) and a
// client certificate, all PEM (internal/testpki).
type testPKI struct{ *testpki.PKI }

func newPKI(t *testing.T) *testPKI { return &testPKI{testpki.New(t, "node.test", "tributary")} }

// tlsServer answers 200 with the client certificate's common name, or 401 when none came or
// the request carries an Authorization header; it requires a client certificate when
// requireClient.
func (p *testPKI) tlsServer(t *testing.T, requireClient bool) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if len(r.TLS.PeerCertificates) == 0 || r.Header.Get("Authorization") != "" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"type":"security_exception","reason":"missing authentication credentials for REST request [/secret-doc-id]"},"status":401}`))
			return
		}
		_, _ = w.Write([]byte(`{"cn":"` + r.TLS.PeerCertificates[0].Subject.CommonName + `"}`))
	}))
	pool := x509.NewCertPool()
	pool.AddCert(p.CA)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.Server}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	if requireClient {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// The CA, the client certificate and the server name all apply at once; each missing piece
// is an Auth failure (a certificate that does not verify, a server refusing the client).
func TestTLSClientCertificateAndServerName(t *testing.T) {
	p := newPKI(t)
	srv := p.tlsServer(t, true)
	full := search.Options{URLs: []string{srv.URL}, CACert: p.CAPEM, ClientCert: p.ClientCert, ClientKey: p.ClientKey, ServerName: "node.test"}
	a, err := search.Do(ctxT(t), client(t, full), esapi.InfoRequest{})
	if err != nil || !strings.Contains(string(a.Body), `"cn":"tributary"`) {
		t.Fatalf("CA + client certificate + server name: %v", err)
	}
	a.Release()

	for name, o := range map[string]search.Options{
		"no server name (the certificate names node.test, the URL an IP)": {CACert: p.CAPEM, ClientCert: p.ClientCert, ClientKey: p.ClientKey},
		"a wrong server name": {CACert: p.CAPEM, ClientCert: p.ClientCert, ClientKey: p.ClientKey, ServerName: "other.test"},
		"no CA":               {ClientCert: p.ClientCert, ClientKey: p.ClientKey, ServerName: "node.test"},
		"no client certificate, which the server requires": {CACert: p.CAPEM, ServerName: "node.test"},
	} {
		o.URLs = []string{srv.URL}
		_, err := search.Do(ctxT(t), client(t, o), esapi.InfoRequest{})
		if c := search.ErrorClass(err); c != search.Auth {
			t.Errorf("%s: %v: class %v, want auth", name, err, c)
		}
		if search.NotSent(err) {
			t.Errorf("%s: a TLS failure counted as not sent", name)
		}
	}
}

// A 401 names the credentials the request carried; nothing of the server's reason.
func TestUnauthorizedNamesTheCredentials(t *testing.T) {
	p := newPKI(t)
	srv := p.tlsServer(t, false)
	for creds, o := range map[string]search.Options{
		"none":                         {},
		"basic":                        {Username: "u", Password: "hunter2"},
		"api key":                      {APIKey: "a2V5"},
		"basic and client certificate": {Username: "u", Password: "hunter2", ClientCert: p.ClientCert, ClientKey: p.ClientKey},
	} {
		o.URLs, o.CACert, o.ServerName = []string{srv.URL}, p.CAPEM, "node.test"
		a, err := search.Do(ctxT(t), client(t, o), esapi.InfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		err = a.Err()
		a.Release()
		var ae *search.AuthError
		if !errors.As(err, &ae) || ae.Status != 401 || ae.Credentials != creds {
			t.Fatalf("%s: %#v", creds, err)
		}
		want := "authentication failed: the cluster refused the credentials (" + creds + ")"
		if err.Error() != want || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret") {
			t.Fatalf("%s: %q, want %q", creds, err, want)
		}
	}
	if err := search.AnswerError(200, nil, nil); err != nil {
		t.Fatalf("200: %v", err)
	}
	if err := search.AnswerError(404, nil, []byte(`{"error":{"type":"index_not_found_exception"}}`)); err != nil {
		t.Fatalf("404: %v", err)
	}
	// OpenSearch answers 401 in plain text.
	err := search.AnswerError(401, nil, []byte("Authentication finally failed"))
	if err == nil || err.Error() != "authentication failed: the cluster refused the credentials" {
		t.Fatalf("plain 401: %v", err)
	}
}

// The 403 reasons of both engines, as the real servers word them, become the action, the
// indices, the user and the granting privileges; a block is told apart from a privilege.
func TestForbiddenReasons(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       search.AuthError
		msg        string
	}{{
		name: "elasticsearch index action",
		body: `{"error":{"root_cause":[{"type":"security_exception","reason":"action [indices:data/write/bulk[s]] is unauthorized for user [u] with effective roles [r] on indices [i], this action is granted by the index privileges [create_doc,create,index,write,all]"}],"type":"security_exception","reason":"action [indices:data/write/bulk[s]] is unauthorized for user [u] with effective roles [r] on indices [i], this action is granted by the index privileges [create_doc,create,index,write,all]"},"status":403}`,
		want: search.AuthError{Status: 403, Action: "indices:data/write/bulk[s]", Indices: []string{"i"}, User: "u",
			Privileges: []string{"create_doc", "create", "index", "write", "all"}, PrivilegeKind: "index"},
		msg: "permission denied: action indices:data/write/bulk[s] on indices i for user u (granted by the index privileges create_doc, create, index, write, all)",
	}, {
		name: "elasticsearch cluster action",
		body: `{"error":{"type":"security_exception","reason":"action [cluster:monitor/main] is unauthorized for user [u] with effective roles [r], this action is granted by the cluster privileges [monitor,manage,all]"},"status":403}`,
		want: search.AuthError{Status: 403, Action: "cluster:monitor/main", User: "u", Privileges: []string{"monitor", "manage", "all"}, PrivilegeKind: "cluster"},
		msg:  "permission denied: action cluster:monitor/main for user u (granted by the cluster privileges monitor, manage, all)",
	}, {
		name: "elasticsearch api key, restricted indices",
		body: `{"error":{"type":"security_exception","reason":"action [indices:admin/create] is unauthorized for API key id [k1] of user [u] on indices [a,b] and restricted indices [.security], this action is granted by the index privileges [create_index,manage,all]"},"status":403}`,
		want: search.AuthError{Status: 403, Action: "indices:admin/create", Indices: []string{"a", "b", ".security"}, User: "u",
			Privileges: []string{"create_index", "manage", "all"}, PrivilegeKind: "index"},
	}, {
		name: "opensearch",
		body: `{"error":{"root_cause":[{"type":"security_exception","reason":"no permissions for [indices:data/write/bulk] and User [name=u, backend_roles=[], requestedTenant=null]"}],"type":"security_exception","reason":"no permissions for [indices:data/write/bulk] and User [name=u, backend_roles=[], requestedTenant=null]"},"status":403}`,
		want: search.AuthError{Status: 403, Action: "indices:data/write/bulk", User: "u"},
		msg:  "permission denied: action indices:data/write/bulk for user u",
	}, {
		name: "opensearch, several actions",
		body: `{"error":{"type":"security_exception","reason":"no permissions for [indices:admin/aliases, indices:admin/create] and User [name=u, backend_roles=[b], requestedTenant=null]"},"status":403}`,
		want: search.AuthError{Status: 403, Action: "indices:admin/aliases", Actions: []string{"indices:admin/aliases", "indices:admin/create"}, User: "u"},
		msg:  "permission denied: actions indices:admin/aliases, indices:admin/create for user u",
	}, {
		name: "elasticsearch _bulk without any write privilege (real es-secure answer)",
		body: `{"error":{"root_cause":[{"type":"security_exception","reason":"action [indices:data/write/bulk] is unauthorized for user [h2a_probe] with effective roles [h2a_probe], this action is granted by the index privileges [create_doc,create,delete,index,write,all]"}],"type":"security_exception","reason":"action [indices:data/write/bulk] is unauthorized for user [h2a_probe] with effective roles [h2a_probe], this action is granted by the index privileges [create_doc,create,delete,index,write,all]"},"status":403}`,
		want: search.AuthError{Status: 403, Action: "indices:data/write/bulk", User: "h2a_probe",
			Privileges: []string{"create_doc", "create", "delete", "index", "write", "all"}, PrivilegeKind: "index"},
	}, {
		name: "a block",
		body: `{"error":{"type":"cluster_block_exception","reason":"index [i] blocked by: [FORBIDDEN/8/index write (api)];"},"status":403}`,
		want: search.AuthError{Status: 403, Indices: []string{"i"}, Block: "FORBIDDEN/8/index write (api)"},
		msg:  "refused by a block: FORBIDDEN/8/index write (api) on index i",
	}, {
		name: "no structured error",
		body: `Forbidden`,
		want: search.AuthError{Status: 403},
		msg:  "permission denied (the server named no action)",
	}} {
		err := search.AnswerError(403, nil, []byte(c.body))
		var ae *search.AuthError
		if !errors.As(err, &ae) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := strings.ReplaceAll(err.Error(), "\n", ""), c.msg; want != "" && got != want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, want)
		}
		if !equalAuth(*ae, c.want) {
			t.Errorf("%s: %#v, want %#v", c.name, *ae, c.want)
		}
	}
	item := search.ItemError(403, []byte(`{"type":"security_exception","reason":"no permissions for [indices:data/write/bulk[s]] and User [name=u, backend_roles=[], requestedTenant=null]"}`))
	if item == nil || item.Error() != "permission denied: action indices:data/write/bulk[s] for user u" {
		t.Fatalf("bulk item: %v", item)
	}
	// OpenSearch's _bulk item when the index privilege is missing (real os-secure answer).
	item = search.ItemError(403, []byte(`{"type":"security_exception","reason":"no permissions for [indices:data/write/bulk[s], indices:data/write/index] and User [name=h2a_probe, backend_roles=[], requestedTenant=null]"}`))
	if item == nil || item.Error() != "permission denied: actions indices:data/write/bulk[s], indices:data/write/index for user h2a_probe" {
		t.Fatalf("opensearch bulk item: %v", item)
	}
	if search.ItemError(409, nil) != nil {
		t.Fatal("an item's 409 is not an auth error")
	}
	// Bounded, whatever the server sends.
	long := strings.Repeat("x", 10_000)
	err := search.AnswerError(403, nil, []byte(`{"error":{"type":"security_exception","reason":"action [`+long+`] is unauthorized for user [u] on indices [`+strings.Repeat("i,", 1000)+`]"}}`))
	if len(err.Error()) > 1000 {
		t.Fatalf("an unbounded message: %d bytes", len(err.Error()))
	}
}

func equalAuth(a, b search.AuthError) bool {
	eq := func(x, y []string) bool { return strings.Join(x, "|") == strings.Join(y, "|") }
	return a.Status == b.Status && a.Action == b.Action && eq(a.Actions, b.Actions) && eq(a.Indices, b.Indices) &&
		a.User == b.User && eq(a.Privileges, b.Privileges) && a.PrivilegeKind == b.PrivilegeKind && a.Block == b.Block
}

// Every malformed PEM is refused with a message that names the option, never its content.
func TestBadPEM(t *testing.T) {
	p := newPKI(t)
	secret := []byte("-----BEGIN CERTIFICATE-----\nc2VjcmV0IGh1bnRlcjI=\n-----END CERTIFICATE-----\n")
	for name, o := range map[string]search.Options{
		"CA not PEM":             {CACert: []byte("hunter2")},
		"CA that does not parse": {CACert: secret},
		"cert without key":       {ClientCert: p.ClientCert},
		"key without cert":       {ClientKey: p.ClientKey},
		"cert not PEM":           {ClientCert: []byte("hunter2"), ClientKey: p.ClientKey},
		"key not PEM":            {ClientCert: p.ClientCert, ClientKey: []byte("hunter2")},
		"key of another cert":    {ClientCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.CA.Raw}), ClientKey: p.ClientKey},
	} {
		o.URLs = []string{"https://node.test:9200"}
		_, err := search.NewClient(o)
		if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "c2Vj") || strings.Contains(err.Error(), "BEGIN") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
