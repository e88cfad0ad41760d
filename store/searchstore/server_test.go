package searchstore_test

import (
	"testing"

	"github.com/tributary-dev/tributary/internal/estest"
)

// server is a plain client of one real server, for setting up and inspecting what the adapter
// under test did (never through the adapter itself).
type server struct{ *estest.Node }

// eachEngine runs f as a subtest per real server whose variable is set, named as the
// conformance subtests are.
func eachEngine[T estest.Runner[T]](t T, f func(t T, srv *server)) {
	estest.EachEngine(t, func(t T, n *estest.Node) { f(t, &server{n}) })
}

// uniqueName returns a lower-case index name no other run uses.
func uniqueName(t testing.TB, part string) string {
	t.Helper()
	return estest.UniqueName(t, "searchstore-test-"+part)
}

// createIndex makes a one-shard index with dynamic mapping off, so the varied fields of the
// tests never conflict, and deletes it when the test ends.
func (s *server) createIndex(t testing.TB, part string) string {
	t.Helper()
	return s.TempIndex(t, "searchstore-test-"+part, map[string]any{"mappings": map[string]any{"dynamic": false}})
}

// getSource reads a document's _source directly; found is false when it does not exist.
func (s *server) getSource(t testing.TB, index, id string) (source string, found bool) {
	t.Helper()
	d := s.GetDoc(t, index, id)
	return string(d.Source), d.Found
}
