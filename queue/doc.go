// Package queue is the port for durable, keyed message queues: the store's accepted-mode
// path publishes mutations through a Publisher and a worker applies them from a Consumer.
//
// # Guarantees
//
// Publish returns after the messages are durably acknowledged. Delivery is at-least-once:
// a consumer commits only what its caller finished, in per-partition order, so a crash
// redelivers unfinished work and never skips it. A group that never committed starts at the
// earliest message. Messages with one key keep their order.
//
// # Implementations
//
// memqueue is in-process (tests and the no-server configuration; it can inject publish,
// fetch and commit failures); kafkaqueue uses franz-go. queuetest is the conformance suite
// both pass, with subtests memory, kfake and kafka.
//
// # Errors
//
// Failures are *Error values classified by Kind; Retryable tells the caller whether to try
// again. A failed message of a Publish is either not written (Unavailable and the other kinds)
// or of unknown outcome (OutcomeUnknown: sent, unanswered within the publisher's bound; it may
// have been written and may still be). Publish answers within its implementation's bound even
// when a broker hangs. Error messages name topics, never message contents or credentials.
package queue
