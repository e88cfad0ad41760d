// Package worker applies the store's accepted-mode writes: it consumes the records a
// store.Service enqueued to a durable queue (package store/accepted writes them as records)
// and applies them through the same synchronous path as a WaitApplied call (store.Service.Apply), so queued and direct
// writes share validation, ordering, merges and retries.
//
//	w, err := worker.New("orders", consumer, svc, deadLetters, nil) // the worker of store "orders"
//	go w.Run(ctx)
//	...
//	w.Stop(ctx) // finishes the fetch in hand, commits, returns
//
// # Which records a worker applies
//
// A worker belongs to one store: the store whose queue it consumes, named in New. It applies
// the records of that store only. A record of any other store that turns up on its topic --
// published there by mistake, by a misconfigured service, or by hand -- is dead-lettered with
// reason other_store (error kind invalid, attempts 0) and never applied, even when the applier
// configures that store: a record on the wrong topic is out of order with its store's own
// records, and a store without a queue has no worker meant to apply its records at all. When
// several stores publish to one queue on purpose (one queue in store.Options.Queues for
// them all), name the others in Options.AlsoApply; one worker then applies them all, and no
// other worker may consume that topic. New refuses a store the applier does not configure
// when the applier can say (a Stores method, as *store.Service has).
//
// # Processing a fetch
//
// Each fetch is decoded; a message that is not a record this worker reads, or a record of a
// store it does not apply, goes to the dead-letter queue. The records form dependency waves -- the k-th record of one address in
// the fetch is in wave k -- and each wave is one Apply call, so records of different
// addresses are applied together as adapter batches while the mutations of one record keep
// their queue order (which is their submission order: one address, one partition). A record
// that fails retryably is applied again, alone with the others that did, after a jittered
// exponential backoff (Options.BackoffBase, BackoffMax), up to Options.MaxAttempts
// applications; the next wave waits for it. Each applied record is finished at once; the
// offsets are committed after every record of the fetch is applied or dead-lettered.
//
// The worker reads one fetch ahead: the next fetch is fetched and decoded while the current
// one is applied, since decoding costs a sizeable share of applying a put to memory. A fetch
// read ahead is never finished before its turn, so abandoning it costs only its redelivery.
// Decoding copies no document -- a record's document is its message's memory
// (accepted.Decoder.DecodeShared), held until the message is finished anyway -- and a
// processed fetch's arrays are reused for a later one, so an Applier must not keep the
// records it was given.
//
// # Failures
//
// Retryable: store.KindUnavailable; KindOutcomeUnknown and KindInternal (the outcome may be
// unknown, and applying again is what at-least-once delivery means anyway); KindCanceled while the worker runs on; and
// KindConflict of a merge, which means it gave up under contention. Everything else is
// permanent: a failed precondition (KindConflict, KindAlreadyExists), an invalid record or
// document, a failing merge program, a missing dataset.
//
// Malformed messages, records of other stores, permanent failures and exhausted retries are
// copied to the dead-letter publisher -- key, value and headers unchanged, plus the headers
// HeaderReason, HeaderErrorKind, HeaderTopic, HeaderPartition, HeaderOffset and
// HeaderAttempts -- and only once the dead-letter queue acknowledged them are they finished,
// so their offsets are never committed before they are safe. Headers never carry error messages (an adapter's message
// might quote a value); the log does, with the record's address and position. A dead letter
// that cannot be written after MaxAttempts stops Run with an error: the consumer then
// redelivers from the last commit.
//
// # Delivery guarantees
//
// At least once. A worker that stops abruptly (ctx ends, the process dies) leaves unfinished
// records uncommitted and they are delivered again; a record applied just before the crash is
// applied twice. Unconditional puts and deletes are idempotent. A conditional one applied
// twice fails its precondition the second time and is dead-lettered although it took effect.
// A merge is not idempotent unless its program makes it so, for example by keeping in the
// record the set of operation ids the clients put in their incoming documents (as
// TestWorkerCrashRestartLosesNothing does). A merge runs with the time its record was
// accepted (store.MergeContext.Time), also when applied again.
//
// # Stopping
//
// Stop lets the fetch in hand finish -- applied, dead-lettered, committed -- and makes Run
// return nil (a fetch read ahead is left to the next worker of the group). The fetch in hand
// includes its retries, so a graceful stop may take up to MaxAttempts backoffs. Cancelling
// Run's ctx abandons it instead (what was finished is still committed, on a context of its own
// bounded by Options.CommitTimeout) and Run returns ctx's error.
//
// # Observability
//
// Options.Logger receives dead letters and failures (never document contents);
// Options.Observer receives FetchStats after each fetch. Nothing is global.
package worker
