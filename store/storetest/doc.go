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
// The Refusals behaviour holds the cases some backend refuses (names, keys, documents, date-time
// precision, size): an adapter whose Harness.Refuses names its backend must refuse exactly the
// cases that backend refuses (those whose answer an index mapping decides are not checked on
// the search engines) with the backend's kind, and memstore, run once per Options.Like, must
// refuse each case its profile refuses naming the field by its JSON Pointer: so the fake
// refuses what each adapter refuses on its real server.
//
// Subtests are named by behaviour, so `go test -v` shows TestConformance/<backend>/<Behaviour>.
//
// No behaviour depends on the machine's speed. In particular the suite's services get a merge
// budget (store.Options.MergeBudget) as long as a behaviour's own bound, so MergeContention --
// two Services on one record, as two processes -- fails only when an update is lost; and
// HotRecordOneService, many concurrent merges of one record through ONE Service with the
// default options, demands that none is refused or retried: within a Service, operations on
// one record are serialized and never race each other.
package storetest
