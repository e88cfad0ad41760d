package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	mdriver "go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/auth"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/tributary-dev/tributary/store/driver"
)

// backendError keeps the driver's error reachable with errors.As while its message holds only
// what is safe to log: server error codes and names, or the driver's own text for failures that
// never reached a server. Server messages can quote document values (a duplicate key on a
// unique secondary index does), so they are left out.
type backendError struct {
	msg string
	err error
}

func (e *backendError) Error() string { return e.msg }
func (e *backendError) Unwrap() error { return e.err }

func newBackendError(kind driver.ErrorKind, what string, err error) *driver.Error {
	return &driver.Error{Kind: kind, Err: &backendError{msg: "mongostore: " + what + ": " + describe(err), err: err}}
}

// describe summarises err without server messages.
func describe(err error) string {
	var bwe mongo.BulkWriteException
	var we mongo.WriteException
	var ce mongo.CommandError
	switch authRefused(err) {
	case "authentication failed":
		// The server's and the driver's texts name the mechanism and the user at most; say
		// only what to fix.
		return "authentication failed: the server refused the credentials (check the uri's user, password and authSource)"
	case "unauthorized":
		// The server's text quotes the command, which can hold document values.
		return "server error 13 (Unauthorized): permission denied: the user's roles do not allow this command on the database"
	}
	switch {
	case errors.As(err, &bwe):
		codes := make([]string, 0, len(bwe.WriteErrors))
		for _, e := range bwe.WriteErrors {
			codes = append(codes, strconv.Itoa(e.Code))
		}
		return withWCE("write errors with codes ["+strings.Join(codes, " ")+"]", bwe.WriteConcernError)
	case errors.As(err, &we):
		codes := make([]string, 0, len(we.WriteErrors))
		for _, e := range we.WriteErrors {
			codes = append(codes, strconv.Itoa(e.Code))
		}
		return withWCE("write errors with codes ["+strings.Join(codes, " ")+"]", we.WriteConcernError)
	case errors.As(err, &ce):
		if ce.Code == 0 {
			// A failure on the driver's side (a broken connection): no server text in it.
			return ce.Error()
		}
		s := "server error " + strconv.Itoa(int(ce.Code))
		if ce.Name != "" {
			s += " (" + ce.Name + ")"
		}
		if len(ce.Labels) > 0 {
			s += " labels " + strings.Join(ce.Labels, ",")
		}
		return s
	}
	return err.Error()
}

func withWCE(s string, wce *mongo.WriteConcernError) string {
	if wce == nil {
		return s
	}
	return s + fmt.Sprintf("; write concern error %d (%s)", wce.Code, wce.Name)
}

// notSent reports whether err is one the driver returns only before it sent the command: no
// server could be selected, no connection could be checked out or established, the client
// is closed, or too little of the context's time was left to try. Failures on a connection
// that carried the command come back wrapped in a CommandError (labelled NetworkError)
// instead, and may have taken effect.
func notSent(err error) bool {
	var se mongo.ServerError
	if errors.As(err, &se) {
		return se.HasErrorLabel(mdriver.NoWritesPerformed)
	}
	var sse topology.ServerSelectionError
	var wqe topology.WaitQueueTimeoutError
	var ce topology.ConnectionError
	var pe topology.PoolError
	var rpe mdriver.RetryablePoolError
	return errors.As(err, &sse) || errors.As(err, &wqe) || errors.As(err, &ce) ||
		errors.As(err, &pe) || errors.As(err, &rpe) ||
		errors.Is(err, mongo.ErrClientDisconnected) || errors.Is(err, topology.ErrServerClosed) ||
		errors.Is(err, mdriver.ErrDeadlineWouldBeExceeded)
}

