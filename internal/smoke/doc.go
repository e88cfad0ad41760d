// Package smoke holds the smoke tests that prove each real test server does what later issues
// rely on: Elasticsearch and OpenSearch (index creation with _meta and an alias, external
// versioning through require_alias, atomic alias swaps, auto_create_index rules, ...), Kafka
// (acks=all and manual group commits with franz-go), PostgreSQL (pgoutput through pglogrepl),
// MariaDB (full row images through go-mysql), FerretDB (the mongo-driver calls the store uses) and
// Kafka Connect (the Debezium plugins' versions, snapshot, streamed and transaction records).
//
// Each server has one top-level test, TestSmoke<Server>, gated by the server's environment
// variable (see internal/testenv). `make smoke` runs them and prints "smoke: <server> ok" for each
// server whose test passed and was not skipped.
package smoke
