package estest

import (
	"testing"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// The engines of the test environment, named as subtests and Node.Engine name them.
const (
	Elasticsearch = "elasticsearch"
	OpenSearch    = "opensearch"
)

// Engine is one engine of the test environment and the variable holding its URL.
type Engine struct {
	Name string // Elasticsearch or OpenSearch
	Env  string // a testenv variable
}

// Engines returns the engines of the test environment in the order EachEngine runs them.
func Engines() []Engine {
	return []Engine{
		{Elasticsearch, testenv.ElasticsearchURL},
		{OpenSearch, testenv.OpenSearchURL},
	}
}

// Runner is what runs subtests: *testing.T or *testing.B.
type Runner[T any] interface {
	testing.TB
	Run(name string, f func(T)) bool
}

// EachEngine runs fn once per engine, as a subtest (or sub-benchmark) named by the engine, with
// a Node of that engine's server; an engine whose variable is unset is skipped by
// testenv.Require. The subtests run one after the other unless fn calls t.Parallel.
func EachEngine[T Runner[T]](t T, fn func(t T, n *Node)) {
	for _, e := range Engines() {
		t.Run(e.Name, func(t T) {
			fn(t, Connect(t, e.Name, testenv.Require(t, e.Env)))
		})
	}
}
