package estest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// CreateIndex creates a one-shard index without replicas (green on a single node). extra adds
// parts to the request body; keys of its "settings" (a map[string]any) join the shard settings.
func (n *Node) CreateIndex(t testing.TB, name string, extra map[string]any) {
	t.Helper()
	settings := map[string]any{"number_of_shards": 1, "number_of_replicas": 0}
	body := map[string]any{"settings": settings}
	for k, v := range extra {
		if s, ok := v.(map[string]any); ok && k == "settings" {
			for sk, sv := range s {
				settings[sk] = sv
			}
			continue
		}
		body[k] = v
	}
	n.OK(t, esapi.IndicesCreateRequest{Index: name, Body: JSONBody(t, body)})
}

// IndexExists asks HEAD /<name>; an answer other than 200 or 404 fails the test.
func (n *Node) IndexExists(t testing.TB, name string) bool {
	t.Helper()
	switch r := n.Do(t, esapi.IndicesExistsRequest{Index: []string{name}}); r.Status {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	default:
		t.Fatalf("HEAD %s: status %d", name, r.Status)
		return false
	}
}

// DeleteIndices deletes indices by name or wildcard pattern. Missing ones are not an error; any
// other refusal marks the test failed and lets it go on, so the rest of a clean-up still runs.
func (n *Node) DeleteIndices(t testing.TB, names ...string) {
	t.Helper()
	// Without ignore_unavailable one missing name fails the whole request with 404 and
	// deletes none of the others.
	req := esapi.IndicesDeleteRequest{Index: names, IgnoreUnavailable: Ptr(true)}
	if r := n.Do(t, req); r.Status != http.StatusOK && r.Status != http.StatusNotFound {
		t.Errorf("deleting %s: status %d: %s", strings.Join(names, ","), r.Status, r.Body)
	}
}

// DeleteAtCleanup deletes the indices (names or patterns) when the test ends, whether it made
// them or not.
func (n *Node) DeleteAtCleanup(t testing.TB, names ...string) {
	t.Helper()
	t.Cleanup(func() { n.DeleteIndices(t, names...) })
}

// TempIndex creates a one-shard index named by UniqueName(base), as CreateIndex does with
// extra, and deletes it when the test ends.
func (n *Node) TempIndex(t testing.TB, base string, extra map[string]any) string {
	t.Helper()
	name := UniqueName(t, base)
	n.DeleteAtCleanup(t, name)
	n.CreateIndex(t, name, extra)
	return name
}
