// Command demo shows cdcmirror at work against the test servers: `make demo` starts
// PostgreSQL, MariaDB and Elasticsearch (`make demo DEMO_ENGINE=opensearch`: OpenSearch),
// builds cdcmirror and runs this program with -engine set to match.
//
// # What it does
//
// For PostgreSQL, then MariaDB, with the configuration files beside cdcmirror (postgres.yaml
// and mysql.yaml for Elasticsearch; postgres-opensearch.yaml and mysql-opensearch.yaml for
// OpenSearch, which keep DECIMAL numeric as scaled_float): it creates the demo table with a
// few common column types and fills it (-rows, 20000 by default), starts cdcmirror as a
// separate process -- its snapshot progress bar and log go to stderr -- and waits until the
// index holds as many documents as the table has rows. Then it updates, deletes and inserts a
// few rows in one transaction, waits until the index has the same number of documents and
// each changed row's document equals the row (absent for deleted rows), prints those
// documents and an excerpt of cdcmirror's /metrics, and stops cdcmirror with SIGINT, as an
// operator would.
//
// # Bounds and cleanup
//
// Each pipeline must converge within -timeout (2 minutes by default), else the demo fails with
// exit status 1. Before and after each pipeline it drops the table, the replication slot and
// publication (PostgreSQL), the index and the state and dead-letter files, so it can run again.
//
// # The cluster setting
//
// The sink claims an index only when the cluster (either engine) refuses to auto-create df-w-* indices. The
// demo sets action.auto_create_index to "-df-w-*,+*" when it is not already that, and puts the
// previous value back at the end; meanwhile it holds the lock the integration tests take
// around that setting (internal/testenv), so it never changes it under a running test.
package main
