// Package mirror is the CDC half's composition root: one Config names a state file and one or
// more pipelines, each a PostgreSQL or MySQL/MariaDB source (or Debezium's change events of
// one in Kafka) mirrored into Elasticsearch or OpenSearch, and Open builds everything from it
// -- the state file (statestore), per pipeline its dead-letter file (cdc.FileDLQ), sink
// (package sink), source (cdc/pgcdc, cdc/mysqlcdc or cdc/debezium) and runner (cdc.Runner). It is the only workflow that imports the source adapters.
//
//	cfg, err := mirror.LoadConfig("mirror.yaml") // or a Config built in Go
//	m, err := mirror.Open(cfg, &mirror.Options{Logger: log})
//	defer m.Close()
//	err = m.Run(ctx) // until ctx ends
//
// Every cluster a pipeline writes to must refuse to auto-create indices named df-w-* (the
// sink's fencing of deletes rests on it; see package esfence, "Deployment requirement"). A
// stock cluster does not: once per cluster, run
//
//	PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}
//
// (with rules of its own, put -df-w-* first: "+logs-*,-*" becomes "-df-w-*,+logs-*,-*"), or
// PrepareClusters, which sends it with the sinks' credentials. Run refuses a pipeline whose
// cluster does not, before anything is created (see Running).
//
// # Configuration
//
// A Config holds State (the bbolt file every pipeline shares: deployment identity, and per
// pipeline its checkpoint and its indices' ownership records) -- or StateStore, the same state
// in a shared SQL store (High availability) -- and Pipelines. A pipeline's
// Name is given once: mirror hands it to the sink (sink.New's pipeline, the owner in each
// index's marker) and to the runner (cdc.NewRunner's pipeline, the checkpoint's key), which
// must agree. Both source types share one vocabulary: type, dsn, name, tables
// (schema.table, schema.* -- every table of the schema, also those created later -- or a
// bare table), snapshot (initial or never) and snapshot_chunk (rows per re-snapshot query,
// and per PostgreSQL snapshot query); PostgreSQL adds slot and publication, MySQL flavor,
// server_id, positioning and signal_table (MariaDB re-snapshot requests), and each type's own
// keys are refused on the other.
//
// Type debezium reads a Debezium connector's topics instead (cdc/debezium): brokers, topics
// or topic_pattern, group (default tributary-<pipeline>: every process of the pipeline joins
// it and takes a share of the partitions), session_timeout and instance_id (static group
// membership), infer_types, positioning (versions of MySQL/MariaDB changes), and catalog with
// dsn (the database's catalog, for records without an embedded schema) with
// decimal_handling, plain_dates (debezium.Options.PlainDates), kafka_tls and kafka_sasl. It has no tables, snapshot or slot: the connector decides those. Several
// processes of one pipeline writing the same indices set the sink's shared_owner.
// Runner settings map onto cdc.RunnerOptions (see RunnerConfig).
//
// ParseConfig and LoadConfig read YAML: one pipeline at the top level (pipeline:, source:,
// sinks:, state:, dlq:, runner:, the format examples/cdcmirror has always read) or state:
// and pipelines:, a list of entries with name:, source:, sinks:, dlq: and runner:. sinks: is
// the specification's list with one entry, read by sink.ParseConfigNode from the file's own
// node. ${NAME} is expanded from the environment (internal/yamlenv). Every problem is
// reported at once (*ConfigError), each with one line of the file, in the format of
// internal/config.Problem -- the sink entry's problems too, by their paths in the file
// (`line 18: unknown key "number_of_replica" in sinks[0].config: did you mean
// "number_of_replicas"? (known: ...)`, `line 24: sinks[0].config.batch.max_docs: must be a
// whole number`); a key an unknown one is likely a misspelling of is not reported again as
// missing. Problems never quote values, which may be secrets (FuzzMirrorConfig checks it).
// ConfigKeys lists every key the parser accepts; examples/cdcmirror/CONFIG.md documents them
// (a test there compares the two). Validate applies the same checks to a Config built in Go,
// naming keys as the list form writes them.
//
// Names must be unique, so must dead-letter files, and two PostgreSQL pipelines on one
// database need slots of their own (their defaults differ; see Slot and publication names). A
// MySQL pipeline's default server_id is derived from the pipeline's name, so pipelines of one
// file never share one.
//
// # Slot and publication names
//
// A postgres pipeline's slot and publication default to tributary_<pipeline>_<8 hex digits>
// (the pipeline's name lowercased, other characters than [a-z0-9_] as '_', cut at 50, and
// its FNV hash: unique per pipeline, as the MySQL server id is), not pgcdc.DefaultName of the
// source's name, which every pipeline of one source type shared (tributary_postgres). Open
// records the names a pipeline reads in the state file (namespace pgcdc, key names) and from
// then on they stay: a later default, or a slot: or publication: removed from the
// configuration, never moves a pipeline off the slot that holds the changes after its
// checkpoint; a slot: or publication: set wins and is recorded. A pipeline with no record
// but a pgcdc checkpoint ran under an earlier version: it keeps tributary_<source name>
// (pgcdc.DefaultName), and that is recorded. Drop removes the recorded objects, and with
// the state the record: the next start takes the default.
//
// Each publication is marked with its pipeline and deployment (the state file's identity)
// and the slot read with it (pgcdc.Options.Owner: a COMMENT ON PUBLICATION; one created by
// hand without a comment is claimed by the first pipeline that opens it). A pipeline set to
// another pipeline's slot or publication -- of this file or another deployment -- is refused
// before it creates anything, and so is Drop, with pgcdc.ErrOwnedByOther naming the owner;
// the fix is a slot: and a publication: of its own, never a table added to the other's
// publication, since two readers of one slot take each other's changes. Inspect while the
// mirror runs (the state file locked, the record out of reach) shows the configured or default
// names, or, when no slot of the default exists and one of tributary_<source name> does, that
// one.
//
// # Running
//
// Run runs each pipeline in a goroutine of its own. Each first checks its sink's cluster
// (sink.Sink.CheckCluster: the proof every claim makes, that no df-w-* index can be
// auto-created) before the runner opens the source. A refusal certain before the first write
// -- the rule not enforced, the setting unreadable for lack of the monitor privilege, the
// credentials refused -- stops that pipeline at once with a permanent error that quotes the
// request to send, and it leaves nothing behind: no replication slot or publication, no
// index, no checkpoint or ownership record, no dead-letter file (Open only opens dead-letter
// files that exist; Run creates the others once their pipeline passed the check). A cluster
// out of reach is no refusal: the check is tried again after the runner's backoff until it
// passes or ctx ends, Status saying "starting: checking the cluster" meanwhile (Health class
// starting, with the attempts and the last failure). The sink's auto_create_index: false
// (no generated mapping) changes nothing here: the sink still creates its indices and claims
// them, and deletes through a stale alias are still fenced only by the cluster's rule. Each
// cdc.Runner supervises its stream:
// a failure that is not permanent (cdc.IsPermanent) reopens it from the stored checkpoint. A
// pipeline that stops anyway is logged once and shows in Status (its Health says why), and
// the others go on; Run returns nil when ctx ends, or, once every pipeline has stopped, their
// errors joined, each a *PipelineError. Status returns every runner's cdc.Status at any time:
// metrics exporters (package mirrorprom) read it at scrape time, so gauges stay current while
// a pipeline is idle or disconnected. Its Cluster is the health of the pipeline's indices
// (green, yellow, red), one _cluster/health?level=indices read of the indices its sink
// claimed, made in the background while Status is read, at most every 5 seconds, never per
// batch: yellow (a replica unassigned) is only shown; red (a primary unassigned: writes to
// its shards fail) makes a healthy pipeline unhealthy with the class cdc.HealthClusterRed.
// Options.Observe hands each pipeline's runner and sink
// an observer for per-batch and per-request measurements.
//
// # High availability
//
// Config.StateStore (YAML state_store:) replaces the state file with a store in a SQL server
// every copy of the deployment reaches (package statestore/sqlstate: PostgreSQL, or MariaDB
// and MySQL) and makes the mirror one half of an active/standby pair: run two (or more)
// processes with the same configuration, each with its own holder name and dead-letter file.
// Each pipeline runs in the one process holding the pipeline's lease in the store (lease
// name = the pipeline's name); debezium pipelines are refused (they scale out through their
// consumer group instead). Open then builds no sink, source or runner and connects to
// nothing; Run opens the store (again and again while it is unreachable) and, per pipeline:
//
//   - standby: tries to take the lease every min(1s, lease_ttl/6); Status says State
//     "standby", Health healthy with class cdc.HealthStandby naming the active holder and
//     epoch (unhealthy when the store cannot be reached: a standby that cannot take over is
//     no standby);
//   - taking over, once it holds the lease (a new epoch): builds the pipeline's sink, source
//     and runner on the store's view fenced by that epoch (statestore.Leaser.Fenced: every
//     checkpoint and ownership-record write of an older epoch fails with
//     statestore.ErrNotLeader, in the write's own transaction); fences every index the
//     pipeline's records name at the cluster (sink.Sink.FenceOut: each write alias is rotated,
//     so an old active's writes through its alias are refused by the cluster, require_alias);
//     on PostgreSQL ends the replication stream still holding the slot (pgcdc.Source.TakeSlot:
//     a paused old active keeps its walsender until wal_sender_timeout otherwise); on
//     MariaDB/MySQL nothing is needed, the reader registering with the same server_id (both
//     processes derive it from the pipeline's name; never configure different ones) makes the
//     server drop the older connection. Then the runner starts, from the shared checkpoint;
//     Status.Leadership.Role is "taking over" until the runner reads the source, then
//     "active", with LastTakeover the time since the lease was taken;
//   - active: renews the lease every lease_ttl/3. The term ends -- the runner is stopped, its
//     sink and source closed, and the process is standby again -- when a renewal is refused
//     (another process took the lease), when no renewal succeeded before its own measure of
//     the lease ran out (lease_ttl x (1 - 0.001) from before the call that last acquired or
//     renewed it: it was paused, or cut off from the store), or as soon as any fenced write
//     is refused (ErrNotLeader). Stopping Run (SIGTERM) releases the lease, so the standby
//     takes over at its next poll. A pipeline that stops for good (a permanent error) releases
//     it too and keeps its stopped Status; the other process may then take over and try.
//
// What fences what: the lease's epoch fences the store (a stale process can neither move the
// checkpoint nor rewrite an index's ownership record, so it cannot claim an index back); the
// rotated write aliases fence the cluster (a stale process's bulk writes fail); the
// checkpoint is acknowledged to the source only after it was saved (cdc.Runner), so a stale
// process cannot move a PostgreSQL slot past what the new active loaded. Safety rests on the
// epoch, never on clocks: clocks only decide when a standby may take over (sqlstate's doc,
// Clock assumptions). A takeover therefore takes about lease_ttl (when the active died)
// plus one poll, the fence-out (two round trips to the cluster) and the source's reopening:
// under 10 s with the 6 s default. Drop takes the pipeline's lease for its duration (refused
// with ErrRunning while a process holds it: stop every process of the pair first, or a
// standby left running starts the pipeline afresh once Drop released it); Inspect reports a
// held lease as a running pipeline; Switch needs the state file. Resnapshot and Reindex run
// only in the active process (ErrStandby elsewhere).
//
// # Deleting a pipeline
//
// Drop removes a pipeline so that it starts over, snapshot included: the PostgreSQL slot and
// publication (MySQL keeps nothing for a reader), with DropOptions.Indices the indices the
// pipeline created (each only after its ownership marker proved it the pipeline's; the write
// alias goes with it; the sink creates no templates), then its checkpoint and ownership
// records (statestore.Store.DeletePipeline). It refuses with ErrRunning while the pipeline
// runs: a running mirror holds the state file's lock, or the slot is active. Without
// Indices the indices stay and a restarted pipeline is refused them (an index is never
// adopted) until they are deleted; DropReport.IndicesLeft names them. The dead-letter file is
// left alone.
//
// # Switching between the native source and Debezium
//
// Switch moves a pipeline between a native source and Debezium on the same indices, given the
// configuration it will run with and the one it ran with (same pipeline name, state file and
// source name): it resets the checkpoint -- a native source refuses a Debezium checkpoint
// (pgcdc/mysqlcdc ForeignCheckpointError) -- keeping the ownership records and the state
// file's identity, and removes the old path's slot and publication or consumer group unless
// SwitchOptions.Keep. The way back has a prepare step (SwitchOptions.Prepare) taken while the
// Debezium pipeline runs: the native slot, or the binlog position, the native stream starts
// from; the native snapshot's versions then sit above every change the Debezium path applied
// before it, so no version goes backwards (Switch's documentation; README).
//
// # Re-snapshots
//
// Resnapshot asks a running pipeline's source to read tables again while it keeps streaming
// (cdc.Resnapshotter: PostgreSQL and MariaDB sources; a MySQL server is
// ErrResnapshotUnsupported, its snapshots cannot tell their binlog position); the pipeline's
// Status follows it in Progress.Resnapshot. An unknown pipeline is ErrNoPipeline.
//
// # Schema events
//
// An index mirrors the table that bears its name now (package sink, "Schema events"): a
// TRUNCATE empties it exactly, and when another relation enters a table's name (DROP and
// CREATE, a RENAME or a move to another schema or database, a table created while streaming)
// the sink empties the index and reports the table ENTERED: its index holds only the changes
// streamed since. The mirror then asks the pipeline's source for a re-snapshot of that table,
// in the background (never holding up the write), retried with a growing pause up to 8
// attempts; the request is logged with its id and followed in Progress.Resnapshot. When the
// source cannot re-snapshot (a MySQL server that is not MariaDB, the Debezium path) or the
// request fails for good (refused, or every attempt failed), an Error line names the table,
// the cause and the fix, and the pipeline's Status lists the table in Incomplete (health
// table_incomplete, unless a worse reason holds) until a later request for it succeeds. A
// table that leaves the capture (DROP, a rename to a name not captured) keeps its index's last
// documents; when its relation comes back under a captured name, its old index is emptied
// and the new name re-snapshotted. No row data is ever logged. The sink keeps each report in
// its state until the request was made or its failure reported (sink.Sink.EnteredHandled), so
// a crash in between repeats it after the restart.
//
// # Reindexing
//
// Reindex rebuilds one table's index without downtime while the pipeline runs: a new
// generation with the mapping of the table's current schema (loaded from the source's
// catalog), every change written to both generations, a re-snapshot filling the new one, and,
// once the re-snapshot has ended and every row it read is acknowledged, the sink's read alias
// moved to it in one request (package sink, Reindexing); the old generation is deleted after
// the sink's retire_after, while Run runs (it looks every Options.RetireInterval, default
// 30 s). The driving case is a column type change at the
// source (ALTER TABLE ... ALTER COLUMN ... TYPE), whose new values the old field dead-letters.
// A re-snapshot that is given up abandons the new generation (ErrReindex). Reindex blocks until
// the switch; a reindex cut short (ctx, a crash, a switch that failed once begun) keeps
// writing to both generations, and calling Reindex again resumes it. The steps and their
// resume points:
//
//  1. BeginReindex: the state store records the next generation, then it is created and
//     claimed (a crash between: the next claim creates it); dual writes from here on.
//  2. The re-snapshot request, durable at the source (a crash: the source resumes it, and a
//     second Reindex call waits for it; once it has ended, a second call requests another,
//     harmless: versions keep the newest row).
//  3. Wait: the re-snapshot ended (its rows are in the stream) and the runner acknowledged
//     everything delivered up to then.
//  4. Switch: recorded, the new generation refreshed, one _aliases request (a crash: the next
//     claim completes it whichever side of the request it fell on; a failure in this run --
//     a refused refresh, a lost answer -- the next Reindex call completes it the same way,
//     without a re-snapshot, unless another copy of the deployment changed the table record
//     meanwhile: fenced).
//  5. Retire: the old generation deleted after retire_after (marker-checked), at Run's next
//     look (Options.RetireInterval).
//
// # Inspecting
//
// Inspect reports on a pipeline from outside a running mirror: whether a checkpoint is stored
// and when it was saved, the indices it owns, the source's lag behind the server
// (cdc.LagReporter) and, on PostgreSQL, the slot (active, walsender, positions).
package mirror
