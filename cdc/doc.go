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
package cdc
