package searchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
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

// adminTimeout bounds one request of the admin client (TLS handshake included): generous, as a
// handshake with a secured server takes seconds on a loaded machine and OpenSearch reloads its
// security configuration before it answers a change.
const adminTimeout = 2 * time.Minute

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
			f(t, &Secure{Secure: s, CA: ca, client: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: adminTimeout}})
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
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
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

// conflictBound is how long a security change answered 409 is sent again: OpenSearch keeps
// each kind of security configuration (roles, users, mappings) in one document, so changes
// made at once by concurrent tests (packages run in parallel) conflict.
const conflictBound = 2 * time.Minute

// Must is Do that fails the test on a status other than 2xx. A 409 is sent again, with a
// random pause, until conflictBound has passed.
func (s *Secure) Must(t testing.TB, method, path, body string) []byte {
	t.Helper()
	start := time.Now()
	for {
		st, b := s.Do(t, method, path, body)
		if st == http.StatusConflict && time.Since(start) < conflictBound {
			time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
			continue
		}
		if st < 200 || st > 299 {
			t.Fatalf("%s %s: status %d: %s", method, path, st, b)
		}
		return b
	}
}

// Remove deletes path as the admin, sending it again on a 409 (see Must); any other answer
// (a 404 of what is already gone, a failure) is accepted: names are unique, so what a cleanup
// leaves behind harms no other test.
func (s *Secure) Remove(t testing.TB, path string) {
	t.Helper()
	start := time.Now()
	for {
		st, _ := s.Do(t, "DELETE", path, "")
		if st != http.StatusConflict || time.Since(start) > conflictBound {
			return
		}
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
	}
}

// RemoveAtCleanup removes path (Remove) when the test ends.
func (s *Secure) RemoveAtCleanup(t testing.TB, path string) {
	t.Cleanup(func() { s.Remove(t, path) })
}

