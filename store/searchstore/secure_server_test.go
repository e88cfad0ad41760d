package searchstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/privtest"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/searchstore"
)

// The record store on the secured servers (es-secure, os-secure): TLS with the test CA, users
// whose role is exactly the one the package documentation gives for the record store, each
// privilege of it removed in turn (the named refusal), client certificates, server names and a
// stopped node listed first.

// secureEngine is one secured server, with searchtest's admin client of it.
type secureEngine struct{ *searchtest.Secure }

// eachSecure runs f as a subtest per secured server whose variables are set.
func eachSecure(t *testing.T, f func(t *testing.T, e *secureEngine)) {
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) { f(t, &secureEngine{s}) })
}

// recordStoreRole is the least privilege of a store.Service over this adapter, reads and
// writes (the package documentation's table, privtest's roles).
func (e *secureEngine) recordStoreRole() privtest.Role {
	return privtest.Pick(e.Secure, privtest.ESRecordStore, privtest.OSRecordStore)
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // CI's servers share two cores
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
		e.Index(t, ok, "")
		e.Index(t, denied, "")
		user, password := e.NewUser(t, "searchstore-secure", e.recordStoreRole().Grant([]string{base + "-ok*"}))
		s := e.store(t, searchstore.Options{Username: user, Password: password, CACert: e.CA})
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
		full := e.recordStoreRole()
		type removal struct {
			name   string // the privilege removed (cluster or index)
			read   bool   // the read fails, else the write
			action string // what the refusal names
		}
		// Elasticsearch refuses a whole _bulk or _mget when the user holds the privilege on
		// no index at all (indices:data/write/bulk, indices:data/read/mget), and per item on
		// the indices it does not cover otherwise (TestSecureRecordStoreRole).
		cases := []removal{
			{name: "read", read: true, action: "indices:data/read/mget"},
			{name: "write", action: "indices:data/write/bulk"},
			{name: "view_index_metadata", action: "indices:admin/get"},
		}
		if e.OpenSearch() {
			cases = []removal{
				{name: "indices:data/write/bulk", action: "indices:data/write/bulk"},
				{name: "indices:data/read/mget", read: true, action: "indices:data/read/mget"},
				{name: "read", read: true, action: "indices:data/read/mget[shard]"},
				{name: "write", action: "indices:data/write/bulk[s]"},
				{name: "indices:admin/get", action: "indices:admin/get"},
			}
		}
		base := estest.UniqueName(t, "searchstore-secure")
		e.Index(t, base, "")
		e.Must(t, "PUT", "/"+base+"/_doc/1?refresh=true", `{"a":1}`)
		// One user, its role replaced for each case (creating users is slow: password hashing).
		acct := e.NewAccount(t, "searchstore-secure", full.Grant([]string{base}))
		// Every write checks its dataset (no cache), so that the check's privilege is needed.
		s := e.store(t, searchstore.Options{Username: acct.User, Password: acct.Password, CACert: e.CA, DatasetTTL: time.Nanosecond})
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
				acct.Set(t, full.Without(c.name).Grant([]string{base}))
				failing, other := write, read
				if c.read {
					failing, other = read, write
				}
				// The role's change reaches the node's privilege cache soon after the PUT.
				deadline := time.Now().Add(2 * time.Minute)
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
		e.Index(t, base, "")
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
			// The certificate's own role (tributary_cert) allows every action.
			s := e.store(t, searchstore.Options{CACert: e.CA, ClientCert: cert, ClientKey: key})
			if err := put(s, "cert"); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("wrong_password", func(t *testing.T) {
			s := e.store(t, searchstore.Options{Username: e.User, Password: e.Password + "-wrong", CACert: e.CA})
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
			s := e.store(t, searchstore.Options{Username: e.User, Password: e.Password, CACert: e.CA, ServerName: "localhost"}, u)
			if err := put(s, "sni"); err != nil {
				t.Fatal(err)
			}
			s = e.store(t, searchstore.Options{Username: e.User, Password: e.Password, CACert: e.CA, ServerName: "not-the-node.test"}, u)
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
		e.Index(t, base, "")
		dead := estest.ClosedURL(t, "https")
		s := e.store(t, searchstore.Options{Username: e.User, Password: e.Password, CACert: e.CA, DatasetTTL: time.Nanosecond}, dead, e.URL)
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
