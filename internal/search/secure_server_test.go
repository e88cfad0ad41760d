package search_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// The client on the secured servers (es-secure, os-secure): TLS verified with the test CA,
// refused without it or under another server name, a client certificate that authenticates
// alone, and the real 401 and 403 answers turned into AuthErrors with the engines' own action
// and privilege names.

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// whoAmI sends the engine's "who am I" request through a client of o and returns the user
// it authenticated as, or the error.
func whoAmI(t *testing.T, s *searchtest.Secure, o search.Options) (string, error) {
	t.Helper()
	o.URLs = []string{s.URL}
	o.ConnectTimeout = time.Minute // a loaded machine can take seconds over a TLS handshake
	tp := client(t, o)
	req, err := http.NewRequestWithContext(ctxT(t), "GET", s.WhoAmIPath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tp.Perform(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	a := search.Answer{Status: res.StatusCode, Header: res.Header, Body: body}
	if err := a.Err(); err != nil {
		return "", err
	}
	if !a.OK() {
		t.Fatalf("who am I: status %d", a.Status)
	}
	return searchtest.UserOf(a.Body), nil
}

func TestSecureTLS(t *testing.T) {
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) {
		basic := search.Options{Username: s.User, Password: s.Password}

		// The CA verifies the server; the server's certificate names 127.0.0.1 and localhost.
		for name, o := range map[string]search.Options{
			"CA":                 {CACert: s.CA},
			"CA and server name": {CACert: s.CA, ServerName: "localhost"},
			"CA, basic and a client certificate (basic wins)": {CACert: s.CA, ClientCert: readFile(t, s.ClientCertFile), ClientKey: readFile(t, s.ClientKeyFile)},
		} {
			o.Username, o.Password = basic.Username, basic.Password
			if user, err := whoAmI(t, s, o); err != nil || user != s.User {
				t.Fatalf("%s: %q %v, want %s", name, user, err, s.User)
			}
		}

		// A client certificate alone authenticates as its user.
		user, err := whoAmI(t, s, search.Options{CACert: s.CA, ClientCert: readFile(t, s.ClientCertFile), ClientKey: readFile(t, s.ClientKeyFile)})
		if err != nil || user != s.ClientUser {
			t.Fatalf("client certificate: %q %v, want %s", user, err, s.ClientUser)
		}

		// Refused, as an Auth failure that says "certificate": no CA, another server name.
		for name, o := range map[string]search.Options{
			"no CA (the system's roots)":                   basic,
			"a server name the certificate does not carry": {CACert: s.CA, ServerName: "es.invalid", Username: s.User, Password: s.Password},
		} {
			_, err := whoAmI(t, s, o)
			if c := search.ErrorClass(err); c != search.Auth || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("%s: %v (class %v), want an auth failure naming the certificate", name, err, c)
			}
		}
	})
}

func TestSecureAuthErrors(t *testing.T) {
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) {
		// 401: a wrong password, and no credentials at all.
		for creds, o := range map[string]search.Options{
			search.CredentialsBasic: {CACert: s.CA, Username: s.User, Password: "wrong-" + estest.RandomHex(t, 4)},
			search.CredentialsNone:  {CACert: s.CA},
		} {
			_, err := whoAmI(t, s, o)
			var ae *search.AuthError
			if !errors.As(err, &ae) || ae.Status != 401 || ae.Credentials != creds ||
				err.Error() != "authentication failed: the cluster refused the credentials ("+creds+")" {
				t.Fatalf("401 (%s): %v", creds, err)
			}
		}

		// 403: a user that may read h2a-* and write only h2a-w-*, without create_index.
		index := estest.UniqueName(t, "h2a-secure")
		s.Index(t, index, "")
		g := searchtest.Grant{Cluster: []string{"monitor"}, Index: []string{"read"}, Patterns: []string{"h2a-*"}}
		if s.OpenSearch() {
			g.Cluster = []string{"cluster_monitor"}
		}
		user, password := s.NewUser(t, "h2a-secure", g)
		tp := client(t, search.Options{URLs: []string{s.URL}, CACert: s.CA, Username: user, Password: password, ConnectTimeout: time.Minute})

		a, err := search.Do(ctxT(t), tp, esapi.IndicesCreateRequest{Index: index + "-new"})
		if err != nil {
			t.Fatal(err)
		}
		ae := authError(t, "index creation", a.Err())
		a.Release()
		if ae.Action != "indices:admin/create" || ae.User != user {
			t.Fatalf("index creation: %#v", ae)
		}
		if !s.OpenSearch() && (!slices.Contains(ae.Privileges, "create_index") || ae.PrivilegeKind != "index" || !slices.Equal(ae.Indices, []string{index + "-new"})) {
			t.Fatalf("index creation: %#v", ae)
		}

		a, err = search.Do(ctxT(t), tp, esapi.BulkRequest{Body: strings.NewReader(`{"index":{"_index":"` + index + `","_id":"1"}}` + "\n{\"a\":1}\n")})
		if err != nil {
			t.Fatal(err)
		}
		ae = authError(t, "_bulk", a.Err())
		a.Release()
		if ae.Action != "indices:data/write/bulk" || ae.User != user {
			t.Fatalf("_bulk: %#v", ae)
		}
		if !s.OpenSearch() && !slices.Contains(ae.Privileges, "write") {
			t.Fatalf("_bulk: %#v", ae)
		}
		t.Logf("%s: %v", s.Server, ae)
	})
}

func authError(t *testing.T, what string, err error) *search.AuthError {
	t.Helper()
	var ae *search.AuthError
	if !errors.As(err, &ae) || ae.Status != 403 {
		t.Fatalf("%s: %v, want a 403 AuthError", what, err)
	}
	return ae
}
