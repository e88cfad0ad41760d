package search

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class is what a failed request came to, as far as its sender must know to react.
type Class uint8

// The classes. See the package documentation.
const (
	// OK is a 2xx answer.
	OK Class = iota
	// Overloaded is 429: the node refused the request before doing any of it.
	Overloaded
	// Unavailable is a 5xx or 408 answer, or no answer at all (a refused or reset
	// connection, an end of file, a timeout).
	Unavailable
	// Auth is 401 or 403, or a server whose certificate does not verify.
	Auth
	// NotFound is 404.
	NotFound
	// Conflict is 409.
	Conflict
	// TooLarge is 413.
	TooLarge
	// BadRequest is 400 and every other 4xx: the request as such is refused, and sending it
	// again gets the same answer.
	BadRequest
	// Canceled is the caller's context ending the request.
	Canceled
	// Other is any other status (1xx, 3xx).
	Other
)

var classNames = [...]string{"ok", "overloaded", "unavailable", "auth", "not_found", "conflict", "too_large", "bad_request", "canceled", "other"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Retryable reports whether the same request may succeed when sent again later: Overloaded
// and Unavailable.
func (c Class) Retryable() bool { return c == Overloaded || c == Unavailable }

// StatusClass classifies an HTTP status.
func StatusClass(status int) Class {
	switch {
	case status >= 200 && status <= 299:
		return OK
	case status == http.StatusTooManyRequests:
		return Overloaded
	case status >= 500 || status == http.StatusRequestTimeout:
		return Unavailable
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return Auth
	case status == http.StatusNotFound:
		return NotFound
	case status == http.StatusConflict:
		return Conflict
	case status == http.StatusRequestEntityTooLarge:
		return TooLarge
	case status >= 400:
		return BadRequest
	}
	return Other
}

// ErrorClass classifies an error of Do (a request without a complete answer): Canceled when
// the context was canceled, Auth when the server's certificate does not verify or the
// server refuses the client's (a TLS alert naming a certificate), otherwise Unavailable
// (connection refused or reset, end of file, a deadline). nil is OK.
func ErrorClass(err error) Class {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		op        *net.OpError
	)
	switch {
	case err == nil:
		return OK
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.As(err, &verify), errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return Auth
	case errors.As(err, &op) && op.Op == "remote error" && op.Err != nil && strings.Contains(op.Err.Error(), "certificate"):
		return Auth
	}
	return Unavailable
}

// NotSent reports whether err proves that the request never reached the server: the
// connection could not be made (refused, no route, a connect timeout), or its TLS handshake
// timed out (a node that accepts connections but does not answer, such as a stopped
// process whose kernel still queues them). Any other failure may come after the server got
// the request.
func NotSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	// net/http's handshake timeout has no exported type; its text is stable since Go 1.3.
	var timeout interface{ Timeout() bool }
	return errors.As(err, &timeout) && timeout.Timeout() && strings.Contains(err.Error(), "TLS handshake timeout")
}

// RetryAfter reads a Retry-After header given in seconds (below an hour); 0 when absent or
// in another form.
func RetryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 && n < 3600 {
			return time.Duration(n) * time.Second
		}
	}
	return 0
}
