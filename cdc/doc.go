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
// versioning makes that harmless.
//
// # Runner
//
// [Runner] drives one pipeline: it reads a [Stream], forms batches (count, estimated bytes,
// time since the batch's first event), hands them to a [Sink], writes the sink's dead letters,
// and only then saves the last transaction-end checkpoint of the batch and acks it to the
// stream. Backpressure replays the identical batch after jittered exponential backoff; any
// other sink error stops the pipeline with its checkpoint unchanged. Progress and Health
// report on it (Health turns unhealthy when events wait longer than the stall threshold with
// no batch succeeding). Since a batch may end inside a transaction, a restart replays
// everything after the stored checkpoint: the unfinished transaction and at most the last
// batch (TestRunnerCrash proves the bound).
//
// # Dead letters
//
// Malformed events and the rows a sink dead-letters go to a [DeadLetterWriter]; [FileDLQ]
// appends JSON lines, fsynced, holding the whole event so the row can be replayed. Row data is
// kept in the DLQ file and nowhere else: never in an error or a log line.
package cdc
