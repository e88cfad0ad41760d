package smoke

import (
	"encoding/json"
	"testing"

	"github.com/tributary-dev/tributary/internal/estest"
)

// searchServer is one Elasticsearch or OpenSearch node under test.
//
// Requests go through esapi on a bare elastictransport.Client (see internal/estest) rather than
// elasticsearch.Client, so the same typed request builders work against both engines with no
// header forging. The other way (a RoundTripper that adds the product header to every response,
// handed to elasticsearch.Config.Transport) also works and is exercised by the product_check
// subtest.
type searchServer struct {
	*estest.Node
	prefix string // unique per run; every index, alias and document name of the run starts with it
}

func newSearchServer(t *testing.T, rawURL, engine string) *searchServer {
	t.Helper()
	s := &searchServer{Node: estest.Connect(t, engine, rawURL), prefix: estest.UniqueName(t, "smoke")}
	// Everything the run made starts with the prefix, or with df-w-<prefix> for the
	// auto_create_index check.
	s.DeleteAtCleanup(t, s.prefix+"*", "df-w-"+s.prefix+"*")
	return s
}

// name returns a unique lower-case index or alias name for this run.
func (s *searchServer) name(part string) string { return s.prefix + "-" + part }

// searchErrorOf returns the "error" object of a failed answer. Some endpoints (GET
// _alias/<missing>) answer with a bare string there; it comes back as Reason with an empty Type.
func searchErrorOf(t *testing.T, r estest.Result) estest.ItemError {
	t.Helper()
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	r.Decode(t, &env)
	var e estest.ItemError
	if err := json.Unmarshal(env.Error, &e); err != nil {
		var s string
		if json.Unmarshal(env.Error, &s) != nil {
			t.Fatalf("no error in %s", r.Body)
		}
		e.Reason = s
	}
	return e
}

// searchWantError asserts an HTTP error answer with the given status and error type.
func searchWantError(t *testing.T, what string, r estest.Result, status int, typ string) estest.ItemError {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.Status, status, r.Body)
	}
	e := searchErrorOf(t, r)
	if e.Type != typ {
		t.Fatalf("%s: error type %q, want %q: %s", what, e.Type, typ, r.Body)
	}
	return e
}
