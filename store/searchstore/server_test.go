package searchstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// engines are the real servers the integration tests run against, named as the conformance
// subtests are.
var engines = []struct{ name, env string }{
	{"elasticsearch", testenv.ElasticsearchURL},
	{"opensearch", testenv.OpenSearchURL},
}

// server is a plain client of one real server, for setting up and inspecting what the adapter
// under test did (never through the adapter itself).
type server struct {
	url string
	tp  *elastictransport.Client
}

func newServer(t testing.TB, rawURL string) *server {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := elastictransport.New(elastictransport.Config{URLs: []*url.URL{u}, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	return &server{url: rawURL, tp: tp}
}

// do sends req and returns status and body; a transport failure is fatal.
func (s *server) do(t testing.TB, req esapi.Request) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := req.Do(ctx, s.tp)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return res.StatusCode, body
}

func (s *server) ok(t testing.TB, req esapi.Request) []byte {
	t.Helper()
	status, body := s.do(t, req)
	if status < 200 || status > 299 {
		t.Fatalf("%T: status %d: %s", req, status, body)
	}
	return body
}

func jsonBody(t testing.TB, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// uniqueName returns a lower-case index name no other run uses.
func uniqueName(t testing.TB, part string) string {
	t.Helper()
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "searchstore-test-" + part + "-" + hex.EncodeToString(b)
}

// createIndex makes a one-shard index with dynamic mapping off, so the varied fields of the
// tests never conflict, and deletes it when the test ends.
func (s *server) createIndex(t testing.TB, part string) string {
	t.Helper()
	name := uniqueName(t, part)
	s.ok(t, esapi.IndicesCreateRequest{Index: name, Body: jsonBody(t, map[string]any{
		"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0},
		"mappings": map[string]any{"dynamic": false},
	})})
	t.Cleanup(func() { s.deleteIndex(t, name) })
	return name
}

func (s *server) deleteIndex(t testing.TB, name string) {
	t.Helper()
	if status, body := s.do(t, esapi.IndicesDeleteRequest{Index: []string{name}}); status != http.StatusOK && status != http.StatusNotFound {
		t.Errorf("deleting %s: status %d: %s", name, status, body)
	}
}

func (s *server) indexExists(t testing.TB, name string) bool {
	t.Helper()
	status, _ := s.do(t, esapi.IndicesExistsRequest{Index: []string{name}})
	return status == http.StatusOK
}

// count counts the documents a search of index sees now, without forcing a refresh.
func (s *server) count(ctx context.Context, index string) (int, error) {
	res, err := esapi.CountRequest{Index: []string{index}}.Do(ctx, s.tp)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var ans struct {
		Count int `json:"count"`
	}
	if res.StatusCode != http.StatusOK {
		return 0, &statusError{res.StatusCode}
	}
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil {
		return 0, err
	}
	return ans.Count, nil
}

type statusError struct{ status int }

func (e *statusError) Error() string { return "status " + http.StatusText(e.status) }

// getSource reads a document's _source directly; found is false when it does not exist.
func (s *server) getSource(t testing.TB, index, id string) (source string, found bool) {
	t.Helper()
	status, body := s.do(t, esapi.GetRequest{Index: index, DocumentID: id})
	if status == http.StatusNotFound {
		return "", false
	}
	if status != http.StatusOK {
		t.Fatalf("GET %s/_doc/%s: status %d: %s", index, id, status, body)
	}
	var doc struct {
		Source json.RawMessage `json:"_source"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return string(doc.Source), true
}
