// Package cdc is the change-data-capture port: the change event model, source positions and
// their external versions, table schemas, the Source and Stream a pipeline reads, and the Sink
// and CheckpointStore it writes to. Sources live in pgcdc (PostgreSQL logical replication) and
// mysqlcdc (MySQL and MariaDB binlog); the Elasticsearch sink in package sink.
//
// # Events
//
// An [Event] is one change of one row: insert, update, delete, or a snapshot read, with the
// table's identity ([TableID]: connector, source, database, schema, table), the [TableSchema]
// it was made under, the row before and after in normalized [Value] shapes, its [Position],
// commit time and transaction id. The same row yields the same values from the snapshot and
// from the stream.
//
// # Versions
//
// A [Position] yields an int64 version for Elasticsearch's external versioning. For successive
// changes of the same row it increases strictly -- across transactions, within one transaction,
// across restarts and replays -- and snapshot reads get versions below every change streamed
// after the snapshot. That is what lets an index converge to the source's current state under
// any replay or reordering. Each source documents its derivation and its limits.
//
// # Checkpoints
//
// A [Checkpoint] is an opaque resume point a source puts on the last event of each transaction.
// The runner stores it only after the sink acknowledged every event up to it, and then acks it
// to the stream so the server may discard older history. A restart resumes from the stored
// checkpoint: nothing committed is lost; events after it may be delivered again, and external
// versioning makes that harmless. A checkpoint another kind of source wrote (a pipeline moved
// between a native source and Debezium by a configuration change alone) is refused at Open,
// permanently, with a [*ForeignCheckpointError] (errors.Is(err, [ErrForeignCheckpoint])) that
// names whose it is and the switch procedure; pgcdc, mysqlcdc and debezium alias the type.
//
// # Runner
//
// [Runner] drives one pipeline: it reads a [Stream], forms batches (count, estimated bytes,
// time since the batch's first event), hands them to a [Sink], writes the sink's dead letters,
// and only then saves the last transaction-end checkpoint of the batch and acks it to the
// stream. Backpressure replays the identical batch after jittered exponential backoff. Since
// a batch may end inside a transaction, a restart replays everything after the stored
// checkpoint: the unfinished transaction and at most the last batch (TestRunnerCrash proves
// the bound).
//
// # Supervision and failure classes
//
// A Runner rides through failures: after any failure of the source or the sink that is not
// permanent (a lost connection, a server restarting or shutting down, a timeout, a 5xx) it
// closes the stream and opens the source again at the stored checkpoint, after a jittered
// exponential backoff capped at RunnerOptions.BackoffMax (5s by default) that starts over once
// a batch succeeded. A permanent failure -- marked with [Permanent] by the adapter that met it
// (authentication refused, history the checkpoint needs is gone, a fencing conflict, an
// invalid configuration), or a [*StartError] -- stops Run with that error
// (errors.Is(err, [ErrPermanent])). Unclassified failures are retried: a wrong retry costs a
// reconnect, never data, since every reopening resumes at the durable checkpoint.
//
// # Health, lag and status
//
// [Runner.Health] is unhealthy, with the reason, before Run and after it returned, while
// starting and reconnecting, while the sink's destination is unavailable (at once), while a
// write waits for the sink's answer beyond UnansweredThreshold (default 8s, well before the
// sink's own request timeout: an engine that went silent shows within seconds), while one
// batch keeps being pushed back beyond BackpressureThreshold, while the pipeline trails its
// source beyond LagThreshold, and while events wait beyond StallThreshold with no batch
// succeeding. A source that is a
// [LagReporter] is asked every LagInterval -- whether the stream is open or not -- how far the
// stored checkpoint trails the server ([SourceLag]: change-log bytes, what the server retains,
// positions on the source's own axis); the runner turns the positions into seconds behind
// (since the server was last at a position the pipeline has passed). [Runner.Status] gathers
// health, state, progress (snapshot totals kept after the snapshot), lag, reconnects, the
// last failure and since when a batch is pushed back or a write unanswered for metrics
// exporters and status commands.
//
// # Re-snapshots
//
// A source that is a [Resnapshotter] reads tables again while its stream keeps running
// ([ResnapshotRequest]: tables, a condition); Resnapshot returns once the request is durable at
// the source, and the stream reports its progress through [Stream.Progress] with
// SnapshotProgress.Resnapshot set. The runner keeps it apart from the initial snapshot's
// (Progress.Resnapshot), reports the state "resnapshotting", and keeps checking lag meanwhile.
// A request the source cannot carry out wraps [ErrResnapshotRefused].
//
// # Start checks
//
// A configuration that cannot work is refused at start, not dead-lettered row by row: a
// source refuses a captured table that does not exist (or differs in case) from Open, and a
// sink refuses tables it could never write (no key, an invalid index name, two tables bound
// to one index) before any event is read. Both return a [*StartError] (errors.Is(err,
// [ErrStart])) with one [StartProblem] per table: what is wrong and the fix. The runner finds
// the two halves by type assertion, as database/sql finds optional driver interfaces: a
// [Stream] that implements [TableLister] lists its tables as of Open, a [Sink] that
// implements [TableChecker] checks them; the runner calls the checker right after Open and
// before reading any event, and a refusal stops the pipeline with its checkpoint unchanged.
// The check runs once per Run, not on reopenings. Tables a stream only meets later (a table
// created in a captured schema, a FOR ALL TABLES publication gaining one) are the sink's to
// check on their first write: it dead-letters the rows of one it could never write, with the
// reason and the fix, and never stops the pipeline for it.
//
// # Dead letters
//
// Malformed events and the rows a sink dead-letters go to a [DeadLetterWriter]; [FileDLQ]
// appends JSON lines, fsynced, holding the whole event so the row can be replayed. Row data is
// kept in the DLQ file and nowhere else: never in an error or a log line. The runner logs
// dead letters and truncates at Warn (table, op, position, reason), rate-limited per table
// and reason class (RunnerOptions.ReportInterval), so a table whose every row fails shows up
// in the log, not only in the DLQ's size.
package cdc
