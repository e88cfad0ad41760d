package store

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/store/driver"
)

// Sentinels, one per error kind, for errors.Is. Every error this package returns for an
// operation matches exactly one of them; the backend's own error stays reachable with errors.As.
var (
	ErrInternal      error = kindSentinel(KindInternal)
	ErrNotFound      error = kindSentinel(KindNotFound)
	ErrAlreadyExists error = kindSentinel(KindAlreadyExists)
	ErrConflict      error = kindSentinel(KindConflict)
	ErrInvalid       error = kindSentinel(KindInvalid)
	ErrTooLarge      error = kindSentinel(KindTooLarge)
	ErrUnavailable   error = kindSentinel(KindUnavailable)
	ErrCanceled      error = kindSentinel(KindCanceled)
	// ErrOutcomeUnknown: retryable, but the operation may have taken effect (see
	// KindOutcomeUnknown); ErrUnavailable means it certainly did not.
	ErrOutcomeUnknown error = kindSentinel(KindOutcomeUnknown)
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("store: closed")

type kindSentinel ErrorKind

func (k kindSentinel) Error() string { return "store: " + ErrorKind(k).String() }

// Error is the failure of one operation: its kind, the operation and the record address (never
// document contents), and the cause.
type Error struct {
	Kind ErrorKind
	Op   OpKind
	Addr Address
	Err  error
}

func (e *Error) Error() string {
	return "store: " + e.Op.String() + " " + e.Addr.String() + ": " + e.Err.Error()
}

// Unwrap returns the cause (a *driver.Error, a context error, a merge program's error, ...).
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's kind, so errors.Is(err, ErrConflict) works.
func (e *Error) Is(target error) bool {
	k, ok := target.(kindSentinel)
	return ok && ErrorKind(k) == e.Kind
}

// KindOf returns the kind of any error: the kind of the first *Error or *driver.Error in its
// chain, KindCanceled for context errors, KindInternal for anything else. KindOf(nil) is
// KindInternal; check for nil first.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var k kindSentinel
	if errors.As(err, &k) {
		return ErrorKind(k)
	}
	return driver.KindOf(err)
}

func opError(op OpKind, addr Address, err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e.Addr == addr {
		return e
	}
	return &Error{Kind: KindOf(err), Op: op, Addr: addr, Err: err}
}

func newOpError(kind ErrorKind, op OpKind, addr Address, msg string) *Error {
	return &Error{Kind: kind, Op: op, Addr: addr, Err: errors.New(msg)}
}

// RequestError refuses a whole request before anything was written: it lists every operation
// that failed validation, by its index in the request.
type RequestError struct {
	Items []ItemError
}

// ItemError is one invalid operation of a refused request.
type ItemError struct {
	Index int
	Err   *Error
}

func (e *RequestError) Error() string {
	var b strings.Builder
	b.WriteString("store: request refused, nothing written: ")
	for i, it := range e.Items {
		if i == 3 {
			b.WriteString("; and " + strconv.Itoa(len(e.Items)-3) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString("operation " + strconv.Itoa(it.Index) + ": " + it.Err.Error())
	}
	return b.String()
}

// Is matches the sentinel of any item's kind (ErrInvalid, ErrTooLarge).
func (e *RequestError) Is(target error) bool {
	for _, it := range e.Items {
		if it.Err.Is(target) {
			return true
		}
	}
	return false
}
