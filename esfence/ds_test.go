package esfence

import (
	"net/http"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
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
		s.OK(t, esapi.IndicesPutIndexTemplateRequest{Name: name, Body: estest.JSONBody(t, map[string]any{
			"index_patterns": []string{pattern}, "data_stream": map[string]any{}, "priority": 500,
		})})
	}
	if s.Engine == estest.Elasticsearch {
		const name = "esfprobe-ds1"
		if !s.IndexExists(t, name) {
			template("esfprobe-tpl", "esfprobe-ds*")
			s.OK(t, esapi.IndexRequest{Index: name, OpType: "create", Body: estest.JSONBody(t, map[string]any{"@timestamp": "2026-01-01T00:00:00Z"})})
		}
		return name
	}
	name := s.name("stream")
	tpl := s.name("stream-tpl")
	template(tpl, name)
	s.OK(t, esapi.IndicesCreateDataStreamRequest{Name: name})
	t.Cleanup(func() {
		s.Do(t, esapi.IndicesDeleteDataStreamRequest{Name: []string{name}})
		if r := s.Do(t, esapi.IndicesDeleteIndexTemplateRequest{Name: tpl}); r.Status != http.StatusOK {
			t.Errorf("removing template %s: %d %s", tpl, r.Status, r.Body)
		}
	})
	return name
}
