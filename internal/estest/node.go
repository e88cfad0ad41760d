package estest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"
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
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("bad server url %q: %v", rawURL, err)
	}
	tp, err := elastictransport.New(elastictransport.Config{
		URLs: []*url.URL{u},
		// A retry would hide the server's answer from the test, which is often what it checks.
		DisableRetry: true,
	})
	if err != nil {
		t.Fatalf("transport: %v", err)
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
	res, err := req.Do(ctx, n.Transport)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%T: reading body: %v", req, err)
	}
	return Result{Status: res.StatusCode, Body: body}
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
