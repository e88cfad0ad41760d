// Package storetest is the conformance suite of the store layer: every adapter runs it and so
// proves the same semantics (outcomes, error kinds, preconditions, ordering, key types,
// date-time pointers, limits, revisions, visibility and merge contention).
//
// An adapter's test is a few lines:
//
//	func TestConformance(t *testing.T) {
//		t.Run("memory", func(t *testing.T) {
//			storetest.Run(t, storetest.Harness{Adapter: memstore.New(), Namespace: "ns", Dataset: "ds"})
//		})
//	}
//
// Subtests are named by behaviour, so `go test -v` shows TestConformance/<backend>/<Behaviour>.
package storetest
