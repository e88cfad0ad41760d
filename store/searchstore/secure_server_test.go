package searchstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/searchstore"
)

// The record store on the secured servers (es-secure, os-secure): TLS with the test CA, users
// whose role is exactly the one the package documentation gives for the record store, each
// privilege of it removed in turn (the named refusal), client certificates, server names and a
// stopped node listed first.

// secureEngine is one secured server and an admin client of it (plain net/http, so that what
// sets the test up is not the code under test).
type secureEngine struct {
	testenv.Secure
	ca     []byte
	client *http.Client
}

// eachSecure runs f as a subtest per secured server whose variables are set.
func eachSecure(t *testing.T, f func(t *testing.T, e *secureEngine)) {
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
			f(t, &secureEngine{Secure: s, ca: ca, client: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: estest.CallTimeout}})
		})
	}
}

func (e *secureEngine) openSearch() bool { return e.Server == testenv.SecureOpenSearch }

// do sends one admin request and returns the status and the body; a transport error fails the
// test.
func (e *secureEngine) do(t testing.TB, method, path, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), estest.CallTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(e.User, e.Password)
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (e *secureEngine) must(t testing.TB, method, path, body string) []byte {
	t.Helper()
	status, b := e.do(t, method, path, body)
	if status < 200 || status > 299 {
		t.Fatalf("%s %s: status %d: %s", method, path, status, b)
	}
	return b
}

// index creates a one-shard index without replicas (a single node) and deletes it when the
// test ends.
func (e *secureEngine) index(t testing.TB, name string) {
	t.Helper()
	e.must(t, "PUT", "/"+name, `{"settings":{"number_of_shards":1,"number_of_replicas":0}}`)
	t.Cleanup(func() { e.do(t, "DELETE", "/"+name, "") })
}

// grant is a role: cluster privileges (Elasticsearch) or permissions (OpenSearch), and the
// privileges or actions on the index patterns.
type grant struct {
	cluster []string
	index   []string
}

// recordStoreGrant is the least privilege of a store.Service over this adapter, reads and
// writes (the package documentation's table): Elasticsearch read, write and
// view_index_metadata (the dataset check, HEAD /<index>, is indices:admin/get) on the
// datasets; OpenSearch the same on the index, plus the cluster-level actions it checks _bulk
// and _mget as.
func (e *secureEngine) recordStoreGrant() grant {
	if e.openSearch() {
		return grant{cluster: []string{"indices:data/write/bulk", "indices:data/read/mget"}, index: []string{"read", "write", "indices:admin/get"}}
	}
	return grant{index: []string{"read", "write", "view_index_metadata"}}
}

