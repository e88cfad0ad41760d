package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// MaxAnswerBytes bounds how much of one answer Do reads; a longer answer is an error.
const MaxAnswerBytes = 256 << 20

// ErrAnswerTooLarge is Do's error for an answer longer than MaxAnswerBytes.
var ErrAnswerTooLarge = errors.New("search: the answer exceeds 256 MiB")

// Answer is one complete response. Body is valid until Release.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	buf    *bytes.Buffer
}

// OK reports a 2xx status.
func (a *Answer) OK() bool { return a.Status >= 200 && a.Status <= 299 }

// Class is the class of the answer's status.
func (a *Answer) Class() Class { return StatusClass(a.Status) }

// Error reads the answer's "error" member.
func (a *Answer) Error() ErrorInfo { return ParseError(a.Body) }

// Release gives the body's buffer back for reuse; the Answer must not be used after it.
func (a *Answer) Release() {
	if a == nil || a.buf == nil {
		return
	}
	if a.buf.Cap() <= 16<<20 { // do not pin the memory of a rare huge answer
		bufPool.Put(a.buf)
	}
	a.buf, a.Body = nil, nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Do sends req through tp and reads the whole answer. An error means no complete answer
// came (classify it with ErrorClass); every status is an answer. The caller's context
// bounds the request. Do allocates nothing of its own when the pool has a buffer.
func Do(ctx context.Context, tp esapi.Transport, req esapi.Request) (Answer, error) {
	res, err := req.Do(ctx, tp)
	if err != nil {
		return Answer{}, err
	}
	defer res.Body.Close()
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	if err := readAll(buf, res.Body); err != nil {
		bufPool.Put(buf)
		return Answer{}, &ReadError{Err: err}
	}
	return Answer{Status: res.StatusCode, Header: res.Header, Body: buf.Bytes(), buf: buf}, nil
}

// readAll reads r to its end into buf, at most MaxAnswerBytes (an io.LimitReader would cost
// an allocation per answer).
func readAll(buf *bytes.Buffer, r io.Reader) error {
	for {
		if buf.Len() > MaxAnswerBytes {
			return ErrAnswerTooLarge
		}
		buf.Grow(bytes.MinRead)
		free := buf.AvailableBuffer()
		n, err := r.Read(free[:cap(free)])
		buf.Write(free[:n])
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}

// ReadError is a failure while reading an answer whose status had arrived: the request
// reached the server.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return fmt.Sprintf("reading the answer: %v", e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }
