package estest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
)

// CallTimeout bounds every request a helper sends.
const CallTimeout = 30 * time.Second

// Node is a plain client of one real Elasticsearch or OpenSearch node.
type Node struct {
	Engine    string // Elasticsearch or OpenSearch
	URL       string // as given to Connect
	Transport *elastictransport.Client
}

// Connect returns a Node for the server at rawURL running engine.
func Connect(t testing.TB, engine, rawURL string) *Node {
	t.Helper()
	// The code under test's own client (internal/search): it never retries, and a retry
	// would hide the server's answer from the test, which is often what it checks.
	tp, err := search.NewClient(search.Options{URLs: []string{rawURL}, AcceptGzip: true})
	if err != nil {
		t.Fatalf("server url %q: %v", rawURL, err)
	}
	return &Node{Engine: engine, URL: rawURL, Transport: tp}
}

// Result is one answer, fully read.
type Result struct {
	Status int
	Body   []byte
}

// Decode unmarshals the body into v and fails the test when it cannot.
func (r Result) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// Do sends req and reads the whole answer. Only a missing answer fails the test.
func (n *Node) Do(t testing.TB, req esapi.Request) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	a, err := search.Do(ctx, n.Transport, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	defer a.Release()
	return Result{Status: a.Status, Body: bytes.Clone(a.Body)}
}

// OK is Do that also fails the test on a status outside 2xx.
func (n *Node) OK(t testing.TB, req esapi.Request) Result {
	t.Helper()
	r := n.Do(t, req)
	if r.Status < 200 || r.Status > 299 {
		t.Fatalf("%T: status %d: %s", req, r.Status, r.Body)
	}
	return r
}

// JSONBody marshals v for a request body.
func JSONBody(t testing.TB, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// Ptr returns a pointer to v, for esapi's optional parameters.
func Ptr[T any](v T) *T { return &v }
