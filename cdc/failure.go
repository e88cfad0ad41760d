package cdc

import "errors"

// Failure classes. A Runner reopens its stream after any failure of the source or the sink
// (a lost connection, a server restarting or shutting down, a timeout, a 5xx answer) from the
// stored checkpoint, with a bounded jittered backoff, for as long as it takes -- except after a
// permanent failure, which no reopening can cure: it stops Run with that error.
//
// Adapters mark permanent failures with Permanent (authentication refused, the server no
// longer holds the history the checkpoint needs, a fencing conflict on the destination, an
// invalid configuration); a start refusal (*StartError) is permanent too. Everything else is
// retried: an unclassified error costs a reconnect, a wrongly retried one never costs data.

// ErrPermanent matches every permanent failure: errors.Is(err, cdc.ErrPermanent).
var ErrPermanent = errors.New("cdc: permanent failure")

// Permanent marks err as a failure that reopening the stream cannot cure; errors.Is(err,
// ErrPermanent) is then true, and the cause stays reachable with errors.Is and errors.As. A
// nil err stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// IsPermanent reports whether err is permanent (errors.Is(err, ErrPermanent)).
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }
