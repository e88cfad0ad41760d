// Package smoke holds the smoke tests that prove each real test server does what later issues
// rely on: Elasticsearch and OpenSearch (index creation with _meta and an alias, external
// versioning through require_alias, atomic alias swaps, auto_create_index rules, ...), Kafka
// (acks=all and manual group commits with franz-go), PostgreSQL (pgoutput through pglogrepl),
// MariaDB (full row images through go-mysql), FerretDB (the mongo-driver calls the store uses),
// Kafka Connect (the Debezium plugins' versions, snapshot, streamed and transaction records), the
// secured Elasticsearch and OpenSearch (TLS verifies with the test CA and fails without it, the
// admin authenticates and a wrong password gets 401, the client certificate authenticates as its
// user, the admin creates a user and a role at run time and the role's limits give 403) and the
// three-node Elasticsearch cluster (three master-eligible data nodes of one cluster, green or yellow).
//
// Each server has one top-level test, TestSmoke<Server>, gated by the server's environment
// variable (see internal/testenv). `make smoke` runs them and prints "smoke: <server> ok" for each
// server whose test passed and was not skipped.
package smoke
