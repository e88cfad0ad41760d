// Package cdctest is the conformance suite for change-data-capture sources: every source proves
// the same ordering, versioning, checkpoint, schema and value behaviour against its real
// database.
//
// A source's test supplies a Harness and calls Run inside a subtest named by the source
// (`postgres`, `mysql`), so `go test -v` shows TestConformance/<source>/<Behaviour>.
//
// # Behaviours
//
// OrderAndValues, VersionsWithinTransaction, ResumeFromCheckpoint, SnapshotThenStream,
// SchemaChange and MixedCaseNames run on small tables the suite creates with portable DDL.
// Types runs the source's own type matrix (Harness.Types): one table with a column per
// TypeCase, its rows inserted once before an initial snapshot and once more while streaming,
// and a subtest per case (TestConformance/<source>/Types/<column>) that checks the column's
// reported schema and that the snapshot and the stream both yield each row's expected
// normalized value (NULL included). A source documents the values; the matrix is where they
// are pinned.
//
// # Crash harness
//
// CrashScenario, CrashWriter, StartCrashChild, RunCrashChild and CheckCrashSinkLog drive the sources' crash
// tests: a pipeline subprocess killed at random points and restarted from its state file, and
// a check that the sink log, applied with external-version rules, equals the table.
//
// # Re-snapshots
//
// VersionedIndex applies events with external-version rules (reads and tombstone-free
// deletes included) and compares itself with a table; AwaitResnapshot consumes a stream until
// a re-snapshot is reported ended and then the events already waiting in its channel, so
// every row the re-snapshot emitted has been applied when it returns.
package cdctest
