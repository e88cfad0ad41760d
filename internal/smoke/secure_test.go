package smoke

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The secured servers (scripts/testenv/es-secure.sh, os-secure.sh) and the three-node cluster
// (escluster.sh): what the tests of TLS, users, roles, client certificates and several URLs rely
// on. Plain net/http, so that what is proven is the server's side, not a client library's.

func TestSmokeESSecure(t *testing.T) {
	s := testenv.RequireSecure(t, testenv.SecureES)
	t.Parallel()
	runSecureSmoke(t, s, secureAPI{
		whoami:  "/_security/_authenticate",
		userKey: "username",
		createRole: func(name string) (string, string) {
			return "/_security/role/" + name, `{"cluster":["monitor"]}`
		},
		createUser: func(name, role, password string) [][2]string {
			return [][2]string{{"/_security/user/" + name, `{"password":"` + password + `","roles":["` + role + `"]}`}}
		},
		deletes: func(user, role string) []string {
			return []string{"/_security/user/" + user, "/_security/role/" + role}
		},
	})
}

func TestSmokeOpenSearchSecure(t *testing.T) {
	s := testenv.RequireSecure(t, testenv.SecureOpenSearch)
	t.Parallel()
	runSecureSmoke(t, s, secureAPI{
		whoami:  "/_plugins/_security/authinfo",
		userKey: "user_name",
		createRole: func(name string) (string, string) {
			return "/_plugins/_security/api/roles/" + name, `{"cluster_permissions":["cluster_monitor"]}`
		},
		createUser: func(name, role, password string) [][2]string {
			return [][2]string{
				{"/_plugins/_security/api/internalusers/" + name, `{"password":"` + password + `"}`},
				{"/_plugins/_security/api/rolesmapping/" + role, `{"users":["` + name + `"]}`},
			}
		},
		deletes: func(user, role string) []string {
			return []string{"/_plugins/_security/api/rolesmapping/" + role,
				"/_plugins/_security/api/internalusers/" + user, "/_plugins/_security/api/roles/" + role}
		},
	})
}

// secureCallTimeout bounds one request to a secured server, TLS handshake included: generous,
// as a handshake takes seconds on a loaded machine.
const secureCallTimeout = 2 * time.Minute

// secureAPI is where the two engines' security APIs differ.
type secureAPI struct {
	whoami     string // GET: who the request authenticated as
	userKey    string // the user's name in whoami's answer
	createRole func(name string) (path, body string)
	createUser func(name, role, password string) [][2]string // PUTs that create the user with the role
	deletes    func(user, role string) []string
}

type secureClient struct {
	base   string
	client *http.Client
	user   string
	pass   string
}

func (c secureClient) do(t *testing.T, method, path, body string) (int, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), secureCallTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// must does the request and fails the test unless the status is one of want. A 409 not
// wanted is sent again for up to 2 minutes: OpenSearch keeps each kind of security
// configuration in one document, so the changes of concurrent tests conflict. (The smoke test
// keeps its own plain client rather than internal/search/searchtest's: it proves the server
// that helper relies on.)
func (c secureClient) must(t *testing.T, method, path, body string, want ...int) []byte {
	t.Helper()
	start := time.Now()
	status, b, err := c.do(t, method, path, body)
	for err == nil && status == http.StatusConflict && !slices.Contains(want, status) && time.Since(start) < 2*time.Minute {
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
		status, b, err = c.do(t, method, path, body)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	for _, w := range want {
		if status == w {
			return b
		}
	}
	t.Fatalf("%s %s: status %d, want %v: %s", method, path, status, want, b)
	return nil
}

func httpClient(cfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: secureCallTimeout}
}

