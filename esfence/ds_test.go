package esfence

import (
	"net/http"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// dataStream returns the name of a data stream to try to claim.
//
// The Elasticsearch integ-test zip has data streams in its core (an index template with
// data_stream makes an indexed document create one) but not the data stream REST API: PUT and
// DELETE _data_stream/<name> answer 405. A data stream made there can never be removed, so the
// tests use one fixed stream and template, created when missing and left in place. OpenSearch
// has the API; there each run makes and removes its own.
func (s *server) dataStream(t *testing.T) string {
	t.Helper()
	template := func(name, pattern string) {
		s.ok(t, esapi.IndicesPutIndexTemplateRequest{Name: name, Body: body(t, map[string]any{
			"index_patterns": []string{pattern}, "data_stream": map[string]any{}, "priority": 500,
		})})
	}
	if s.engine == "elasticsearch" {
		const name = "esfprobe-ds1"
		if !s.exists(t, name) {
			template("esfprobe-tpl", "esfprobe-ds*")
			s.ok(t, esapi.IndexRequest{Index: name, OpType: "create", Body: body(t, map[string]any{"@timestamp": "2026-01-01T00:00:00Z"})})
		}
		return name
	}
	name := s.name("stream")
	tpl := s.name("stream-tpl")
	template(tpl, name)
	s.ok(t, esapi.IndicesCreateDataStreamRequest{Name: name})
	t.Cleanup(func() {
		s.do(t, esapi.IndicesDeleteDataStreamRequest{Name: []string{name}})
		if r := s.do(t, esapi.IndicesDeleteIndexTemplateRequest{Name: tpl}); r.status != http.StatusOK {
			t.Errorf("removing template %s: %d %s", tpl, r.status, r.body)
		}
	})
	return name
}
