package sink

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/statestore"
)

// Failure classes (doc.go, "Failures"). The runner reopens the stream after every error that
// is not cdc.Permanent and replays a *cdc.BackpressureError's batch; the sink says which is
// which:
//
//   - permanent: a refusal (*esfence.ConflictError: the index is not, or no longer, this
//     sink's), the cluster refusing the credentials or a privilege (401, 403, anywhere: a
//     whole answer, one _bulk item, a fence request; the error wraps a *search.AuthError
//     whose message says "authentication failed" with the credentials' scheme, or
//     "permission denied" with the action, indices, user and the privileges that grant it),
//     TLS failing on a certificate (the server's not trusted or not matching server_name, or
//     the client's refused), and every request the cluster refuses as such (400 and the
//     other 4xx but 408 and 429: a mapping the engine cannot take, a batch above its
//     http.max_content_length) -- the same request gets the same answer, however often it
//     is sent;
//   - backpressure: 429, 5xx, 408, refused or reset connections, timeouts, unreadable
//     answers -- the batch is offered again as it is;
//   - the caller's context ending comes back unwrapped.

// permanentRefusal marks a refusal found anywhere in err's chain as permanent, keeping it
// reachable with errors.As and errors.Is.
func permanentRefusal(err error) error {
	var ce *esfence.ConflictError
	if errors.As(err, &ce) && !cdc.IsPermanent(err) {
		return cdc.Permanent(err)
	}
	return err
}

// statusError classifies a failed whole-request answer of what (body: the answer's, read
// only for what a 401 or 403 names).
func (s *Sink) statusError(what string, status int, h http.Header, body []byte) error {
	if ae := search.AnswerError(status, h, body); ae != nil {
		return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: %s: %w", s.cfg.ID, what, ae))
	}
	err := fmt.Errorf("elasticsearch sink %q: %s: status %d", s.cfg.ID, what, status)
	switch c := search.StatusClass(status); {
	case c.Retryable():
		return &cdc.BackpressureError{Err: err, RetryAfter: search.RetryAfter(h), Unavailable: c == search.Unavailable}
	case status >= 400 && status <= 499:
		return cdc.Permanent(err)
	}
	return err
}

// tlsRefused is what a TLS failure on a certificate says before the TLS error itself.
const tlsRefused = "TLS failed on a certificate: the server's is not trusted or does not match (check tls: ca, server_name), or the server refused the client's (tls: cert, key)"

// transportError classifies a request of what that got no complete answer. A connection loss
// also makes the next Write claim every index again first, as after any reconnect.
func (s *Sink) transportError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if search.ErrorClass(err) == search.Auth {
		return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: %s: %s: %w", s.cfg.ID, what, tlsRefused, err))
	}
	s.stale.Store(true)
	return &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: %s: %w", s.cfg.ID, what, err), Unavailable: true}
}

// requestError judges a failed fence request (a claim, or a mapping read or update through
// the write alias). Refusals are permanent (sink_destination_conflict). A request the cluster
// rejected as such (401 and 403, 400 and the other 4xx but 408 and 429, e.g. 400
// mapper_parsing_exception when the engine lacks a field type of the generated mapping) is
// permanent with a clear error: replaying it would fail forever, as is a state store view's
// statestore.ErrNotLeader (a takeover: step down). Everything else (transport, 5xx, state
// store) is backpressure: the request is tried again with the batch.
func (s *Sink) requestError(err error, what string) error {
	if esfence.ClassOf(err) != "" {
		return cdc.Permanent(err)
	}
	if errors.Is(err, esfence.ErrSharedOwner) {
		return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: %s: %w", s.cfg.ID, what, err))
	}
	if errors.Is(err, statestore.ErrNotLeader) {
		// Another process took the pipeline's lease over (a fenced state store view): this
		// one must step down, not retry.
		return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: %s: %w", s.cfg.ID, what, err))
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	var se *esfence.ServerError
	if errors.As(err, &se) && !se.Class().Retryable() && se.Status >= 400 && se.Status <= 499 {
		hint := ""
		if se.Status == http.StatusBadRequest && se.Type == "mapper_parsing_exception" {
			hint = " -- the cluster refused the generated mapping; an engine without a field type it uses " +
				"(scaled_float, unsigned_long: Elasticsearch's mapper-extras, absent from its OSS test build) " +
				"needs other mapping options (mapping: {decimal: keyword, uint64: keyword})"
		}
		return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: %w%s", s.cfg.ID, err, hint))
	}
	if se == nil && search.ErrorClass(err) == search.Auth {
		return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: %s: %s: %w", s.cfg.ID, what, tlsRefused, err))
	}
	overloaded := se != nil && se.Class() == search.Overloaded
	return &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: %s: %w", s.cfg.ID, what, err), Unavailable: !overloaded}
}
