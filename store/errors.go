package store

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/store/driver"
)

// Sentinels, one per error kind, for errors.Is. Every error this package returns for an
// operation matches exactly one of them; the backend's own error stays reachable with errors.As.
var (
	ErrInternal error = kindSentinel(KindInternal)
	// ErrDatasetNotFound: the dataset (index, collection) does not exist. A missing record is
	// no error: its read or delete succeeds with the outcome Absent.
	ErrDatasetNotFound error = kindSentinel(KindDatasetNotFound)
	ErrAlreadyExists   error = kindSentinel(KindAlreadyExists)
	ErrConflict        error = kindSentinel(KindConflict)
	ErrInvalid         error = kindSentinel(KindInvalid)
	ErrTooLarge        error = kindSentinel(KindTooLarge)
	ErrUnavailable     error = kindSentinel(KindUnavailable)
	ErrCanceled        error = kindSentinel(KindCanceled)
	// ErrOutcomeUnknown: retryable, but the operation may have taken effect (see
	// KindOutcomeUnknown); ErrUnavailable means it certainly did not.
	ErrOutcomeUnknown error = kindSentinel(KindOutcomeUnknown)
	// ErrPermissionDenied: the backend refused the credentials or found them lacking a
	// privilege (see KindPermissionDenied); not retryable.
	ErrPermissionDenied error = kindSentinel(KindPermissionDenied)
)

// ErrNotFound is the old name of ErrDatasetNotFound.
//
// Deprecated: use ErrDatasetNotFound; it goes in the next release.
var ErrNotFound = ErrDatasetNotFound

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("store: closed")

// ErrNoQueue is the sentinel of KindNoQueue: an accepted-mode write to a store that has no
// durable queue (Options.Queues). That operation fails on its own, in its Result (an *Error of
// kind KindNoQueue naming the store); the request's other operations run. Retryable (see
// KindNoQueue), and distinct from ErrUnavailable, a queue that is down.
var ErrNoQueue error = kindSentinel(KindNoQueue)

// noQueueError is the cause of an ErrNoQueue failure, naming the store.
type noQueueError struct{ store string }

func (e noQueueError) Error() string {
	return "store " + e.store + " has no durable queue for accepted-mode writes"
}

type kindSentinel ErrorKind

func (k kindSentinel) Error() string { return "store: " + ErrorKind(k).String() }

// Error is the failure of one operation: its kind, the operation and the record address (never
// document contents), and the cause.
//
// Its text says once what failed and why: "store: ", the operation and the address when they
// are set, then the cause -- "store: put main/crm/people/\"ada\": document is a JSON array,
// not an object". An unset Op or Addr is left out rather than printed empty, and a cause that
// is itself an *Error adds only what it says beyond the enclosing one, without a second
// "store: ".
type Error struct {
	Kind ErrorKind
	Op   OpKind
	Addr Address
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("store: ")
	e.appendText(&b, 0, Address{})
	return b.String()
}

// appendText writes the operation and the address unless unset or already said by an enclosing
// *Error (outerOp, outerAddr), then the cause.
func (e *Error) appendText(b *strings.Builder, outerOp OpKind, outerAddr Address) {
	head := false
	if e.Op >= OpRead && e.Op <= OpDelete && e.Op != outerOp {
		b.WriteString(e.Op.String())
		head = true
	}
	if e.Addr != (Address{}) && e.Addr != outerAddr {
		if head {
			b.WriteByte(' ')
		}
		b.WriteString(addressText(e.Addr))
		head = true
	}
	if head {
		b.WriteString(": ")
	}
	if e.Op != 0 {
		outerOp = e.Op
	}
	if e.Addr != (Address{}) {
		outerAddr = e.Addr
	}
	switch c := e.Err.(type) {
	case nil:
		b.WriteString(e.Kind.String())
	case *Error:
		c.appendText(b, outerOp, outerAddr)
	case kindSentinel:
		b.WriteString(ErrorKind(c).String())
	case *driver.Error:
		// An adapter's message says what went wrong; its kind is e.Kind, not repeated here.
		if c.Err == nil {
			b.WriteString(ErrorKind(c.Kind).String())
		} else {
			b.WriteString(strings.TrimPrefix(c.Err.Error(), "store: "))
		}
	default:
		b.WriteString(strings.TrimPrefix(c.Error(), "store: "))
	}
}

// maxAddressText bounds an address in an error text: an address refused for its oversized key
// would otherwise print the whole key.
const maxAddressText = 1024

// addressText renders an address for an error: without the key part when the key is missing
// (the cause says so), cut short when very long.
func addressText(a Address) string {
	var s string
	if a.Key.Kind() == 0 {
		s = a.Store + "/" + a.Namespace + "/" + a.Dataset
	} else {
		s = a.String()
	}
	if len(s) > maxAddressText {
		cut := maxAddressText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
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
	return ErrorKind(driver.KindOf(err))
}

// opError returns err as the failure of op on addr. An *Error that already names them is
// returned as it is; one that names neither (or only the same ones) gets them filled in, rather
// than being wrapped in another *Error, so the text says each once.
func opError(op OpKind, addr Address, err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		if e.Op == op && e.Addr == addr {
			return e
		}
		if (e.Op == 0 || e.Op == op) && (e.Addr == (Address{}) || e.Addr == addr) {
			return &Error{Kind: e.Kind, Op: op, Addr: addr, Err: e.Err}
		}
	}
	return &Error{Kind: KindOf(err), Op: op, Addr: addr, Err: err}
}

func newOpError(kind ErrorKind, op OpKind, addr Address, msg string) *Error {
	return &Error{Kind: kind, Op: op, Addr: addr, Err: errors.New(msg)}
}

// RequestError refuses a whole request before any of its operations ran -- nothing was read,
// written or published: it lists every operation that failed validation, by its index in the
// request (-1 for a fault of the request as a whole, such as too many operations).
//
// Its text names at most three items:
//
//	store: request refused before any operation ran: operation 2: put main/crm/people/"ada": document is not valid JSON: syntax error at byte 17; and 4 more
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
	b.WriteString("store: request refused before any operation ran: ")
	for i, it := range e.Items {
		if i == 3 {
			b.WriteString("; and " + strconv.Itoa(len(e.Items)-3) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if it.Index >= 0 {
			b.WriteString("operation " + strconv.Itoa(it.Index) + ": ")
		}
		if it.Err == nil {
			b.WriteString("invalid")
			continue
		}
		it.Err.appendText(&b, 0, Address{})
	}
	return b.String()
}

// Is matches the sentinel of any item's kind (ErrInvalid, ErrTooLarge), and what any item's
// cause matches.
func (e *RequestError) Is(target error) bool {
	for _, it := range e.Items {
		if it.Err.Is(target) || errors.Is(it.Err.Err, target) {
			return true
		}
	}
	return false
}
