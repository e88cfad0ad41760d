package searchstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/store/driver"
)

// BackendError is what the server said about a failed request or bulk item: the HTTP status
// and the chain of error types. It is the cause inside the adapter's *driver.Error, reachable
// with errors.As.
//
// The server's reason texts are left out on purpose: mapping errors quote the offending field
// values ("Preview of field's value: ..."), and errors must never carry document contents.
type BackendError struct {
	Status int
	// Type is the outermost error type, e.g. "version_conflict_engine_exception"; empty when
	// the server sent no structured error.
	Type string
	// CausedBy holds the types of the nested caused_by errors, outermost first.
	CausedBy []string
	// Index is the index the server named in the error, if any.
	Index string

	// denial is what a 401 or 403 refusal names (the credentials refused, or the action,
	// indices, user and privileges of a missing privilege): parts of the server's reason
	// that carry no document values.
	denial *search.AuthError
}

func (e *BackendError) Error() string {
	var b strings.Builder
	if e.Status != 0 { // per-document errors of an _mget carry no status of their own
		b.WriteString("status ")
		b.WriteString(strconv.Itoa(e.Status))
	}
	if e.Type != "" {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(e.Type)
	}
	if b.Len() == 0 {
		b.WriteString("the server gave no reason")
	}
	for _, c := range e.CausedBy {
		b.WriteString(", caused by ")
		b.WriteString(c)
	}
	if e.Index != "" {
		b.WriteString(" (index ")
		b.WriteString(strconv.Quote(e.Index))
		b.WriteString(")")
	}
	if e.denial != nil {
		b.WriteString(": ")
		b.WriteString(e.denial.Error())
	}
	return b.String()
}

// Unwrap returns what a 401 or 403 refusal named (an internal type: its text is part of
// Error), or nil.
func (e *BackendError) Unwrap() error {
	if e.denial == nil {
		return nil
	}
	return e.denial
}

// denied reports whether the server refused our credentials (401) or found them lacking a
// privilege (403 that is not an index or cluster block).
func (e *BackendError) denied() bool { return e.denial != nil && e.denial.Block == "" }

// has reports whether t is the type of the error or of one of its causes.
func (e *BackendError) has(t string) bool {
	if e.Type == t {
		return true
	}
	for _, c := range e.CausedBy {
		if c == t {
			return true
		}
	}
	return false
}

// tooLarge reports whether the server refused something for its size, which a retry of the
// same bytes cannot cure.
func (e *BackendError) tooLarge() bool {
	if e.Status == http.StatusRequestEntityTooLarge {
		return true
	}
	for _, t := range append([]string{e.Type}, e.CausedBy...) {
		if strings.Contains(t, "too_long") || strings.Contains(t, "too_large") || t == "max_bytes_length_exceeded_exception" {
			return true
		}
	}
	return false
}

// backendError turns a status and a raw "error" member (an object, a bare string, or absent)
// of a _bulk item into a *BackendError.
func backendError(status int, raw json.RawMessage) *BackendError {
	be := fromInfo(status, search.ParseErrorObject(raw))
	if be.security() {
		if ae, ok := search.ItemError(status, raw).(*search.AuthError); ok {
			be.denial = ae
		}
	}
	return be
}

// responseError reads the "error" member of a failed whole-request answer.
func responseError(ans *search.Answer) *BackendError {
	be := fromInfo(ans.Status, search.ParseError(ans.Body)) // a body that is not JSON leaves only the status
	if be.security() {
		if ae, ok := ans.Err().(*search.AuthError); ok {
			be.denial = ae
		}
	}
	return be
}

// security reports whether e is a refusal of the security layer or a block: a 401 (whatever
// its body: OpenSearch's is plain text), or a 403 of type security_exception or
// cluster_block_exception. Only their reasons are read for what they name; a 403 of another
// type keeps no more than its types.
func (e *BackendError) security() bool {
	return e.Status == http.StatusUnauthorized ||
		(e.Status == http.StatusForbidden && (e.Type == "security_exception" || e.Type == "cluster_block_exception"))
}

func fromInfo(status int, e search.ErrorInfo) *BackendError {
	return &BackendError{Status: status, Type: e.Type, CausedBy: e.CausedBy, Index: e.Index}
}

// requestKind says what a failed request can have done, which decides how its failure is
// classified.
type requestKind uint8

const (
	readOnly requestKind = iota // _mget, existence checks: nothing to apply, always safe to repeat
	mutating                    // _bulk: may have been applied when its answer was lost
)

// unknownSuffix ends the message of every write of unknown outcome.
const unknownSuffix = "; the outcome is unknown"

