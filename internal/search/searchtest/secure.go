package searchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// Secure is an admin client of a secured server (es-secure, os-secure: testenv.Secure) for
// the tests that need users of a given role. It is plain net/http, so that what sets a test
// up is not the code under test.
type Secure struct {
	testenv.Secure
	// CA is the PEM of the CA file.
	CA     []byte
	client *http.Client
}

// EachSecure runs f as a subtest per secured server, skipped when its variables are unset.
func EachSecure(t *testing.T, f func(t *testing.T, s *Secure)) {
	for _, srv := range []testenv.SecureServer{testenv.SecureES, testenv.SecureOpenSearch} {
		t.Run(srv.String(), func(t *testing.T) {
			s := testenv.RequireSecure(t, srv)
			ca, err := os.ReadFile(s.CAFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := s.TLSConfig(false)
			if err != nil {
				t.Fatal(err)
			}
			f(t, &Secure{Secure: s, CA: ca, client: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: estest.CallTimeout}})
		})
	}
}

// OpenSearch reports whether the server is os-secure.
func (s *Secure) OpenSearch() bool { return s.Server == testenv.SecureOpenSearch }

// Do sends one request as the admin and returns the status and the body; a transport error
// fails the test.
func (s *Secure) Do(t testing.TB, method, path, body string) (int, []byte) {
	t.Helper()
	return s.DoAs(t, s.User, s.Password, method, path, body)
}

// DoAs sends one request as user (no Authorization header when user is empty).
func (s *Secure) DoAs(t testing.TB, user, password, method, path, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// Must is Do that fails the test on a status other than 2xx. A 409 is sent again (for a
// minute): OpenSearch keeps each kind of security configuration (roles, users, mappings) in
// one document, so changes made at once by concurrent tests conflict.
func (s *Secure) Must(t testing.TB, method, path, body string) []byte {
	t.Helper()
	start := time.Now()
	for {
		st, b := s.Do(t, method, path, body)
		if st == http.StatusConflict && time.Since(start) < time.Minute {
			time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
			continue
		}
		if st < 200 || st > 299 {
			t.Fatalf("%s %s: status %d: %s", method, path, st, b)
		}
		return b
	}
}

// remove deletes path as the admin at the end of a test, sending it again on a 409 (see
// Must); a failure is left behind (names are unique).
func (s *Secure) remove(t testing.TB, path string) {
	t.Helper()
	start := time.Now()
	for {
		st, _ := s.Do(t, "DELETE", path, "")
		if st != http.StatusConflict || time.Since(start) > time.Minute {
			return
		}
		time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
	}
}

// Index creates an index as the admin, deleted when the test ends.
func (s *Secure) Index(t testing.TB, name, body string) {
	t.Helper()
	s.Must(t, "PUT", "/"+name, body)
	t.Cleanup(func() { s.Do(t, "DELETE", "/"+name, "") })
}

// Grant is what a test role allows: cluster privileges (or OpenSearch cluster permissions)
// and index privileges (allowed actions) on index patterns.
type Grant struct {
	Cluster  []string
	Index    []string
	Patterns []string
}

// NewUser creates a role with g and a user holding it (removed when the test ends), and
// waits until the user authenticates. base names them, with a unique suffix.
func (s *Secure) NewUser(t testing.TB, base string, g Grant) (user, password string) {
	t.Helper()
	name := estest.UniqueName(t, base)
	role := name + "-role"
	user, password = name+"-user", "Pw-"+estest.RandomHex(t, 8)+"-x9!"
	list := func(v []string) string {
		if v == nil {
			v = []string{}
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if s.OpenSearch() {
		s.Must(t, "PUT", "/_plugins/_security/api/roles/"+role, fmt.Sprintf(`{"cluster_permissions":%s,"index_permissions":[{"index_patterns":%s,"allowed_actions":%s}]}`,
			list(g.Cluster), list(g.Patterns), list(g.Index)))
		t.Cleanup(func() { s.remove(t, "/_plugins/_security/api/roles/"+role) })
		s.Must(t, "PUT", "/_plugins/_security/api/internalusers/"+user, `{"password":"`+password+`"}`)
		s.Must(t, "PUT", "/_plugins/_security/api/rolesmapping/"+role, `{"users":["`+user+`"]}`)
		t.Cleanup(func() {
			s.remove(t, "/_plugins/_security/api/rolesmapping/"+role)
			s.remove(t, "/_plugins/_security/api/internalusers/"+user)
		})
	} else {
		s.Must(t, "PUT", "/_security/role/"+role, fmt.Sprintf(`{"cluster":%s,"indices":[{"names":%s,"privileges":%s}]}`,
			list(g.Cluster), list(g.Patterns), list(g.Index)))
		t.Cleanup(func() { s.Do(t, "DELETE", "/_security/role/"+role, "") })
		s.Must(t, "PUT", "/_security/user/"+user, `{"password":"`+password+`","roles":["`+role+`"]}`)
		t.Cleanup(func() { s.Do(t, "DELETE", "/_security/user/"+user, "") })
	}
	// A new user may take a moment to reach the node's caches (OpenSearch answers a failed
	// login after about 3 s).
	whoami := s.WhoAmIPath()
	start := time.Now()
	for {
		st, _ := s.DoAs(t, user, password, "GET", whoami, "")
		if st == http.StatusOK {
			if d := time.Since(start); d > 10*time.Second {
				t.Logf("user %s authenticated after %v", user, d.Round(time.Second))
			}
			return user, password
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("user %s does not authenticate after 2 min (status %d)", user, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WhoAmIPath is the path that answers who the request authenticated as ({"username": ...}
// on Elasticsearch, {"user_name": ...} on OpenSearch; see UserOf).
func (s *Secure) WhoAmIPath() string {
	if s.OpenSearch() {
		return "/_plugins/_security/authinfo"
	}
	return "/_security/_authenticate"
}

// UserOf reads the user name of an answer to WhoAmIPath.
func UserOf(body []byte) string {
	var who struct {
		Username string `json:"username"`
		UserName string `json:"user_name"`
	}
	_ = json.Unmarshal(body, &who)
	if who.Username != "" {
		return who.Username
	}
	return who.UserName
}
