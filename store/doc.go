// Package store is the record store layer: batch reads, complete-document puts, merges and
// deletes over several backends at once (memstore, searchstore for Elasticsearch and
// OpenSearch, mongostore), with identical semantics on each.
//
// [New] builds a [*Service] over [Adapter]s keyed by store name (memstore.New, searchstore.New,
// mongostore.New); memstore is the adapter that needs no server, and memstore.NewService(t, nil)
// the one-line fake for unit tests. The [Store] interface is the batch API alone (Do, Close),
// which *Service implements; *Service adds the one-record helpers ([Service.Get],
// [Service.Put], [Service.Merge], [Service.Delete], [Service.DoOne]) that most programs call. An
// adapter is not a Store: it is the driver a Service runs on.
// Every type an application touches is defined here; package store/driver, the adapter
// contract, is for adapter authors only.
//
// Names: a read or delete of a record that does not exist succeeds with the outcome [Absent]
// and a nil error; [ErrDatasetNotFound] ([KindDatasetNotFound]) is the failure of an operation
// on a dataset (index, collection) that does not exist. The old names NotFound, ErrNotFound and
// KindNotFound remain as deprecated aliases for one release.
//
// # Records
//
// An [Address] names a record: the store instance, a namespace (MongoDB: the database), a
// dataset (MongoDB: the collection; Elasticsearch/OpenSearch: an existing index or alias) and a
// [Key] of one of four types (string, int64, bytes, MongoDB ObjectID). A [Document] is a JSON
// object; its date-time values are RFC 3339 strings whose JSON Pointers travel beside it, so an
// adapter with a native date-time type converts exactly those and no string that merely looks
// like a date.
//
// # Operations and results
//
// [Read], [Put], [Merge] and [Delete] build operations; [Store.Do] runs a batch of them and
// returns one [Result] per operation, in request order. For one operation, [Service.Get],
// [Service.Put], [Service.Merge], [Service.Delete] and [Service.DoOne] return its Result and
// one error (the call's or the operation's), with a [WriteOption] for a precondition or a
// completion mode. A missing record is an outcome, [Absent], with a nil error; a missing
// dataset is the error [ErrDatasetNotFound]. (NotFound, ErrNotFound and KindNotFound are the
// deprecated earlier names of those.) Puts and deletes take an optional
// [Precondition]: [IfRevision] (the opaque [Revision] a read or write returned) or [IfAbsent].
// A stale revision fails with [ErrConflict] on every backend -- also when the record was deleted
// (and perhaps created again) since.
// A revision crosses process boundaries as text ([Revision.String], [ParseRevision]) or as
// bytes ([Revision.Bytes], [RevisionFromBytes]).
//
// Every failure is a [*Error] of one closed set of kinds, checked with errors.Is against
// [ErrDatasetNotFound], [ErrAlreadyExists], [ErrConflict], [ErrInvalid], [ErrTooLarge],
// [ErrUnavailable] (retryable, reported only when the operation cannot have taken effect),
// [ErrOutcomeUnknown] (retryable, but the operation may have taken effect, and may still: a
// retry may apply it twice), [ErrCanceled], [ErrPermissionDenied] (the backend refused the
// credentials, or found them lacking a privilege the operation needs: the message says which,
// naming the action and privileges the backend names; per item, not retryable), [ErrNoQueue]
// (an accepted-mode write to a store without a queue; retryable, nothing applied) and
// [ErrInternal]; ErrorKind.Retryable is true for the three retryable kinds. The backend's own error stays reachable with errors.As. A request with any malformed operation is refused whole, before anything is
// written, with a [*RequestError] naming each bad operation; [Service.Check] gives that
// refusal without running anything. An accepted-mode write to a store without a queue is no
// such refusal: that operation fails on its own with [ErrNoQueue] (kind KindNoQueue,
// retryable, as the record-sink specification asks) and the request's other operations run.
//
// # Ordering and concurrency
//
// Operations on the same record run in order: the order of the request, and across requests
// and coalesced calls of one Service the order in which they reached it. Every path that runs
// operations (Do, coalesced calls, Apply) queues them on their record's lane; one executor at a
// time owns a lane and runs what is queued on it, so within one Service operations on one
// record never race each other through compare-and-set. Operations on different records of one
// store run together: each round sends at most one read call (for the records whose state the
// round needs and does not know) and one write call with at most one write per record.
// Different stores run concurrently and independently. A multi-record request is not a
// transaction.
//
// # Combining
//
// The operations queued on one record run as one segment on the state in memory: each sees
// the state the one before it left (merge programs run one after another on the previous
// result, preconditions are checked against it), and the segment ends in ONE write of its net
// result, conditional on the state it started from (the revision read, if-absent, or the
// first operation's own precondition when the segment starts with a put or delete, which needs
// no read). A hot record so costs one round trip per round, not one per operation. Each
// operation's Result is what it did in that sequence; only the operations whose state the
// write stored carry its Revision -- an operation whose state a later operation of the same
// write replaced reports the zero Revision, since that state was never stored. A segment
// ends before a read that follows a change (reads report stored revisions: the read is
// answered by the write itself, with no read call). When the write loses to another writer,
// the whole segment runs again on a fresh read; when the backend refuses the combined
// document (KindInvalid, KindTooLarge), the operations run again one write each, so the
// refusal goes to the operation that caused it; any other failure (unavailable after its
// retries, a missing dataset, canceled) fails every operation the write carried. A state that
// a later operation of the same write replaces is never sent, so the backend never judges
// it: only stored states can be refused. A state the lane remembers from an earlier round
// answers only the operations queued before the call that learned it began; otherwise it is
// proved by the conditional write, or read again.
//
// # Merges
//
// A merge reads the current record (or uses the state its segment reached), asks the
// configured [Merger] for the new state and writes it with a revision (or if-absent)
// precondition; when another writer -- another process -- got there first, it reads and merges
// again with jittered exponential backoff, for up to Options.MergeBudget (default 10s) from its
// first run, then fails with ErrConflict. A merge program may therefore run more than once
// (and again after a queue redelivery): it must be a pure function of current record,
// incoming document and context. MergeContext.Time is truncated to the date-time precision of
// the record's backend (milliseconds on MongoDB), so a program may store it as a date-time
// everywhere.
//
// # Coalescing
//
// Concurrent one-operation calls are gathered per store into bounded batches (a maximum batch
// size, a bounded queue and a bound on batches in flight). A batch whose slot is free takes
// the calls queued and those of the goroutines ready to run, yielding the processor until no
// more arrive; only a lone call waits a short window for company. A small, fixed set of
// goroutines per store runs the batches.
// A call that finds its store's queue full fails at once with [ErrUnavailable], so a slow store
// pushes back on its own callers only.
//
// # Deadlines
//
// A call whose context has a deadline (Do, the one-operation calls, Apply) answers by it: at
// the deadline less Options.DeadlineReserve (default 50ms, at most a tenth of the time the call
// had), the time its answer needs to reach the caller, it returns one Result per operation
// and a nil error, whatever its store is doing. An operation settled by then has its result;
// one not settled fails on its own, retryably, with a kind that says what it did:
//
//   - [ErrUnavailable] for a read, and for a write no adapter call carried -- still queued
//     behind its record's earlier operations, or behind the store's batches in flight when
//     those hang. It is not sent afterwards: it certainly had no effect.
//   - [ErrOutcomeUnknown] for a write an adapter call carried and the backend had not answered
//     (or an accepted-mode write handed to its queue). It may have been applied, and may still
//     be: the call that carries it runs on and its late outcome is reported (see below).
//
// The adapter calls run under the Service's context, bounded by the latest answer deadline of
// the callers they serve when every one has a deadline: each attempt ends by the earlier of
// that deadline and the adapter's own timeout (searchstore and mongostore Options.Timeout), an
// attempt the deadline ends counts as unavailable for the operations it had not sent, and a
// resend after an unavailable answer starts only when what is left of the deadline, after the
// backoff, covers the last attempt's duration: a resend that cannot end in time is not
// started. A call waiting behind a batch that hangs stops waiting at its deadline; the batch
// finishes, or fails, in the background by the latest deadline of its own callers, and drops
// the operations whose callers were answered. When the context is canceled (not a deadline)
// the call returns the context's error as before.
//
// Options.Observer learns of it when it implements [DeadlineObserver]: DeadlineCut counts the
// operations answered at a deadline, LateOutcome reports what a write answered
// ErrOutcomeUnknown did in the end (applied, or failed). A caller that retries an
// outcome-unknown write should make it idempotent (a precondition, a put of the whole
// document) or read before retrying.
//
// # Observability
//
// Options.Observer, when set, receives per store what the Service made of the requests:
// each adapter call (read or write, its size, latency, attempt and per-item outcomes), each
// coalesced batch with the calls still waiting behind it, each call refused by a full queue,
// and each retry (unavailable operations resent, merges repeated after a lost
// compare-and-set). It is called on the Service's goroutines and must be cheap; without it
// nothing is measured (no clock reads, no allocations). Options.Logger receives operational
// events; neither ever sees document contents.
//
// # Completion modes
//
// [WaitApplied] returns when the adapter applied a write; [WaitVisible] also waits until
// searches see it; [ReturnAccepted] returns once a durable queue holds it.
//
// # Accepted mode
//
// A store configured with a [Queue] (Options.Queues, by store name) hands each accepted-mode
// put, merge and delete of a request to it, all of a store's operations of one request in one
// [Queue.Enqueue] call, in request order, bypassing the coalescer (the queue batches). The
// Service knows no format or transport: package store/accepted is the Queue over a
// queue.Publisher (Kafka, or memqueue in one process), with the versioned JSON record format
// and the message key that keep every mutation of one record in one partition in submission
// order. The request is validated first, as in every mode, and with it what the queue cannot
// carry ([QueueChecker]): a malformed operation refuses it whole and nothing is enqueued. An
// operation then comes back Accepted once the queue holds it durably, or fails on its own:
// [ErrUnavailable] when the queue could not take it (retryable: it was not enqueued),
// [ErrOutcomeUnknown] when it was handed to the queue and no answer came within the queue's
// bound (kafkaqueue: Config.DeliveryTimeout, also when a broker hangs) or before ctx ended --
// it may have been enqueued, and may still be, after the call returned (retryable; a retry may
// enqueue it twice, which at-least-once delivery allows anyway) -- and [ErrInvalid] when the
// queue refused it (too large). Every accepted-mode write answers within that bound. On a
// store without a queue an accepted-mode write fails on its own with [ErrNoQueue] (kind
// KindNoQueue: retryable -- nothing was applied or enqueued, and it succeeds once the store
// has a queue or in a synchronous mode -- and distinct from ErrUnavailable, a queue that is
// down); the request's other operations, on other stores too, run. Reads in an accepted-mode request run
// synchronously and do not see the request's queued writes.
//
// A worker (package store/worker) consumes the queue and applies its operations with
// [Service.ApplyInOrder]: the synchronous path -- a fetch's operations on one record combined
// into one conditional write per round -- with each merge seeing its operation's acceptance
// time as MergeContext.Time, and a failed operation holding back the later ones of its
// record ([ErrHeldBack]) until the worker retried or dead-lettered it.
//
// Delivery is at-least-once: a queued operation is applied twice exactly when it was applied
// and its queue offset was not committed before the record's partition was read again -- the
// worker's process died between a round and the commit that follows it, or its group
// membership was lost (a broker pause or partition longer than the session timeout) with a
// round applied and not yet committed. The worker commits after every round and starts no
// further fetch while a commit fails, so this is at most the rounds in flight -- two
// fetches at most, one when they share a record -- per partition owner; store/worker's
// "Delivery guarantees" gives the detail, and counts the redeliveries it sees. A put or delete applied twice leaves the same record (a conditional
// one is dead-lettered the second time); a merge applied twice applies its program twice
// unless the program is idempotent (keeps the ids of the operations it applied).
//
// No adapter records which queue position it applied, which would make a redelivered merge a
// no-op, because a position can only be compared with positions of the same partition of the
// same topic incarnation: Kafka restarts offsets at 0 when a topic is deleted and created
// again under its name, and keys move to other partitions when a topic gains partitions, so
// a marker "applied up to offset N" would skip genuinely new operations after either --
// losing them, where at-least-once only repeats -- unless it held the topic's identity, which
// queue.Message does not carry; and the adapter contract (package store/driver) carries no
// position to or from a backend, and Elasticsearch and OpenSearch keep the user's document
// unchanged, with no private field to hold one.
package store
