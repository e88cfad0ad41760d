// Package driver is the narrow contract between the portable store package and a backend
// adapter (memstore, searchstore, mongostore). Applications program against package store; only
// adapter authors need this package.
//
// # Division of work
//
// The portable side validates requests, routes them by store name, orders operations on the same
// record, coalesces small calls, runs merges and retries conflicts and retryable failures. An
// adapter implements [Store]: it makes one attempt at the reads or writes it is given, all on
// distinct addresses, and reports per item what happened, classifying every failure with an
// [ErrorKind].
//
// # Error kinds
//
// [KindUnavailable] is the only retryable kind, and an adapter reports it only when the operation
// cannot have taken effect: a request that may have reached the backend and whose answer was lost
// is reported with another kind, because retrying it blindly could apply it twice. A stale
// [IfRevision] condition is always [KindConflict], nothing else, on every adapter.
//
// # Revisions
//
// A revision is an adapter's own opaque byte encoding (Elasticsearch: _seq_no and
// _primary_term; MongoDB: a counter in a metadata field). The portable layer hands back to
// [Store.Write] only bytes the same adapter returned, or bytes a caller deserialized: adapters
// refuse malformed ones with [KindInvalid].
//
// Package driver imports nothing from package store.
package driver
