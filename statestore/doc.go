// Package statestore keeps a deployment's durable state in one embedded file: the deployment
// identity, each pipeline's checkpoint and small ownership records (the fence of esfence).
//
// # Stores
//
// [Open] opens (or creates) a bbolt file; [NewMemory] is the in-memory implementation with the
// same API for tests. Both implement [Store] and pass the same test suite (package
// statestoretest). Every method is safe for concurrent use; each call is one atomic transaction.
//
// Package sqlstate keeps the same state in a SQL server every copy of a deployment reaches
// (the source PostgreSQL or MariaDB), for an active and a standby sharing one store: it also
// implements [Leaser], a leadership lease per pipeline with an epoch that increases on every
// takeover, and fenced writes that fail with [ErrNotLeader] once another holder took over. A
// shared store's connection failures are [ErrUnavailable] (retryable). Package mirror and
// cdcmirror do not use it yet.
//
// The memory store is also a [Leaser] with the SQL stores' lease semantics, for tests of an
// active and a standby sharing one store: the same Acquire/Renew/Release/ReadLease rules, an
// epoch per acquisition that is never reused (leases survive DeletePipeline), and [Leaser.Fenced]
// views whose writes check the epoch under the store's mutex in the same critical section as
// the write, so a takeover never falls between the check and the write. Expiry is the store's
// clock, MemoryOptions.Now ([NewMemoryWithOptions]; default time.Now), as the server's clock
// is the SQL stores': a test moves it forward to expire a lease instead of sleeping. It passes
// the lease suite (statestoretest.RunLeases, which also runs the whole behaviour suite through
// a fenced view) in TestMemoryLeases. The file store is no Leaser: one process owns its file.
//
// # Identity
//
// When Open creates a file it draws a random deployment identity (a version 4 UUID) in the same
// transaction that creates the layout, so a file either has an identity or is empty. The
// identity never changes afterwards: reopening keeps it, and a copy of the file (a clone, a
// backup restored) has the same identity -- which is what lets esfence tell a copied deployment
// from a separate one. Two separately created stores always have different identities.
//
// # Checkpoints
//
// A Store is a [cdc.CheckpointStore]: one opaque checkpoint per pipeline (a pipeline is one
// source feeding one sink, so the checkpoint is per (source, sink)). Saving overwrites;
// loading a pipeline that has none returns nil. A checkpoint is durable when SaveCheckpoint
// returns. [Store.CheckpointSaved] tells when it was last saved (Options.Now is the file
// store's clock), for status displays.
//
// # Records
//
// Records are small values kept per (pipeline, namespace, key) for the parts of a pipeline that
// need durable coordination state next to its checkpoint, e.g. esfence stores one record per
// destination index (namespace "esfence", key = the index name) holding the index's instance
// and its current and pending fence, encoded as it likes. Every stored state of a record has a
// [Revision]; revisions come from one counter per store and are never reused, not even by a
// record deleted and created again, so a compare-and-set cannot be fooled by an ABA sequence.
//
// Writes are compare-and-set: [Store.Put] takes the revision the caller last read (0 = the
// record must not exist) and fails with [ErrConflict] when the record changed meanwhile;
// [Store.Delete] likewise. A read of a missing record returns revision 0 and no error, so a
// read-modify-write loop needs no special case for creation.
//
// [Store.DeletePipeline] removes a pipeline's checkpoint and all its records in one
// transaction: deleting a pipeline resets its checkpoint in the same operation that forgets
// its destinations' ownership, as the fencing specification requires.
//
// # Durability and crashes
//
// The file store commits each call as one bbolt transaction, written and fsynced before the
// call returns. A process killed at any moment leaves a file that opens with the last
// committed values (TestFileCrash kills a writer subprocess at random points). bbolt holds an
// exclusive lock on the file: a second Open of the same path waits up to
// Options.LockTimeout and then fails with [ErrLocked].
//
// Copying the file while a store has it open may capture a torn state; use [DB.Backup] for a
// consistent copy of a live store.
//
// # Errors
//
// Errors name the pipeline, namespace and key, never values: records and checkpoints are
// opaque and may be sensitive.
package statestore