// classifyStatus classifies a whole-request error answer. 429 and 503 mean the node refused
// the request before executing any of it; 400 and 413 that it could not even parse or accept
// it; 401 that it refused our credentials and 403 that they lack a privilege:
// KindPermissionDenied (a 403 index or cluster block is KindInternal). A _bulk answered with
// another 5xx or a 408 may have been applied in part, and sending it again may succeed:
// KindOutcomeUnknown. A read failing so is KindUnavailable, since it changes nothing. Any
// other status (another 4xx, a 3xx) is a request the server did not execute and will not:
// KindInternal.
func classifyStatus(ans *search.Answer, kind requestKind, what string) *driver.Error {
	status := ans.Status
	be := responseError(ans)
	var k driver.ErrorKind
	msg := what + " failed"
	transient := status >= 500 || status == http.StatusRequestTimeout
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		k, msg = driver.KindUnavailable, what+" refused by the server; nothing was applied"
	case be.tooLarge():
		k = driver.KindTooLarge
	case status == http.StatusBadRequest:
		k, msg = driver.KindInvalid, what+" refused as malformed; nothing was applied"
	case status == http.StatusNotFound && be.has("index_not_found_exception"):
		k = driver.KindNotFound
	case be.denied():
		k, msg = driver.KindPermissionDenied, what+" refused; nothing was applied"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		k, msg = driver.KindInternal, what+" refused; nothing was applied"
	case transient && kind == readOnly:
		k = driver.KindUnavailable
	case transient:
		k, msg = driver.KindOutcomeUnknown, what+" failed"+unknownSuffix
	default:
		k = driver.KindInternal
	}
	return driver.NewError(k, "searchstore: "+msg, be)
}

// classifyItem classifies one failed _bulk item. action is the bulk action ("index",
// "create", "delete"). An item failing with a 5xx (a shard unavailable, an exception while
// executing it), or with an error and no failure status, may have been applied:
// KindOutcomeUnknown. A 403 for a missing privilege (the role does not cover the item's
// index) is KindPermissionDenied, for that item only. Any other 4xx (a 403 index block) was
// not applied and will not be as it is: KindInternal.
func classifyItem(action string, status int, raw json.RawMessage) *driver.Error {
	be := backendError(status, raw)
	var k driver.ErrorKind
	msg := action + " failed"
	switch {
	case status == http.StatusTooManyRequests:
		// A rejected item (es_rejected_execution_exception, a 429 block) was not executed.
		k, msg = driver.KindUnavailable, action+" rejected by the server; not applied"
	case status == http.StatusConflict && action == "create":
		k, msg = driver.KindAlreadyExists, "the record exists"
	case status == http.StatusConflict:
		k, msg = driver.KindConflict, "the record is not at the given revision"
	case be.tooLarge():
		k = driver.KindTooLarge
	case status == http.StatusNotFound && be.has("index_not_found_exception"):
		k, msg = driver.KindNotFound, "the dataset does not exist"
	case status == http.StatusBadRequest:
		k, msg = driver.KindInvalid, action+" refused by the dataset (mapping or request)"
	case be.denied():
		k, msg = driver.KindPermissionDenied, action+" refused; not applied"
	case status >= 400 && status < 500:
		k, msg = driver.KindInternal, action+" refused by the server"
	default:
		k, msg = driver.KindOutcomeUnknown, action+" failed"+unknownSuffix
	}
	return driver.NewError(k, "searchstore: "+msg, be)
}

// errRequestTimeout is the cancellation cause when Options.Timeout, not the caller, ends a
// request.
var errRequestTimeout = errors.New("searchstore: request timed out (Options.Timeout)")

// classifyTransport classifies a request that got no complete answer. Only a failure to connect
// proves that nothing reached the server (perform checks the caller's context before sending);
// a mutating request that failed later may have been applied, also when the caller's context
// ended while it was in flight: KindOutcomeUnknown. A server whose certificate does not verify
// got nothing either, and never will: KindInternal.
func classifyTransport(parent, ctx context.Context, err error, kind requestKind, what string) *driver.Error {
	switch {
	case search.NotSent(err) && parent.Err() != nil:
		return driver.NewError(driver.KindCanceled, "searchstore: "+what+" canceled; nothing was sent", parent.Err())
	case search.NotSent(err):
		return driver.NewError(driver.KindUnavailable, "searchstore: "+what+": cannot connect; nothing was sent", err)
	case search.ErrorClass(err) == search.Auth:
		return driver.NewError(driver.KindInternal, "searchstore: "+what+": the server's certificate does not verify; nothing was sent", err)
	case kind == readOnly && parent.Err() != nil:
		return driver.NewError(driver.KindCanceled, "searchstore: "+what+" canceled", parent.Err())
	case kind == readOnly:
		return driver.NewError(driver.KindUnavailable, "searchstore: "+what+" failed", err)
	case parent.Err() != nil:
		return driver.NewError(driver.KindOutcomeUnknown, "searchstore: "+what+" canceled while in flight"+unknownSuffix, parent.Err())
	case errors.Is(context.Cause(ctx), errRequestTimeout):
		return driver.NewError(driver.KindOutcomeUnknown, "searchstore: "+what+" timed out"+unknownSuffix, errRequestTimeout)
	}
	return driver.NewError(driver.KindOutcomeUnknown, "searchstore: "+what+" failed"+unknownSuffix, err)
}
