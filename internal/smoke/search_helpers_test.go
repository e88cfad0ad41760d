package smoke

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// searchCallTimeout bounds every single request, so a hung server fails the check instead of
// hanging the test binary until its global timeout.
const searchCallTimeout = 30 * time.Second

// searchServer is one Elasticsearch or OpenSearch node under test.
//
// Requests go through esapi on a bare elastictransport.Client rather than elasticsearch.Client:
// the product check ("X-Elastic-Product: Elasticsearch" on the first 2xx answer) lives in
// elasticsearch.BaseClient.Perform, not in esapi or the transport, and OpenSearch never sends that
// header. esapi only needs something with Perform(*http.Request), which the transport has, so the
// same typed request builders work against both engines with no header forging. The other way
// (a RoundTripper that adds the header to every response, handed to elasticsearch.Config.Transport)
// also works and is exercised by the product_check subtest.
type searchServer struct {
	url        string
	opensearch bool
	tp         esapi.Transport
	prefix     string // unique per run; every index, alias and document name of the run starts with it
}

func newSearchServer(t *testing.T, rawURL string, opensearch bool) *searchServer {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("bad server url %q: %v", rawURL, err)
	}
	tp, err := elastictransport.New(elastictransport.Config{
		URLs: []*url.URL{u},
		// Retrying hides server behaviour the checks want to see; a check fails loudly instead.
		DisableRetry: true,
	})
	if err != nil {
		t.Fatalf("transport: %v", err)
	}
	s := &searchServer{url: rawURL, opensearch: opensearch, tp: tp, prefix: "smoke-" + searchRandomSuffix(t)}
	t.Cleanup(func() {
		// Everything the run made starts with the prefix, or with df-w-<prefix> for the
		// auto_create_index check; wildcard deletes are allowed by the scripts' config.
		s.do(t, esapi.IndicesDeleteRequest{Index: []string{s.prefix + "*", "df-w-" + s.prefix + "*"}})
	})
	return s
}

func searchRandomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// name returns a unique lower-case index or alias name for this run.
func (s *searchServer) name(part string) string { return s.prefix + "-" + part }

// searchResult is one answer, fully read.
type searchResult struct {
	status int
	header http.Header
	body   []byte
}

// do sends req and reads the whole answer; transport failures are fatal, HTTP errors are not
// (many checks are about the error answer itself).
func (s *searchServer) do(t *testing.T, req esapi.Request) searchResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), searchCallTimeout)
	defer cancel()
	res, err := req.Do(ctx, s.tp)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%T: reading body: %v", req, err)
	}
	return searchResult{status: res.StatusCode, header: res.Header, body: body}
}

// ok is do that insists on a 2xx answer.
func (s *searchServer) ok(t *testing.T, req esapi.Request) searchResult {
	t.Helper()
	r := s.do(t, req)
	if r.status < 200 || r.status > 299 {
		t.Fatalf("%T: status %d: %s", req, r.status, r.body)
	}
	return r
}

// decode unmarshals the body into v.
func (r searchResult) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// searchError is the "error" object of an answer or of a bulk item.
type searchError struct {
	Type     string       `json:"type"`
	Reason   string       `json:"reason"`
	CausedBy *searchError `json:"caused_by"`
}

// errorOf returns the "error" object of a failed answer. Some endpoints (GET _alias/<missing>)
// answer with a bare string there; it comes back as Reason with an empty Type.
func (r searchResult) errorOf(t *testing.T) searchError {
	t.Helper()
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	r.decode(t, &env)
	var e searchError
	if err := json.Unmarshal(env.Error, &e); err != nil {
		var s string
		if json.Unmarshal(env.Error, &s) != nil {
			t.Fatalf("no error in %s", r.body)
		}
		e.Reason = s
	}
	return e
}

// searchBulkItem is one entry of a _bulk answer, whatever its action.
type searchBulkItem struct {
	Index       string       `json:"_index"`
	ID          string       `json:"_id"`
	Version     int64        `json:"_version"`
	Result      string       `json:"result"`
	Status      int          `json:"status"`
	SeqNo       int64        `json:"_seq_no"`
	PrimaryTerm int64        `json:"_primary_term"`
	Error       *searchError `json:"error"`
}

type searchBulkAnswer struct {
	Errors bool                        `json:"errors"`
	Items  []map[string]searchBulkItem `json:"items"`
}

// bulk sends NDJSON lines built from the given values and returns the single item of each line
// pair, in order. The request itself must succeed; items may fail.
func (s *searchServer) bulk(t *testing.T, req esapi.BulkRequest, lines ...any) (searchBulkAnswer, []searchBulkItem) {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	req.Body = &buf
	var ans searchBulkAnswer
	s.ok(t, req).decode(t, &ans)
	items := make([]searchBulkItem, 0, len(ans.Items))
	for _, m := range ans.Items {
		if len(m) != 1 {
			t.Fatalf("bulk item with %d actions: %v", len(m), m)
		}
		for _, it := range m {
			items = append(items, it)
		}
	}
	return ans, items
}

// searchJSONBody marshals v for a request body.
func searchJSONBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// indexExists asks HEAD /<name>.
func (s *searchServer) indexExists(t *testing.T, name string) bool {
	t.Helper()
	switch r := s.do(t, esapi.IndicesExistsRequest{Index: []string{name}}); r.status {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	default:
		t.Fatalf("HEAD %s: status %d", name, r.status)
		return false
	}
}

// searchDoc is the answer of GET <index>/_doc/<id>.
type searchDoc struct {
	Found       bool            `json:"found"`
	Version     int64           `json:"_version"`
	SeqNo       int64           `json:"_seq_no"`
	PrimaryTerm int64           `json:"_primary_term"`
	Source      json.RawMessage `json:"_source"`
}

// getDoc reads one document; Found is false on 404.
func (s *searchServer) getDoc(t *testing.T, index, id string) searchDoc {
	t.Helper()
	r := s.do(t, esapi.GetRequest{Index: index, DocumentID: id})
	if r.status != http.StatusOK && r.status != http.StatusNotFound {
		t.Fatalf("GET %s/_doc/%s: status %d: %s", index, id, r.status, r.body)
	}
	var doc searchDoc
	r.decode(t, &doc)
	return doc
}

// searchWantError asserts an HTTP error answer with the given status and error type.
func searchWantError(t *testing.T, what string, r searchResult, status int, typ string) searchError {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.body)
	}
	e := r.errorOf(t)
	if e.Type != typ {
		t.Fatalf("%s: error type %q, want %q: %s", what, e.Type, typ, r.body)
	}
	return e
}

// searchWantItemError asserts a failed bulk item.
func searchWantItemError(t *testing.T, what string, it searchBulkItem, status int, typ, reasonPart string) {
	t.Helper()
	if it.Status != status || it.Error == nil || it.Error.Type != typ || !strings.Contains(it.Error.Reason, reasonPart) {
		t.Fatalf("%s: item %+v (error %+v), want status %d type %s reason containing %q", what, it, it.Error, status, typ, reasonPart)
	}
}

func searchPtr[T any](v T) *T { return &v }
