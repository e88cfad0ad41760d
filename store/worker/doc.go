// Package worker applies the store's accepted-mode writes: it consumes the records a
// store.Service enqueued to a durable queue (package store/accepted writes them as records)
// and applies them through the same synchronous path as a WaitApplied call
// (store.Service.ApplyInOrder), so queued and direct writes share validation, ordering,
// combining, merges and retries.
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
// store it does not apply, goes to the dead-letter queue. The records are then applied in
// rounds, each ONE store.Service.ApplyInOrder call with every record still to apply: the
// Service queues a record's operations on its lane and combines them -- its merges run one
// after another on the state in memory and the result is stored with one conditional write
// -- so a record with twenty mutations in the fetch costs one read and one write, not twenty
// of each (a put or delete of the queue is still stored on its own, in order: every state a
// client wrote whole reaches the backend). The mutations of one record keep their queue order
// (which is their submission order: one address, one partition): once one fails, ApplyInOrder
// holds back the later ones of its address (store.ErrHeldBack), and the worker deals with the
// failure before they run. A record that fails retryably runs again in the next round, after
// a jittered exponential backoff (Options.BackoffBase, BackoffMax), up to Options.MaxAttempts
// applications, with the records held back behind it after it; a record that fails for good
// is dead-lettered, and the records held back behind it run in the next round, at once. So a
// poison record holds up only the records after it on its address, only until it is
// dead-lettered. A fetch whose records all apply takes one round. FetchStats.Waves still
// reports the dependency waves a fetch forms (the most records of one address), and Rounds
// the calls it took.
//
// Two fetches may be applied at once: when the next fetch holds no record of an address the
// fetch in flight holds (their keys differ), it starts without waiting -- so a backend that
// takes several batches at once (Elasticsearch, OpenSearch) is kept busy -- and neither can
// hold up or overtake the other; a fetch sharing an address waits until the one in flight
// ended. Fetches are reported to the Observer in order.
//
// After every round the worker finishes what it applied and dead-lettered and commits (see
// "Delivery guarantees"). Before every round it drops the records of partitions the consumer
// no longer owns, when the consumer can tell (kafkaqueue.Consumer.Owns): they are delivered
// again to the partition's owner, and applying them would only apply them twice
// (FetchStats.Revoked).
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
// At least once. A record is applied twice only when it was applied and its offset was not
// committed before the partition's next consumer -- another worker of the group, or this one
// after it rejoined -- read it again. Exactly these cases:
//
//   - the process dies (or Run's ctx ends) after a round applied records and before the
//     commit that follows the round: at most the rounds in flight -- one, or two when two
//     fetches of different records are applied at once -- so at most two fetches
//     (kafkaqueue Config.MaxFetch, default 1000, each);
//   - the group membership is lost (a broker pause or a network partition longer than the
//     session timeout, a process paused that long) while a round is in flight, or after it
//     applied records and before its commit reached the broker: again at most the rounds in
//     flight. The worker commits after every round and, while a commit fails, retries it
//     and starts no further fetch, so applied-but-uncommitted work never grows beyond them;
//     a fetch it read ahead, or records held back for a later round, whose partition was
//     revoked or lost meanwhile are not applied at all (the consumer's Owns). When the
//     worker learns of the loss from its own commit rather than from a heartbeat, franz-go
//     rejoins keeping the partitions and the retried commit succeeds: nothing is repeated;
//   - a rebalance revokes partitions from this live member while a round applies records of
//     them: the consumer commits the finished prefix before giving them up, and the records
//     of the round in flight, finished too late, are applied again by their new owner.
//
// A commit the broker accepted but whose answer was lost counts as failed and is retried:
// nothing is applied twice. A graceful stop (Stop) repeats nothing. Records
// delivered again are counted: FetchStats.Redelivered (the messages at or below an offset
// this worker already finished in their partition; a successor process cannot tell, so
// redeliveries after a crash are not counted).
//
// Unconditional puts and deletes are idempotent. A conditional one applied twice fails its
// precondition the second time and is dead-lettered although it took effect. A merge is not
// idempotent unless its program makes it so, for example by keeping in the record the set of
// operation ids the clients put in their incoming documents (as
// TestWorkerCrashRestartLosesNothing does). A merge runs with the time its record was
// accepted (store.MergeContext.Time), also when applied again. No adapter records the queue
// position it applied: why, in the package documentation of store ("Accepted mode").
//
// # Stopping
//
// Stop lets the fetch in hand finish -- applied, dead-lettered, committed -- and makes Run
// return nil (a fetch read ahead is left to the next worker of the group). The fetch in hand
// includes its retries, so a graceful stop may take up to MaxAttempts backoffs, and its
// commit: while a commit keeps failing, Stop waits (until its ctx ends). Cancelling
// Run's ctx abandons it instead (what was finished is still committed, on a context of its own
// bounded by Options.CommitTimeout) and Run returns ctx's error.
//
// # Observability
//
// Options.Logger receives dead letters, failures and redeliveries (never document contents);
// Options.Observer receives FetchStats after each fetch (records, applied, dead letters,
// retries, waves, rounds, redelivered, revoked, lag). Nothing is global.
package worker