// Index creates an index as the admin, deleted when the test ends; an empty body makes it one
// shard without replicas (a single node).
func (s *Secure) Index(t testing.TB, name, body string) {
	t.Helper()
	if body == "" {
		body = `{"settings":{"number_of_shards":1,"number_of_replicas":0}}`
	}
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

// RoleBody is g as the server's security API takes a role: an Elasticsearch role descriptor
// (PUT _security/role/<name>) or an OpenSearch role (PUT _plugins/_security/api/roles/<name>).
func RoleBody(openSearch bool, g Grant) string {
	list := func(v []string) string {
		if v == nil {
			v = []string{}
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if openSearch {
		return fmt.Sprintf(`{"cluster_permissions":%s,"index_permissions":[{"index_patterns":%s,"allowed_actions":%s}]}`,
			list(g.Cluster), list(g.Patterns), list(g.Index))
	}
	return fmt.Sprintf(`{"cluster":%s,"indices":[{"names":%s,"privileges":%s}]}`, list(g.Cluster), list(g.Patterns), list(g.Index))
}

func (s *Secure) rolePath(role string) string {
	if s.OpenSearch() {
		return "/_plugins/_security/api/roles/" + role
	}
	return "/_security/role/" + role
}

// PutRole creates or replaces role with g. Both engines apply a changed role to the next
// request (Elasticsearch clears its role cache, OpenSearch reloads its security configuration
// before answering); a new mapping is another matter (WaitRole).
func (s *Secure) PutRole(t testing.TB, role string, g Grant) {
	t.Helper()
	s.Must(t, "PUT", s.rolePath(role), RoleBody(s.OpenSearch(), g))
}

// Account is a user holding one role of its own, both removed when the test ends.
type Account struct {
	s              *Secure
	User, Password string
	Role           string
}

// NewAccount creates a role with g and a user holding it (names from base with a unique
// suffix), removed when the test ends, and waits until the user authenticates with the role.
func (s *Secure) NewAccount(t testing.TB, base string, g Grant) *Account {
	t.Helper()
	name := estest.UniqueName(t, base)
	a := &Account{s: s, Role: name + "-role", User: name + "-user", Password: "Pw-" + estest.RandomHex(t, 8) + "-x9!"}
	s.PutRole(t, a.Role, g)
	s.RemoveAtCleanup(t, s.rolePath(a.Role))
	if s.OpenSearch() {
		s.Must(t, "PUT", "/_plugins/_security/api/internalusers/"+a.User, `{"password":"`+a.Password+`"}`)
		s.RemoveAtCleanup(t, "/_plugins/_security/api/internalusers/"+a.User)
		s.Must(t, "PUT", "/_plugins/_security/api/rolesmapping/"+a.Role, `{"users":["`+a.User+`"]}`)
		s.RemoveAtCleanup(t, "/_plugins/_security/api/rolesmapping/"+a.Role)
	} else {
		s.Must(t, "PUT", "/_security/user/"+a.User, `{"password":"`+a.Password+`","roles":["`+a.Role+`"]}`)
		s.RemoveAtCleanup(t, "/_security/user/"+a.User)
	}
	s.WaitRole(t, a.User, a.Password, a.Role)
	return a
}

// Set replaces the account's role by g (PutRole).
func (a *Account) Set(t testing.TB, g Grant) {
	t.Helper()
	a.s.PutRole(t, a.Role, g)
}

// NewUser is NewAccount's user and password.
func (s *Secure) NewUser(t testing.TB, base string, g Grant) (user, password string) {
	t.Helper()
	a := s.NewAccount(t, base, g)
	return a.User, a.Password
}

// MapCertUser creates a role with g (named from base) held by the client certificate's user
// as well as its own role, removed when the test ends, and waits until the certificate
// authenticates with it. The certificate's own role (tributary_cert) already allows every
// action on both servers: this is for a test that needs its user to hold a named role.
func (s *Secure) MapCertUser(t testing.TB, base string, g Grant) (role string) {
	t.Helper()
	role = estest.UniqueName(t, base) + "-role"
	s.PutRole(t, role, g)
	s.RemoveAtCleanup(t, s.rolePath(role))
	if s.OpenSearch() {
		s.Must(t, "PUT", "/_plugins/_security/api/rolesmapping/"+role, `{"users":["`+s.ClientUser+`"]}`)
		s.RemoveAtCleanup(t, "/_plugins/_security/api/rolesmapping/"+role)
	} else {
		b, _ := json.Marshal(s.ClientUser)
		s.Must(t, "PUT", "/_security/role_mapping/"+role, `{"enabled":true,"roles":["`+role+`"],"rules":{"field":{"username":`+string(b)+`}}}`)
		s.RemoveAtCleanup(t, "/_security/role_mapping/"+role)
	}
	s.WaitRole(t, "", "", role)
	return role
}

// roleWait bounds WaitRole: a new user or mapping reaches the node's caches in moments, but
// OpenSearch answers a failed login after about 3 s, and CI's servers share two cores.
const roleWait = 2 * time.Minute

// WaitRole waits until user (the client certificate's when user is empty) authenticates
// holding role (the roles of WhoAmIPath's answer): both engines cache users and role
// mappings, so a 200 alone does not prove the role applies yet.
func (s *Secure) WaitRole(t testing.TB, user, password, role string) {
	t.Helper()
	client := s.client
	if user == "" {
		cfg, err := s.TLSConfig(true)
		if err != nil {
			t.Fatal(err)
		}
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: adminTimeout}
	}
	start := time.Now()
	var last string
	for {
		last = s.rolesOf(client, user, password, role)
		if last == "" {
			if d := time.Since(start); d > 10*time.Second {
				t.Logf("%q authenticated with role %s after %v", user, role, d.Round(time.Second))
			}
			return
		}
		if time.Since(start) > roleWait {
			t.Fatalf("%q has not authenticated with role %s after %v: %s", user, role, roleWait, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rolesOf asks WhoAmIPath as user through client and returns "" when the answer lists role,
// else what it got.
func (s *Secure) rolesOf(client *http.Client, user, password, role string) string {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+s.WhoAmIPath(), nil)
	if err != nil {
		return err.Error()
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	res, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	var info struct {
		Roles []string `json:"roles"`
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&info); err != nil {
		return err.Error()
	}
	if slices.Contains(info.Roles, role) {
		return ""
	}
	return fmt.Sprintf("roles %v", info.Roles)
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
