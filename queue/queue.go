package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Header is one message header. Keys need not be unique; order is kept.
type Header struct {
	Key   string
	Value []byte
}

// Message is one keyed message. Publishers read Key, Value and Headers; consumers also fill
// in where the message was found.
type Message struct {
	Key     []byte
	Value   []byte
	Headers []Header

	// Set on messages a Consumer returns; ignored by Publish.
	Topic     string
	Partition int32
	Offset    int64
}

// Publisher writes messages durably.
//
// Publish returns only after every message it reports as written is durably acknowledged
// (for Kafka: by all in-sync replicas). Messages with equal keys land in one partition and are
// delivered in the order of the msgs slice, and of successive Publish calls that did not
// overlap in time. On failure Publish returns a *PublishError naming each message that is
// not known to be written, each with a classified error. Kind OutcomeUnknown says the message
// may have been written (it was sent and no answer came in time) and may still be, later; a
// caller that retries it may cause a duplicate, never a loss. The other kinds say it was not
// written, as far as the publisher can tell (an implementation that cannot tell reports
// OutcomeUnknown). An implementation bounds how long Publish waits (kafkaqueue: its
// DeliveryTimeout), whatever the broker does.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) error
	// Close waits for messages in flight and releases the publisher.
	Close() error
}

// Consumer reads messages with at-least-once delivery.
//
// Fetch returns the next messages, waiting until at least one is available or ctx ends. A
// message's offset is committed only once the caller called Finish for it and for every
// earlier message of its partition; Commit makes the finished prefix durable. After a crash,
// a restart or a rebalance, delivery resumes after the last committed offset of each
// partition, so every message not committed is delivered again. A partition its group never
// committed is read from its earliest message, so nothing published before the group's first
// consumer started is skipped. Messages of one partition (hence of one key) are returned in
// order. Its methods are safe for concurrent use: a worker may Fetch ahead while it Finishes
// and Commits earlier messages.
type Consumer interface {
	Fetch(ctx context.Context) ([]Message, error)
	// Finish marks messages as processed. Messages never finished are never committed.
	Finish(msgs ...Message)
	// Commit durably commits, per partition, the offsets of the finished prefix.
	Commit(ctx context.Context) error
	// Close stops consuming. It does not commit: call Commit first to keep finished work.
	Close() error
}

// ErrClosed is returned by a Publisher or Consumer used after Close.
var ErrClosed = errors.New("queue: closed")

// Kind classifies queue failures so callers can decide to retry.
type Kind uint8

// Failure kinds.
const (
	// Unavailable: the queue could not be reached or did not answer in time (connection
	// refused, broker down, timeout). Retrying later may succeed.
	Unavailable Kind = iota + 1
	// NotFound: the topic (or queue) does not exist and the queue is not configured to create it.
	NotFound
	// Invalid: the message or configuration is unacceptable (too large, bad settings). Retrying
	// the same thing fails again.
	Invalid
	// Denied: authentication or authorization failed.
	Denied
	// Internal: anything else.
	Internal
	// OutcomeUnknown: the message was handed to the queue and no answer came within the
	// publisher's bound (a hung broker, a context that ended while it was in flight), so it may
	// have been written, and may still be written later. Retrying may write it twice.
	OutcomeUnknown
)

var kindNames = [...]string{"", "unavailable", "not_found", "invalid", "denied", "internal", "outcome_unknown"}

func (k Kind) String() string {
	if k != 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is a classified queue failure. Its message names the queue (topic) and never carries
// message contents or credentials.
type Error struct {
	Kind  Kind
	Queue string // topic or queue name
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("queue %s: %s: %v", e.Queue, e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of the first *Error in err's chain, Internal for any other
// non-nil error and 0 for nil.
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	return Internal
}

// Retryable reports whether retrying the failed call later may succeed: Unavailable, and
// OutcomeUnknown (whose retry may write a message twice, which at-least-once delivery allows).
func Retryable(err error) bool {
	k := KindOf(err)
	return k == Unavailable || k == OutcomeUnknown
}

// PublishError reports which messages of a Publish call are not known to be written.
type PublishError struct {
	// Errs has one entry per message of the call: nil for a message durably written, else its
	// failure (KindOf OutcomeUnknown: it may have been written).
	Errs []error
}

func (e *PublishError) Error() string {
	n, first := 0, error(nil)
	for _, err := range e.Errs {
		if err != nil {
			if n == 0 {
				first = err
			}
			n++
		}
	}
	return fmt.Sprintf("queue: %d of %d messages not known to be written; first: %v", n, len(e.Errs), first)
}

// Unwrap returns the failures, so errors.Is and errors.As see each of them.
func (e *PublishError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
