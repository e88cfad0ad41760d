package driver

import (
	"context"
	"errors"
	"strconv"
)

// ErrorKind classifies a failure. The set is closed: every error an adapter reports carries one.
type ErrorKind uint8

// Error kinds.
const (
	// Internal is a permanent failure that fits no other kind (an answer we cannot parse, a
	// server certificate that does not verify). Not retryable.
	KindInternal ErrorKind = iota
	// KindNotFound: the dataset (index, collection) does not exist.
	KindNotFound
	// KindAlreadyExists: an IfAbsent write found a record.
	KindAlreadyExists
	// KindConflict: an IfRevision write found the record at another revision, or absent.
	KindConflict
	// KindInvalid: the request can never succeed as it is (a bad name, a document the dataset's
	// mapping refuses, a malformed revision).
	KindInvalid
	// KindTooLarge: a document or request exceeds a limit.
	KindTooLarge
	// KindUnavailable: retryable. An adapter reports it only when the operation cannot have taken
	// effect (the request was refused or never sent), so that a retry cannot apply it twice.
	KindUnavailable
	// KindCanceled: the caller's context ended first.
	KindCanceled
	// KindOutcomeUnknown: retryable, but the operation may have taken effect -- it was sent and
	// no answer came within its bound (a hung queue broker, a context that ended while it was
	// in flight). It may still take effect later. Unlike KindUnavailable, which promises the
	// operation had no effect, a retry may apply it twice: fine for accepted-mode writes, whose
	// delivery is at-least-once anyway, and for unconditional puts and deletes; a conditional
	// write retried may fail its precondition because the first attempt took effect.
	KindOutcomeUnknown
	// KindPermissionDenied: the backend refused the credentials (authentication failed) or
	// found them lacking a privilege the operation needs; nothing was applied. Not retryable:
	// an operator must fix the credentials or the role. Reported per item where the backend
	// refuses per item (one dataset's privilege missing fails only that dataset's items).
	KindPermissionDenied
	// KindNoQueue: an accepted-mode write to a store that has no durable queue. The Service
	// reports it (adapters never do); nothing was applied or enqueued. Retryable, as the
	// record-sink specification asks: it cannot apply twice, and it succeeds once the store
	// has a queue (another instance of the service, a corrected configuration) or when sent
	// in a synchronous completion mode. Distinct from KindUnavailable, a transient broker
	// failure, so that a caller can tell a missing queue from a queue that is down.
	KindNoQueue
)

var kindNames = [...]string{"internal", "not found", "already exists", "conflict", "invalid", "too large", "unavailable", "canceled", "outcome unknown", "permission denied", "no queue"}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "ErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// Retryable reports whether an operation that failed with this kind may be sent again as it is
// and then succeed: true for KindUnavailable (it had no effect, so a retry cannot apply it
// twice) and for KindOutcomeUnknown (it may have taken effect, so a retry may apply it twice;
// the caller learns nothing better by waiting, and at-least-once is what retrying a lost answer
// means anywhere), and for KindNoQueue (nothing was applied; see there). A caller that must
// never apply an operation twice retries only KindUnavailable and KindNoQueue.
func (k ErrorKind) Retryable() bool {
	return k == KindUnavailable || k == KindOutcomeUnknown || k == KindNoQueue
}

// Error is an adapter error with its kind. Err, the backend's own error, stays reachable with
// errors.As and errors.Unwrap.
type Error struct {
	Kind ErrorKind
	Err  error
}

// NewError returns an *Error of kind k whose message is msg and whose cause is cause (may be nil).
func NewError(k ErrorKind, msg string, cause error) *Error {
	if cause == nil {
		return &Error{Kind: k, Err: errors.New(msg)}
	}
	return &Error{Kind: k, Err: &wrapped{msg: msg, err: cause}}
}

func (e *Error) Error() string { return e.Kind.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg + ": " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// KindOf returns the kind of err: the kind of the first *Error in its chain, Canceled for context
// errors, Internal otherwise.
func KindOf(err error) ErrorKind {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Kind
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return KindCanceled
	}
	return KindInternal
}