// Server error codes by what they tell about an operation.
var (
	// The server refused the command before running it, or the write failed as a whole and
	// was not applied; sending it again may succeed.
	transientCodes = codeSet(6, 7, 50, 89, 91, 112, 189, 262, 9001, 10107, 11600, 11601, 11602, 13435, 13436, 134)
	tooLargeCodes  = codeSet(10334, 17419, 17420, 16493, 10329)
	invalidCodes   = codeSet(2, 9, 14, 15, 22, 30, 52, 53, 55, 56, 57, 66, 73, 121, 17280, 28, 40)
	duplicateCodes = codeSet(11000, 11001, 12582)
)

func codeSet(codes ...int) map[int]bool {
	m := make(map[int]bool, len(codes))
	for _, c := range codes {
		m[c] = true
	}
	return m
}

// callErrKind classifies an error that ended a whole command (not one write of a bulk).
//
// A write is KindUnavailable only when it cannot have been applied (not sent, refused as not
// primary, labelled NoWritesPerformed). It is KindOutcomeUnknown when the command went out and
// failed in a way that may have left it applied and that sending it again may cure: the
// connection broke or timed out after sending, the caller's context ended while it was in
// flight, the command failed as a whole with a transient code (interrupted, stepped down,
// shutting down, out of time), or its write concern failed after it was applied. Otherwise
// (refused for good: unauthorized, an unknown code, an error of the driver's own) it is
// KindInternal.
//
// A read, which changes nothing, is KindUnavailable whenever the failure is transient, and
// KindCanceled when the caller's context ended.
//
// Credentials the server refuses (authentication failed while connecting, code 18) and a
// command the user's roles do not allow (Unauthorized, code 13) are KindPermissionDenied for
// reads and writes alike: nothing was applied, and no retry helps.
func callErrKind(ctx context.Context, err error, write bool) driver.ErrorKind {
	var se mongo.ServerError
	carried := errors.As(err, &se) && !se.HasErrorLabel(mdriver.NoWritesPerformed)
	if authRefused(err) != "" && (ctx.Err() == nil || errors.Is(context.Cause(ctx), errTimeout)) {
		return driver.KindPermissionDenied
	}
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errTimeout) {
		// The driver checks the context before it sends, and wraps every failure of a
		// connection that carried the command as a server error (a NetworkError).
		if write && carried {
			return driver.KindOutcomeUnknown
		}
		return driver.KindCanceled
	}
	if notSent(err) {
		return driver.KindUnavailable
	}
	if se != nil {
		if k, ok := writeConcernKind(err); write && ok {
			return k
		}
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Code != 0 {
			switch {
			case write && (ce.Code == 10107 || ce.Code == 13435 || ce.Code == 13436):
				// Not (or no longer) primary: the server refused the write before running it.
				return driver.KindUnavailable
			case transientCodes[int(ce.Code)] && write:
				return driver.KindOutcomeUnknown
			case transientCodes[int(ce.Code)]:
				return driver.KindUnavailable
			case tooLargeCodes[int(ce.Code)]:
				return driver.KindTooLarge
			case invalidCodes[int(ce.Code)]:
				return driver.KindInvalid
			}
		}
		switch {
		case !(se.HasErrorLabel("NetworkError") || mongo.IsTimeout(err)):
			return driver.KindInternal
		case write:
			return driver.KindOutcomeUnknown
		}
		return driver.KindUnavailable
	}
	switch {
	case !(mongo.IsTimeout(err) || mongo.IsNetworkError(err)):
		return driver.KindInternal
	case write:
		// Conservative: a timeout or network error the driver did not wrap as a server error
		// is not known to have struck before sending.
		return driver.KindOutcomeUnknown
	}
	return driver.KindUnavailable
}

// Codes of refused credentials and privileges.
const (
	codeUnauthorized         = 13
	codeAuthenticationFailed = 18
)

