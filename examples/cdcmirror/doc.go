// Command cdcmirror mirrors PostgreSQL or MySQL/MariaDB tables into Elasticsearch or
// OpenSearch, one document per row, using only the library's public packages: a source from
// cdc/pgcdc or cdc/mysqlcdc, the sink of package sink, a cdc.Runner, a statestore file and a
// cdc.FileDLQ.
//
//	cdcmirror --config FILE [--metrics-addr 127.0.0.1:9464] [--progress auto|always|never]
//
// postgres.yaml and mysql.yaml beside this file are complete configurations for
// Elasticsearch, postgres-opensearch.yaml and mysql-opensearch.yaml for OpenSearch; `make demo`
// runs the pair for one engine against the test servers (DEMO_ENGINE=opensearch picks
// OpenSearch; see the demo subdirectory). The two pairs differ in the sink's url and mapping
// options: the test servers' Elasticsearch build lacks scaled_float and unsigned_long, so its
// files map DECIMAL and unsigned 64-bit columns to keyword, while OpenSearch 2.19 has both
// and keeps the sink's numeric defaults.
//
// # Configuration
//
// A YAML file with pipeline: (the name that keys the checkpoint), source:, the specification's
// sinks: list with exactly one entry (read by sink.ParseConfig, so every sink option applies),
// state: (the bbolt state file: deployment identity, checkpoint, index ownership), dlq: (the
// dead-letter file, JSON lines) and runner: (batch_max_events, batch_max_bytes,
// batch_max_wait, backoff_min, backoff_max, stall_threshold; zero takes the runner's default).
//
// source: has type (postgres or mysql), dsn, name (the source's name in each index's ownership
// marker; default the type), tables, snapshot (initial or never); for postgres slot and
// publication (created when missing), for mysql flavor (mariadb or mysql), server_id and
// positioning (gtid or file). A PostgreSQL dsn is a libpq URL or key=value string; a MySQL dsn
// is user:password@tcp(host:port)/db, and a table without a database is in the dsn's one.
//
// ${NAME} in any value is replaced by the environment variable; an unset variable is an error
// naming it, and "$${" is a literal "${". An unknown key is an error naming it and its line.
// Errors never quote values (they may be secrets); the dsn and the sink's credentials are
// never logged. Relative paths are relative to the working directory.
//
// # Start checks
//
// A configuration that cannot work stops cdcmirror at start, before any row is written,
// with exit status 2 and one line per table saying what is wrong and the fix: a captured table
// that does not exist as spelled (names are exact; a table of the same name in another case is
// offered as the fix), one the publication does not publish, two tables whose rows would go
// into one index (a static index, or {table} with tables whose names differ only in case), an
// index name the template makes invalid, and a table with neither a primary key nor the
// id_fields columns (such as pgbench_history). For the last, the sink option keyless:
// dead_letter sends each of its rows to the dead-letter file instead. Dead letters and
// truncates are logged at Warn (table, op, position, reason; the first of each kind at once,
// then a count at most once a minute), never with row data. At start, PostgreSQL tables with
// TOASTable columns and no REPLICA IDENTITY FULL are named in one Warn line each.
//
// # Progress and logs
//
// Logs (log/slog text) go to stderr. While the initial snapshot runs, a progress bar on stderr
// shows the table, rows read against the catalog's estimate, rows per second and the time
// left, redrawn in place on a terminal (--progress auto, or always); when stderr is not a
// terminal, a plain line every five seconds instead. Log lines wipe the bar rather than
// garble it.
//
// # Metrics and health
//
// --metrics-addr serves /metrics (Prometheus text format, from a registry of its own, not
// the global one) and /healthz (200 "ok", or 503 with the reason from cdc.Runner.Health).
// Every metric carries a pipeline label; other labels have a handful of values.
//
//	cdcmirror_events_total                      events in batches that succeeded; rate() is events/s
//	cdcmirror_batches_total, _checkpoints_total batches that succeeded, checkpoints saved
//	cdcmirror_batch_duration_seconds            histogram: first offer to the sink to checkpoint
//	cdcmirror_replication_lag_seconds           newest commit of the last streamed batch to its end
//	cdcmirror_dead_letters_total                events written to the dead-letter file
//	cdcmirror_backpressure_retries_total        batches offered again after backpressure
//	cdcmirror_backpressure_wait_seconds_total   time spent waiting before those offers
//	cdcmirror_bulk_requests_total{status}       _bulk requests by status class (2xx, 4xx, 5xx, none)
//	cdcmirror_bulk_duration_seconds             histogram of _bulk round trips
//	cdcmirror_bulk_request_bytes_total          _bulk body bytes
//	cdcmirror_bulk_items_total{outcome}         applied, superseded, dead_lettered, retried
//	cdcmirror_claims_total{index}               fence claims (first use, after a connection loss)
//	cdcmirror_unchanged_values_total{from}      values the source left out as unchanged, found in the
//	                                            batch or the index; unavailable: rows dead-lettered
//	cdcmirror_snapshot_active, _rows_done, _rows_estimated, cdcmirror_pending_events, cdcmirror_healthy
//
// plus the Go runtime and process collectors.
//
// # Stopping
//
// SIGINT or SIGTERM stops the runner: the batch in flight is abandoned, the checkpoint stays at
// the last batch that completed, and the next start resumes there (replaying at most that
// batch, which external versioning makes harmless). A second signal ends a shutdown that
// hangs. Exit status: 0 after a signal, 1 when the pipeline failed, 2 for a bad command line or
// configuration, including a pipeline refused at start (see Start checks).
package main
