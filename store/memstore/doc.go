// Package memstore is the in-memory adapter of package store: deterministic, safe for
// concurrent use, and first-class -- it passes the same conformance suite (storetest) as the
// Elasticsearch, OpenSearch and MongoDB adapters, which makes it the fake to use in unit tests
// of code that programs against store.Store. NewService(t, opts, names...) is that fake in
// one line: a *store.Service over memory stores, closed when the test ends.
//
// # Semantics
//
// Records live in a map keyed by address; namespaces and datasets need no creation. Revisions
// come from one counter per Store, so they are deterministic for a given sequence of writes and
// never reused, not even by a record that was deleted and created again. Every write is visible
// when Write returns, so the visible completion mode costs nothing.
//
// Documents are kept as the JSON bytes given, with their date-time pointers: a read returns
// exactly the text written, numbers and marked date-times included (any precision: the string
// as given). The Store implements no driver.TimePrecisioner, so merge context times reach
// programs at full (nanosecond) precision.
//
// # Deviations
//
// None known from the store contract. Each Read or Write call is atomic as a whole, which is
// more than the contract promises; do not rely on it in code that must run on other backends.
package memstore
