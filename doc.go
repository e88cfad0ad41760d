// Package tributary is the root of a library that keeps documents in Elasticsearch, OpenSearch and
// MongoDB correct under concurrency, retries and failure. This package holds no code; it is the
// map of the library.
//
// # Two halves
//
// A CDC-to-Elasticsearch mirror: PostgreSQL logical replication and MySQL/MariaDB binlog changes
// become one document per source row, upserted by primary key and versioned externally by the
// source position, so an index converges to the source's current state under replays and
// reordering, and destination fencing keeps a clone, a restore or a second writer from corrupting
// it (packages cdc, sink and esfence).
//
// A record store layer: batch reads, complete-document puts, Lua read-modify-write merges and
// deletes over memory, MongoDB, Elasticsearch and OpenSearch, with opaque revisions, same-record
// ordering, coalescing, completion modes and a durable Kafka path (packages store, luamerge and
// queue, each with its adapters).
//
// # Status
//
// The packages arrive issue by issue; DESIGN.md at the repository root keeps the file map of what
// exists and the invariants each part must keep. Real servers for the integration tests are
// started by scripts/testenv (see the README).
package tributary
