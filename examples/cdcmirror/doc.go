// Command cdcmirror mirrors PostgreSQL or MySQL/MariaDB tables into Elasticsearch or
// OpenSearch, one document per row. It is a thin command over package mirror, which builds
// and supervises the pipelines; cdcmirror adds flags, signals, the progress display and the
// metrics and health endpoints (package mirror/mirrorprom).
//
//	cdcmirror [run] --config FILE [--metrics-addr 127.0.0.1:9464] [--progress auto|always|never]
//	cdcmirror status --config FILE [--pipeline NAME] [--metrics-addr 127.0.0.1:9464]
//	cdcmirror drop --config FILE [--pipeline NAME] [--indices]
//	cdcmirror prepare-cluster --config FILE [--dry-run]
//	cdcmirror switch --config FILE --from OLDFILE [--pipeline NAME] [--prepare] [--keep]
//
// Before the first start, once per cluster: every cluster a pipeline writes to must refuse to
// auto-create indices named df-w-*, because the sink's fencing of deletes rests on it (package
// esfence, "Deployment requirement"). A stock Elasticsearch or OpenSearch does not
// (action.auto_create_index defaults to true): run prepare-cluster, or send
//
//	PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}
//
// Without it every pipeline on that cluster is refused at start (see Start checks).
//
// postgres.yaml and mysql.yaml beside this file are complete one-pipeline configurations for
// Elasticsearch, postgres-opensearch.yaml and mysql-opensearch.yaml for OpenSearch, and
// pipelines.yaml runs a PostgreSQL and a MariaDB pipeline in one process; `make demo` runs
// the pair for one engine against the test servers (DEMO_ENGINE=opensearch picks OpenSearch;
// see the demo subdirectory). The Elasticsearch files map DECIMAL and unsigned 64-bit columns
// to keyword, since the test servers' Elasticsearch build lacks scaled_float and
// unsigned_long, while OpenSearch 2.19 has both and keeps the sink's numeric defaults.
//
// # Configuration
//
// CONFIG.md beside this file is the reference: every key of both forms, with its type,
// default, meaning and an example (TestConfigReference fails when a key the parser accepts is
// missing there, or documented but absent). In short, the format of package mirror
// (mirror.ParseConfig): one pipeline at the top level --
// pipeline: (its name, given once: it keys the checkpoint and owns the indices), source:, the
// specification's sinks: list with one entry (read by sink.ParseConfigNode, so every sink option
// applies), state: (the bbolt state file), dlq: (the dead-letter file, JSON lines) and
// runner: (batch_max_events, batch_max_bytes, batch_max_wait, batch_idle_wait, max_in_flight, backoff_min, backoff_max,
// stall_threshold, backpressure_threshold, unanswered_threshold, lag_threshold, lag_interval;
// zero takes the runner's default) -- or state: and pipelines:, a list of entries with name:, source:,
// sinks:, dlq: and runner:, sharing the state file.
//
// source: has type (postgres, mysql or debezium; debezium.yaml shows the last, whose keys are
// brokers, topics or topic_pattern, group, session_timeout, instance_id, infer_types,
// positioning, and catalog with dsn for records without a schema), dsn, name (the source's name in each index's
// ownership marker; default the type), tables (schema.table, schema.* for every table of a
// schema including later ones, or a bare table), snapshot (initial or never); for postgres
// slot and publication (created when missing), for mysql flavor (mariadb or mysql), server_id
// (default derived from the pipeline's name), positioning (gtid or file) and signal_table
// (where MariaDB re-snapshot requests go); snapshot_chunk for both (rows per re-snapshot query). A
// PostgreSQL dsn is a libpq URL or key=value string; a MySQL dsn is
// user:password@tcp(host:port)/db or mysql://user:password@host:port/db.
//
// ${NAME} in any value is replaced by the environment variable; "$${" is a literal "${".
// Every problem of the file -- unknown keys, bad values, missing settings -- is reported at
// once, each with one line of the file and its key (an unknown key with its section, the
// likely key and the known ones: `line 18: unknown key "number_of_replica" in
// sinks[0].config: did you mean "number_of_replicas"? (known: ...)`), and exits with status 2. Errors never quote values (they may be
// secrets); the dsn and the sink's credentials are never logged. Relative paths are relative
// to the working directory.
//
// # Start checks
//
// Each pipeline first checks its sink's cluster, before its source is opened: a cluster that
// may auto-create df-w-* indices (or whose setting the sink's user cannot read: it needs the
// monitor cluster privilege) refuses the pipeline with fencing_unenforced and exit status 2,
// printing the request that fixes it -- the cluster's own rules kept behind -df-w-*, e.g.
// "+logs-*,-*" becomes "-df-w-*,+logs-*,-*" -- and nothing is created: no replication slot or
// publication, no index, no dead-letter file, no state record. A cluster out of reach is
// checked again after a backoff; /healthz and /status say "starting: checking the cluster"
// meanwhile. The sink's auto_create_index: false changes nothing here: the sink creates and
// claims its indices either way.
//
// A configuration that cannot work stops its pipeline at start, before any row is written,
// with one line per table saying what is wrong and the fix: a captured table that does not
// exist as spelled (names are exact; a table of the same name in another case is offered as
// the fix), one the publication does not publish, two tables whose rows would go into one
// index (a static index, or {table} with tables whose names differ only in case), an index
// name the template makes invalid, and a table with neither a primary key nor the id_fields
// columns (such as pgbench_history). For the last, the sink option keyless: dead_letter sends
// each of its rows to the dead-letter file instead. With several pipelines the others go on;
// when every pipeline has stopped, cdcmirror exits, with status 2 when any was refused at
// start. Dead letters and truncates are logged at Warn (table, op, position, reason; the
// first of each kind at once, then a count at most once a minute), never with row data.
//
// # Supervision
//
// Each pipeline's runner reopens its stream from the stored checkpoint after every failure
// that is not permanent (a lost connection, a server restarting, timeouts, 5xx answers), with
// a bounded jittered backoff; a permanent failure (authentication, lost history, a fencing
// conflict, a configuration that cannot work) stops that pipeline, is logged once and shows in
// /healthz, /status and the metrics.
//
// # Active and standby
//
// With state_store: instead of state: (CONFIG.md; postgres-ha.yaml and mysql-ha.yaml beside
// this file) the state lives in tables of the source's own server (package
// statestore/sqlstate), and two cdcmirror processes, on two machines, run the same file: per
// pipeline, the process holding the pipeline's lease in that store is active and the other
// standby (mirror.Config.StateStore). A standby opens neither the source nor the cluster; it
// tries to take the lease every lease_ttl/6 (at most every second), and when the active stopped
// renewing it (dead, paused, cut off), it takes the pipeline over: it fences every index of the
// pipeline at the cluster (the old active's write aliases rotated away), frees the source (a
// PostgreSQL slot's old walsender terminated; a MariaDB binlog dump ended by the server when the
// same server_id registers again -- so both processes must keep the same server_id), and resumes
// from the shared checkpoint, under 10 s with the defaults. Every state write of the old active
// is refused by the lease's epoch, every index write by the cluster, and it steps down. On
// SIGTERM the active releases its leases, so the standby takes over at once. /status and status
// show each pipeline's role (active, standby, taking over), the lease's holder
// and epoch and the takeovers; a standby is healthy with class standby (unhealthy when it cannot
// reach the store); the metrics add the role, takeovers, epoch, last takeover's duration and a
// store error gauge. Each process keeps its own dlq: file. Debezium pipelines are refused under
// state_store:. Deployment (systemd, Kubernetes), grants, timing and clocks: docs/production.md,
// "High availability".
//
// # Progress and logs
//
// Logs (log/slog text) go to stderr. While an initial snapshot runs, a progress bar on stderr
// shows the table, rows read against the catalog's estimate, rows per second and the time
// left, redrawn in place on a terminal (--progress auto, or always); when stderr is not a
// terminal, or several pipelines run, a plain line every five seconds instead (prefixed with
// the pipeline's name when there are several). Log lines wipe the bar rather than garble it.
//
// # Metrics, health and status
//
// --metrics-addr serves /metrics (Prometheus text format, from a registry of its own, not the
// global one: the mirrorprom collector under the namespace cdcmirror, plus the Go runtime and
// process collectors; see mirror/mirrorprom for every metric), /healthz (200 only when every
// pipeline is healthy, else 503; one line per pipeline, "name: ok" or "name: reason") and
// /status (every pipeline's cdc.Status as JSON: health, state, progress, snapshot,
// re-snapshot, lag, reconnects, last failure, dead letters per table). Every metric carries a pipeline label. The same
// listener takes POST /admin/resnapshot (a JSON body: pipeline, tables, where; see
// resnapshot below); keep --metrics-addr on a loopback or otherwise trusted address.
//
// The same listener serves a status page for a browser at / (also /status.html; its style
// sheet at /status.css): per pipeline its health with the class and reason, the figures of
// /status, the lag now and over the last minutes (a ring of one sample every 5 seconds for
// 15 minutes, kept in memory, drawn as an inline SVG sparkline), snapshot and re-snapshot
// progress with rate and ETA (the progress bar's figures), the reindexes asked of this
// process, dead letters per table since the start (mirror.Mirror.DeadLettersByTable),
// incomplete tables with their fix, the pipeline's indices with their health, and with a
// shared state store (state_store:) its role in the active/standby pair -- active, standby or
// taking over -- with the lease holder, the lease epoch, the takeovers this process made (the
// last one's duration) and an unreachable store. It is rendered on the server (every name
// escaped as text), reloads itself every 5 seconds, and is embedded in the binary with no
// script and no external resource (its Content-Security-Policy forbids both), so it works
// offline. Names, figures and reasons only, never row data.
//
// status prints, per pipeline (or the one --pipeline names): when its checkpoint was saved,
// how far the source's server is ahead of it (when the source measures lag), the PostgreSQL
// slot (active and its walsender, positions) and publication, the indices it owns, and the
// live health of a cdcmirror answering at --metrics-addr. While a cdcmirror runs it holds the
// state file, so the stored figures come from its /status instead.
//
// drop deletes a pipeline so that it starts over, snapshot included (mirror.Drop): the
// PostgreSQL slot and publication (nothing on MySQL), with --indices its indices, then its
// checkpoint and ownership records. --pipeline is required when the file has several. It is
// refused while the pipeline runs. Without --indices the indices stay, and a restarted
// pipeline is refused them (an index is never adopted) until they are deleted.
//
// resnapshot asks the running cdcmirror (at --metrics-addr) to read tables again while the
// pipeline keeps streaming (mirror.Resnapshot): --table as source.tables spells it
// (repeatable; none: every captured table), --where an SQL condition on each table's rows.
// It prints the request's id; the progress bar, /status, `status` and the resnapshot_*
// metrics follow it. PostgreSQL and MariaDB sources (a MySQL server answers 501). A request may
// also be written by SQL alone (pgcdc.ResnapshotPrefix; MariaDB: a row of the signal table),
// with no cdcmirror command at hand.
//
// reindex asks the running cdcmirror to rebuild one table's index without downtime
// (mirror.Reindex; POST /admin/reindex with {"pipeline", "table"}): --table as source.tables
// spells it. It prints when the reindex started and, following /status, when readers see the
// new generation (or why it failed); interrupted, it leaves the reindex running. `status`
// shows the running cdcmirror's reindexes. Readers query the index name, which the sink's
// read_alias: true makes a read alias from the start (without it, the first reindex replaces
// the index by the alias).
//
// switch moves a pipeline between a native source and Debezium on the same indices
// (mirror.Switch): --config is the file it will run with, --from the one it ran with (the same
// pipeline name, state file and source name). It resets the checkpoint, keeping the indices and
// their ownership, and removes what the old path leaves behind unless --keep: the PostgreSQL
// slot and publication, or the consumer group and its offsets. It is refused while the old path
// runs (the state file held, the slot active, the group with members). Native to Debezium:
// create the connector with snapshot.mode=no_data while the native pipeline runs, wait until its
// topics receive changes, stop the pipeline, switch, run. Debezium to native: switch --prepare
// while the Debezium pipeline runs (it creates the native slot and publication, or records the
// binlog position beside the state file), wait until the pipeline has applied every change
// committed before it, stop it, switch, run: the native source snapshots over the index with
// versions that never go backwards and streams from the prepared position (README, "Switching
// between the native source and Debezium"). A pipeline switched by a configuration change
// alone refuses to start, naming the checkpoint it found (Debezium's or a native source's) and
// this command.
//
// prepare-cluster makes every cluster of the file enforce the requirement
// (mirror.PrepareClusters): for each distinct cluster (by cluster_uuid) it reads the effective
// action.auto_create_index with the sinks' credentials and says "already enforced" when it
// forbids df-w-* ("false" forbids every auto-creation, so it does); otherwise it sends the
// request (persistent; a transient value that would override it is reset in the same
// request) with the credentials of each sink of that cluster in turn until one is allowed,
// and reads the setting again. A user who may not update cluster settings (Elasticsearch's
// manage cluster privilege; OpenSearch's cluster:admin/settings/update) gets the request to
// hand to an administrator and the privilege it lacks. --dry-run only reads and prints. It
// needs neither the sources nor the state file, so it may run beside a running cdcmirror. It
// exits 0 when every cluster enforces the rule, 1 otherwise (also after a dry run).
//
// # Stopping
//
// SIGINT or SIGTERM stops every pipeline: the batch in flight is abandoned, each checkpoint
// stays at the last batch that completed, and the next start resumes there (replaying at most
// that batch, which external versioning makes harmless). A second signal ends a shutdown that
// hangs. Exit status: 0 after a signal, 1 when every pipeline failed otherwise (or a status or
// drop command failed), 2 for a bad command line or configuration, including pipelines
// refused at start (see Start checks), the cluster check's refusal among them.
package main