func runSecureSmoke(t *testing.T, s testenv.Secure, api secureAPI) {
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("%s is %q: not an https URL", s.Server, s.URL)
	}
	withCA, err := s.TLSConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	withCert, err := s.TLSConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	admin := secureClient{base: s.URL, client: httpClient(withCA), user: s.User, pass: s.Password}

	t.Run("tls_verifies_with_ca", func(t *testing.T) {
		var h struct {
			ClusterName string `json:"cluster_name"`
			Status      string `json:"status"`
		}
		if err := json.Unmarshal(admin.must(t, "GET", "/_cluster/health", "", http.StatusOK), &h); err != nil {
			t.Fatal(err)
		}
		if h.ClusterName == "" || (h.Status != "green" && h.Status != "yellow") {
			t.Fatalf("health %+v", h)
		}
	})
	t.Run("tls_fails_without_ca", func(t *testing.T) {
		// The system pool does not hold the test CA.
		c := secureClient{base: s.URL, client: httpClient(&tls.Config{MinVersion: tls.VersionTLS12}), user: s.User, pass: s.Password}
		_, _, err := c.do(t, "GET", "/_cluster/health", "")
		var unknown x509.UnknownAuthorityError
		var verify *tls.CertificateVerificationError
		if err == nil || (!errors.As(err, &unknown) && !errors.As(err, &verify)) {
			t.Fatalf("without the CA: err %v, want a certificate verification error", err)
		}
		// Plain http on the TLS port is not answered as http.
		c = secureClient{base: strings.Replace(s.URL, "https://", "http://", 1), client: httpClient(nil)}
		if status, _, err := c.do(t, "GET", "/_cluster/health", ""); err == nil && status == http.StatusOK {
			t.Fatalf("plain http answered 200")
		}
	})
	t.Run("admin_authenticates", func(t *testing.T) {
		if got := whoami(t, admin, api); got != s.User {
			t.Fatalf("admin authenticated as %q, want %q", got, s.User)
		}
	})
	t.Run("wrong_password_401", func(t *testing.T) {
		c := admin
		c.pass = s.Password + "-wrong"
		c.must(t, "GET", api.whoami, "", http.StatusUnauthorized)
		c.user = ""
		c.must(t, "GET", api.whoami, "", http.StatusUnauthorized)
	})
	t.Run("client_certificate", func(t *testing.T) {
		c := secureClient{base: s.URL, client: httpClient(withCert)}
		if got := whoami(t, c, api); got != s.ClientUser {
			t.Fatalf("client certificate authenticated as %q, want %q", got, s.ClientUser)
		}
	})
	t.Run("runtime_user_and_role", func(t *testing.T) {
		name := estest.UniqueName(t, "smoke")
		role, user, password := name+"-role", name+"-user", "Pw-"+estest.RandomHex(t, 8)+"-x9!"
		t.Cleanup(func() {
			for _, p := range api.deletes(user, role) {
				for start := time.Now(); time.Since(start) < 2*time.Minute; time.Sleep(200 * time.Millisecond) {
					if status, _, _ := admin.do(t, "DELETE", p, ""); status != http.StatusConflict {
						break
					}
				}
			}
		})
		path, body := api.createRole(role)
		admin.must(t, "PUT", path, body, http.StatusOK, http.StatusCreated)
		for _, pb := range api.createUser(user, role, password) {
			admin.must(t, "PUT", pb[0], pb[1], http.StatusOK, http.StatusCreated)
		}
		u := secureClient{base: s.URL, client: httpClient(withCA), user: user, pass: password}
		// A new user may take a moment to be seen by the node's caches (generous: CI's servers
		// share two cores).
		deadline := time.Now().Add(2 * time.Minute)
		for {
			status, b, err := u.do(t, "GET", "/_cluster/health", "")
			if err == nil && status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the new user's health request: status %d err %v: %s", status, err, b)
			}
			time.Sleep(500 * time.Millisecond)
		}
		// monitor alone does not create an index: 403, naming the action.
		b := u.must(t, "PUT", "/"+name+"-idx", "", http.StatusForbidden)
		if !bytes.Contains(b, []byte("indices:admin/create")) {
			t.Fatalf("403 without the action: %s", b)
		}
	})
}

// whoami returns the user the request authenticated as.
func whoami(t *testing.T, c secureClient, api secureAPI) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.must(t, "GET", api.whoami, "", http.StatusOK), &m); err != nil {
		t.Fatal(err)
	}
	name, _ := m[api.userKey].(string)
	return name
}

func TestSmokeESCluster(t *testing.T) {
	urls := testenv.RequireCluster(t)
	t.Parallel()
	if len(urls) != 3 {
		t.Fatalf("%s names %d nodes, want 3: %v", testenv.ESClusterURLs, len(urls), urls)
	}
	var uuid string
	for _, u := range urls {
		c := secureClient{base: u, client: httpClient(nil)}
		var h struct {
			ClusterName   string `json:"cluster_name"`
			Status        string `json:"status"`
			NumberOfNodes int    `json:"number_of_nodes"`
		}
		if err := json.Unmarshal(c.must(t, "GET", "/_cluster/health?wait_for_nodes=3&wait_for_status=yellow&timeout=30s", "", http.StatusOK), &h); err != nil {
			t.Fatal(err)
		}
		if h.NumberOfNodes != 3 || (h.Status != "green" && h.Status != "yellow") {
			t.Fatalf("%s: health %+v, want 3 nodes, green or yellow", u, h)
		}
		var st struct {
			Metadata struct {
				ClusterUUID string `json:"cluster_uuid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(c.must(t, "GET", "/_cluster/state/metadata?filter_path=metadata.cluster_uuid", "", http.StatusOK), &st); err != nil {
			t.Fatal(err)
		}
		switch {
		case st.Metadata.ClusterUUID == "":
			t.Fatalf("%s: no cluster uuid", u)
		case uuid == "":
			uuid = st.Metadata.ClusterUUID
		case st.Metadata.ClusterUUID != uuid:
			t.Fatalf("%s: cluster uuid %q, node 1 says %q: not one cluster", u, st.Metadata.ClusterUUID, uuid)
		}
	}
	// Every node is master-eligible and holds data.
	c := secureClient{base: urls[0], client: httpClient(nil)}
	var nodes []struct {
		Name string `json:"name"`
		Role string `json:"node.role"`
	}
	if err := json.Unmarshal(c.must(t, "GET", "/_cat/nodes?format=json&h=name,node.role", "", http.StatusOK), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("_cat/nodes: %+v", nodes)
	}
	for _, n := range nodes {
		if !strings.Contains(n.Role, "m") || !strings.Contains(n.Role, "d") {
			t.Fatalf("node %s has roles %q, want master-eligible data node", n.Name, n.Role)
		}
	}
}