// authRefused says how the server refused the credentials or a privilege ("authentication
// failed", "unauthorized"), or "" when err is no such refusal.
func authRefused(err error) string {
	var ae *auth.Error
	var ce mongo.CommandError
	switch {
	case errors.As(err, &ae):
		return "authentication failed"
	case errors.As(err, &ce) && ce.Code == codeAuthenticationFailed:
		return "authentication failed"
	case errors.As(err, &ce) && ce.Code == codeUnauthorized:
		return "unauthorized"
	}
	return ""
}

// Write concern codes that no retry cures: the write concern itself is unknown or cannot be
// satisfied by the deployment.
const (
	codeUnknownReplWriteConcern   = 79
	codeUnsatisfiableWriteConcern = 100
)

// writeConcernKind classifies a write concern error of err, if it has one (ok): the write was
// applied on the primary but not confirmed as the write concern asks, so it may yet be rolled
// back: KindOutcomeUnknown, or KindInternal when the write concern can never be satisfied.
func writeConcernKind(err error) (k driver.ErrorKind, ok bool) {
	var wce *mongo.WriteConcernError
	var bwe mongo.BulkWriteException
	var we mongo.WriteException
	switch {
	case errors.As(err, &bwe) && bwe.WriteConcernError != nil:
		wce = bwe.WriteConcernError
	case errors.As(err, &we) && we.WriteConcernError != nil:
		wce = we.WriteConcernError
	default:
		return 0, false
	}
	if wce.Code == codeUnknownReplWriteConcern || wce.Code == codeUnsatisfiableWriteConcern {
		return driver.KindInternal, true
	}
	return driver.KindOutcomeUnknown, true
}

// writeKind says which request a write became; duplicate keys mean different things for each.
type writeKind uint8

const (
	kindUpsert  writeKind = iota + 1 // unconditional put: replace with upsert
	kindInsert                       // if-absent put
	kindReplace                      // if-revision put
	kindDelete
)

// itemErrKind classifies a write error reported for one write: that write was not applied.
// A duplicate key whose index the server does not name counts as one on _id (see dupOnID).
func itemErrKind(kind writeKind, code int, msg string, raw bson.Raw) driver.ErrorKind {
	switch {
	case duplicateCodes[code]:
		onID, _ := dupOnID(msg, raw)
		return dupKind(kind, onID)
	case code == codeUnauthorized:
		return driver.KindPermissionDenied
	case tooLargeCodes[code]:
		return driver.KindTooLarge
	case invalidCodes[code]:
		return driver.KindInvalid
	case transientCodes[code]:
		return driver.KindUnavailable
	}
	return driver.KindInternal
}

// dupKind classifies a duplicate key on the _id index (onID) or on a unique secondary index.
func dupKind(kind writeKind, onID bool) driver.ErrorKind {
	switch {
	case !onID:
		return driver.KindInvalid // a unique secondary index refuses the document
	case kind == kindInsert:
		return driver.KindAlreadyExists
	case kind == kindUpsert:
		// Lost a race with a concurrent insert of the same _id: nothing was applied, and
		// sending the upsert again replaces the record that won.
		return driver.KindUnavailable
	}
	return driver.KindInvalid // a replace keeps its _id: only a secondary index can refuse it
}

// dupOnID reports whether a duplicate-key error is about the _id index, and whether the error
// said so (known). MongoDB 4.2 and later name the index's key pattern in the error, and every
// version names the index in the message; FerretDB 1.x does neither.
func dupOnID(msg string, raw bson.Raw) (onID, known bool) {
	if kp, err := raw.LookupErr("keyPattern"); err == nil {
		if doc, ok := kp.DocumentOK(); ok {
			elems, err := doc.Elements()
			return err == nil && len(elems) == 1 && elems[0].Key() == "_id", true
		}
	}
	if i := strings.Index(msg, " index: "); i >= 0 {
		return strings.HasPrefix(msg[i+len(" index: "):], "_id_ "), true
	}
	return true, false
}

var errClosed = driver.NewError(driver.KindInternal, "mongostore: closed", nil)
