// Package memstore is the in-memory adapter of package store: deterministic, safe for
// concurrent use, and first-class -- it passes the same conformance suite (storetest) as the
// Elasticsearch, OpenSearch and MongoDB adapters, which makes it the fake to use in unit tests
// of code that programs against store.Store or *store.Service. New returns an [Adapter] -- the
// driver a Service runs on, not itself a store.Store: pass it to store.New under a store name.
// NewService(t, opts, names...) is that fake in one line: a *store.Service over memory stores,
// closed when the test ends. (Store is Adapter's deprecated old name, kept for one release.)
//
// # Semantics
//
// Records live in a map keyed by address; namespaces and datasets need no creation. Revisions
// come from one counter per Adapter, so they are deterministic for a given sequence of writes and
// never reused, not even by a record that was deleted and created again. Every write is visible
// when Write returns, so the visible completion mode costs nothing.
//
// Documents are kept as the JSON bytes given, with their date-time pointers: a read returns
// exactly the text written, numbers and marked date-times included.
//
// # Refusals: a fake as strict as production
//
// An Adapter refuses what a real backend refuses, so that a unit test fails where production
// would ([Options].Like; [NewWithOptions]). The default, [Strictest], refuses what any backend
// of the specification refuses (MongoDB's and Elasticsearch/OpenSearch's refusals together):
//
//   - addresses, before anything is written ([Adapter.ValidateAddress], KindInvalid): namespaces
//     and datasets MongoDB refuses as database and collection names (a namespace with one of
//     /\. "$*<>:|? or NUL, admin/local/config, ...), datasets that are no index name (upper
//     case, a leading '-', '_' or '+', one of \/*?"<>| ,#:), string keys starting with "~~"
//     (searchstore's reserved prefix);
//   - documents, per put (KindInvalid unless said): a top-level _id, _tributary (mongostore's
//     metadata field) or '$'-prefixed member; a member name with NUL; a name repeated in its
//     object; a lone UTF-16 surrogate; nesting beyond 100 levels; a number with more than 34
//     significant digits; an object whose names all start with '$' that is no Extended JSON
//     wrapper mongostore knows; a marked date-time finer than a millisecond; JSON over 16 MiB
//     (KindTooLarge).
//
// The Adapter reports its date-time precision as a driver.TimePrecisioner (a millisecond by
// default), so the Service truncates merge context times as it does for MongoDB. [MongoDB],
// [FerretDB] (MongoDB's refusals and FerretDB 1.x's: numbers that need Decimal128, -0, '$' or
// '.' in member names at any level, arrays inside arrays), [Search] and [Lenient] (the store
// contract's refusals only: any precision, any names it allows) select one profile; the size,
// precision and key kinds can be set on their own. Every refusal names the field by its JSON
// Pointer (`at "/at": ...`), never its value.
//
// storetest's Refusals behaviour holds the cases: memstore runs it in every profile, and each
// adapter runs it on its real server (mongostore as FerretDB or MongoDB, searchstore as Search),
// so a refusal copied here that the backend does not make, or the reverse, fails a test.
//
// # Deviations
//
// None known from the store contract. Each Read or Write call is atomic as a whole, which is
// more than the contract promises; do not rely on it in code that must run on other backends.
// The fake copies refusals, not conversions: it does not fold a date-time's offset into UTC
// or respell numbers as mongostore does. It does not model what an index mapping refuses (a
// type conflict, Elasticsearch's mapping depth and field limits), and it measures MongoDB's
// 16 MiB on the JSON text, not the BSON form (longer for documents of many small values).
package memstore
