// Package connecttest is the plumbing of tests that need real Debezium: it creates Debezium
// PostgreSQL and MariaDB source connectors on the test environment's Kafka Connect worker
// (scripts/testenv/connect.sh, TRIBUTARY_CONNECT_URL) and removes everything they made when the
// test ends. It is an ordinary package so that several packages' tests can import it; nothing
// outside tests may.
//
// # Connectors
//
// Require skips the test unless TRIBUTARY_CONNECT_URL and TRIBUTARY_KAFKA_BROKERS are set.
// CreatePostgres and CreateMariaDB post a connector for the database of TRIBUTARY_PG_DSN or
// TRIBUTARY_MYSQL_DSN (skipping when it is unset) and return once the connector and its one task
// run, failing the test with the task's trace when it fails instead. The configuration is what the
// Debezium consumer expects: the worker's JsonConverter with schemas, transaction metadata,
// skipped.operations=none, column.propagate.source.type=.*, decimal.handling.mode=precise (and for
// MariaDB bigint.unsigned.handling.mode=precise, snapshot.locking.mode=none); PostgresConnector and
// MariaDBConnector turn parts off, and their Extra is merged last, over everything.
//
// # Clean-up
//
// Servers are shared, so each test names its connectors, topic prefixes, slots and tables itself,
// uniquely. A connector created here is removed at the test's clean-up: stopped, its offsets
// deleted (so a connector of the same name starts anew), deleted; then its PostgreSQL replication
// slot (once inactive) and publication are dropped, and its Kafka topics deleted: the topic prefix
// itself (schema changes), every "<prefix>.*" topic (changes, transaction metadata), the heartbeat
// topic and the MariaDB schema history topic. A failed step fails the test, never silently leaks.
// A connector of the same name left by a killed earlier run is removed the same way before the
// new one is created.
//
// # Names
//
// Debezium transaction ids of PostgreSQL are "txid:lsn" where the LSN is each event's own (BEGIN,
// each record and END differ): only the part before ':' names the transaction. MariaDB's are the
// GTID. A MariaDB connector's database.server.id must be unique among the server's binlog clients
// (MariaDB drops the older connection of two with one id), so the default is derived from the
// connector's name.
package connecttest