// user creates a role with g on the index patterns and a user holding it, removed when the
// test ends, and waits until the user authenticates. putRole changes the role later.
func (e *secureEngine) user(t testing.TB, g grant, patterns ...string) (user, password, role string) {
	t.Helper()
	name := estest.UniqueName(t, "searchstore-secure")
	role, user, password = name+"-role", name+"-user", "Pw-"+estest.RandomHex(t, 8)+"-x9!"
	e.putRole(t, role, g, patterns)
	if e.openSearch() {
		t.Cleanup(func() { e.do(t, "DELETE", "/_plugins/_security/api/roles/"+role, "") })
		e.must(t, "PUT", "/_plugins/_security/api/internalusers/"+user, `{"password":"`+password+`"}`)
		e.must(t, "PUT", "/_plugins/_security/api/rolesmapping/"+role, `{"users":["`+user+`"]}`)
		t.Cleanup(func() {
			e.do(t, "DELETE", "/_plugins/_security/api/rolesmapping/"+role, "")
			e.do(t, "DELETE", "/_plugins/_security/api/internalusers/"+user, "")
		})
	} else {
		t.Cleanup(func() { e.do(t, "DELETE", "/_security/role/"+role, "") })
		e.must(t, "PUT", "/_security/user/"+user, `{"password":"`+password+`","roles":["`+role+`"]}`)
		t.Cleanup(func() { e.do(t, "DELETE", "/_security/user/"+user, "") })
	}
	// A new user may take a moment to reach the node's caches.
	whoami := "/_security/_authenticate"
	if e.openSearch() {
		whoami = "/_plugins/_security/authinfo"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", e.URL+whoami, nil)
		req.SetBasicAuth(user, password)
		res, err := e.client.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return user, password, role
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("user %s does not authenticate after 30s: %v", user, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// putRole creates or replaces a role: g on the index patterns.
func (e *secureEngine) putRole(t testing.TB, role string, g grant, patterns []string) {
	t.Helper()
	list := func(v []string) string {
		if v == nil {
			v = []string{}
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if e.openSearch() {
		e.must(t, "PUT", "/_plugins/_security/api/roles/"+role, fmt.Sprintf(`{"cluster_permissions":%s,"index_permissions":[{"index_patterns":%s,"allowed_actions":%s}]}`, list(g.cluster), list(patterns), list(g.index)))
	} else {
		e.must(t, "PUT", "/_security/role/"+role, fmt.Sprintf(`{"cluster":%s,"indices":[{"names":%s,"privileges":%s}]}`, list(g.cluster), list(patterns), list(g.index)))
	}
}

// grantCertUser gives the client certificate's user the record store's role on index too,
// until the test ends. On Elasticsearch its role already covers every index; OpenSearch's
// (cluster_all, indices_all) lacks the cluster-level actions _bulk and _mget are checked as
// (indices:data/write/bulk, indices:data/read/mget: not cluster:*), so a role of this test's
// is mapped to it as well.
func (e *secureEngine) grantCertUser(t testing.TB, index string) {
	t.Helper()
	if !e.openSearch() {
		return
	}
	role := estest.UniqueName(t, "searchstore-secure-cert")
	e.putRole(t, role, e.recordStoreGrant(), []string{index})
	t.Cleanup(func() { e.do(t, "DELETE", "/_plugins/_security/api/roles/"+role, "") })
	e.must(t, "PUT", "/_plugins/_security/api/rolesmapping/"+role, `{"users":["`+e.ClientUser+`"]}`)
	t.Cleanup(func() { e.do(t, "DELETE", "/_plugins/_security/api/rolesmapping/"+role, "") })
	cfg, err := e.TLSConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: estest.CallTimeout}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var info struct {
			Roles []string `json:"roles"`
		}
		res, err := c.Get(e.URL + "/_plugins/_security/authinfo")
		if err == nil {
			_ = json.NewDecoder(res.Body).Decode(&info)
			res.Body.Close()
			if slices.Contains(info.Roles, role) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the certificate's user has not got role %s after 30s (%v)", role, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// store opens the adapter on the server with opts (URLs: the server's unless given).
func (e *secureEngine) store(t testing.TB, opts searchstore.Options, urls ...string) *searchstore.Store {
	t.Helper()
	if len(urls) == 0 {
		urls = []string{e.URL}
	}
	s, err := searchstore.NewFromURLs(urls, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func secAddr(dataset, key string) driver.Address {
	return driver.Address{Store: "s", Namespace: "n", Dataset: dataset, Key: driver.NewStringKey(key)}
}

func secPut(a driver.Address, doc string, cond driver.Condition) driver.Write {
	return driver.Write{Kind: driver.Put, Addr: a, Doc: driver.Document{JSON: []byte(doc)}, Cond: cond}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// wantDenied fails unless err is KindPermissionDenied and says every part.
func wantDenied(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil || driver.KindOf(err) != driver.KindPermissionDenied {
		t.Fatalf("%s: %v (kind %v), want permission denied", what, err, driver.KindOf(err))
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: %v does not say %q", what, err, p)
		}
	}
}

// TestSecureRecordStoreRole: with exactly the documented role on the datasets' pattern, every
// operation works over TLS (the CA given as PEM); a dataset outside the pattern fails per item
// with KindPermissionDenied naming the action, while the other items of the same calls
// succeed.
func TestSecureRecordStoreRole(t *testing.T) {
	eachSecure(t, func(t *testing.T, e *secureEngine) {
		base := estest.UniqueName(t, "searchstore-secure")
		ok, denied := base+"-ok", base+"-denied"
		e.index(t, ok)
		e.index(t, denied)
		user, password, _ := e.user(t, e.recordStoreGrant(), base+"-ok*")
		s := e.store(t, searchstore.Options{Username: user, Password: password, CACert: e.ca})
		ctx := ctxOf(t)

		res, err := s.Write(ctx, []driver.Write{
			secPut(secAddr(ok, "1"), `{"a":1,"new_field":"dynamic mapping update"}`, driver.Condition{Kind: driver.IfAbsent}),
			secPut(secAddr(denied, "1"), `{"a":1}`, driver.Condition{}),
		}, driver.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || res[0].Outcome != driver.Created {
			t.Fatalf("write to the role's dataset: %+v", res[0])
		}
		// The dataset check (HEAD /<index>) is the first refusal.
		wantDenied(t, "write outside the role", res[1].Err, "indices:admin/get", user)

		rr, err := s.Read(ctx, []driver.Address{secAddr(ok, "1"), secAddr(denied, "1"), secAddr(ok, "absent")})
		if err != nil {
			t.Fatal(err)
		}
		if rr[0].Err != nil || !rr[0].Found || rr[2].Err != nil || rr[2].Found {
			t.Fatalf("reads in the role's dataset: %+v %+v", rr[0], rr[2])
		}
		wantDenied(t, "read outside the role", rr[1].Err, "indices:data/read/mget[shard]", user)

		// Conditional writes and deletes.
		res, err = s.Write(ctx, []driver.Write{
			secPut(secAddr(ok, "1"), `{"a":2}`, driver.Condition{Kind: driver.IfRevision, Revision: rr[0].Revision}),
			{Kind: driver.Delete, Addr: secAddr(ok, "absent")},
		}, driver.WriteOptions{Visible: true})
		if err != nil || res[0].Err != nil || res[0].Outcome != driver.Updated || res[1].Err != nil {
			t.Fatalf("conditional put and delete: %+v, %v", res, err)
		}
	})
}

// TestSecureRecordStorePrivilegeRemoved: each privilege of the documented role, removed alone,
// makes the operation that needs it fail with KindPermissionDenied naming the action the
// engine refused.
func TestSecureRecordStorePrivilegeRemoved(t *testing.T) {
	eachSecure(t, func(t *testing.T, e *secureEngine) {
		full := e.recordStoreGrant()
		type removal struct {
			cluster bool   // a cluster privilege, else an index one
			name    string // the privilege removed
			read    bool   // the read fails, else the write
			action  string // what the refusal names
		}
		// Elasticsearch refuses a whole _bulk or _mget when the user holds the privilege on
		// no index at all (indices:data/write/bulk, indices:data/read/mget), and per item on
		// the indices it does not cover otherwise (TestSecureRecordStoreRole).
		cases := []removal{
			{name: "read", read: true, action: "indices:data/read/mget"},
			{name: "write", action: "indices:data/write/bulk"},
			{name: "view_index_metadata", action: "indices:admin/get"},
		}
		if e.openSearch() {
			cases = []removal{
				{cluster: true, name: "indices:data/write/bulk", action: "indices:data/write/bulk"},
				{cluster: true, name: "indices:data/read/mget", read: true, action: "indices:data/read/mget"},
				{name: "read", read: true, action: "indices:data/read/mget[shard]"},
				{name: "write", action: "indices:data/write/bulk[s]"},
				{name: "indices:admin/get", action: "indices:admin/get"},
			}
		}
		base := estest.UniqueName(t, "searchstore-secure")
		e.index(t, base)
		e.must(t, "PUT", "/"+base+"/_doc/1?refresh=true", `{"a":1}`)
		// One user, its role replaced for each case (creating users is slow: password hashing).
		user, password, role := e.user(t, full, base)
		// Every write checks its dataset (no cache), so that the check's privilege is needed.
		s := e.store(t, searchstore.Options{Username: user, Password: password, CACert: e.ca, DatasetTTL: time.Nanosecond})
		ctx := ctxOf(t)
		// read and write return the failure of one operation; a whole call refused is its
		// items' failure, as the Service reports it.
		read := func() error {
			rr, err := s.Read(ctx, []driver.Address{secAddr(base, "1")})
			switch {
			case err != nil:
				return err
			case rr[0].Err == nil && !rr[0].Found:
				t.Fatal("the document was not found")
			}
			return rr[0].Err
		}
		write := func() error {
			res, err := s.Write(ctx, []driver.Write{secPut(secAddr(base, "2"), `{"a":2}`, driver.Condition{})}, driver.WriteOptions{})
			if err != nil {
				return err
			}
			return res[0].Err
		}
		for _, c := range cases {
			t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
				g := grant{cluster: slices.Clone(full.cluster), index: slices.Clone(full.index)}
				if c.cluster {
					g.cluster = slices.DeleteFunc(g.cluster, func(p string) bool { return p == c.name })
				} else {
					g.index = slices.DeleteFunc(g.index, func(p string) bool { return p == c.name })
				}
				e.putRole(t, role, g, []string{base})
				failing, other := write, read
				if c.read {
					failing, other = read, write
				}
				// The role's change reaches the node's privilege cache soon after the PUT.
				deadline := time.Now().Add(30 * time.Second)
				err := failing()
				for err == nil && time.Now().Before(deadline) {
					time.Sleep(100 * time.Millisecond)
					err = failing()
				}
				wantDenied(t, "without "+c.name, err, c.action)
				if err := other(); err != nil {
					t.Fatalf("without %s, the other operation failed too: %v", c.name, err)
				}
			})
		}
	})
}

// TestSecureCredentialsAndTLS: a client certificate alone authenticates; a wrong password is
// "authentication failed" (KindPermissionDenied, not retryable); without the CA, or with a
// server name the certificate does not carry, nothing is sent (KindInternal); with the
// name it does carry, all works over an address URL.
func TestSecureCredentialsAndTLS(t *testing.T) {
	eachSecure(t, func(t *testing.T, e *secureEngine) {
		base := estest.UniqueName(t, "searchstore-secure")
		e.index(t, base)
		cert, err := os.ReadFile(e.ClientCertFile)
		if err != nil {
			t.Fatal(err)
		}
		key, err := os.ReadFile(e.ClientKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxOf(t)
		put := func(s *searchstore.Store, id string) error {
			res, err := s.Write(ctx, []driver.Write{secPut(secAddr(base, id), `{"a":1}`, driver.Condition{})}, driver.WriteOptions{})
			if err != nil {
				return err
			}
			return res[0].Err
		}

		t.Run("client_certificate", func(t *testing.T) {
			e.grantCertUser(t, base)
			s := e.store(t, searchstore.Options{CACert: e.ca, ClientCert: cert, ClientKey: key})
			if err := put(s, "cert"); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("wrong_password", func(t *testing.T) {
			s := e.store(t, searchstore.Options{Username: e.User, Password: e.Password + "-wrong", CACert: e.ca})
			err := put(s, "x")
			wantDenied(t, "wrong password", err, "authentication failed", "basic")
			if strings.Contains(err.Error(), e.Password) {
				t.Fatalf("the error quotes the password: %v", err)
			}
			if driver.KindOf(err).Retryable() {
				t.Fatal("retryable")
			}
		})
		t.Run("server_name", func(t *testing.T) {
			// The node's certificate names localhost and 127.0.0.1.
			u := strings.Replace(e.URL, "://localhost:", "://127.0.0.1:", 1)
			s := e.store(t, searchstore.Options{Username: e.User, Password: e.Password, CACert: e.ca, ServerName: "localhost"}, u)
			if err := put(s, "sni"); err != nil {
				t.Fatal(err)
			}
			s = e.store(t, searchstore.Options{Username: e.User, Password: e.Password, CACert: e.ca, ServerName: "not-the-node.test"}, u)
			if err := put(s, "x"); driver.KindOf(err) != driver.KindInternal || !strings.Contains(fmt.Sprint(err), "certificate does not verify") {
				t.Fatalf("a server name the certificate lacks: %v", err)
			}
		})
		t.Run("system_roots", func(t *testing.T) {
			s := e.store(t, searchstore.Options{Username: e.User, Password: e.Password})
			if err := put(s, "x"); driver.KindOf(err) != driver.KindInternal || !strings.Contains(fmt.Sprint(err), "certificate does not verify") {
				t.Fatalf("without the CA: %v", err)
			}
		})
	})
}

// TestSecureStoppedNodeFirst: a stopped node listed before the secured one costs no failed
// call: every write and read goes through.
func TestSecureStoppedNodeFirst(t *testing.T) {
	eachSecure(t, func(t *testing.T, e *secureEngine) {
		base := estest.UniqueName(t, "searchstore-secure")
		e.index(t, base)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "https://" + l.Addr().String()
		l.Close()
		s := e.store(t, searchstore.Options{Username: e.User, Password: e.Password, CACert: e.ca, DatasetTTL: time.Nanosecond}, dead, e.URL)
		ctx := ctxOf(t)
		for i := range 20 {
			a := secAddr(base, fmt.Sprint(i))
			res, err := s.Write(ctx, []driver.Write{secPut(a, `{"i":1}`, driver.Condition{})}, driver.WriteOptions{})
			if err != nil || res[0].Err != nil {
				t.Fatalf("write %d: %+v, %v", i, res, err)
			}
			rr, err := s.Read(ctx, []driver.Address{a})
			if err != nil || rr[0].Err != nil || !rr[0].Found {
				t.Fatalf("read %d: %+v, %v", i, rr, err)
			}
		}
	})
}
