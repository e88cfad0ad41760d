package sink

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
)

// Stalled requests (doc.go, "Networks that misbehave"). A request whose connection went into
// a black hole (packets dropped, no reset: a partition, a firewall that forgot the connection)
// waits for its timeout -- request_timeout, a minute by default -- even when the network
// returned long before: the bytes it sent are gone. The stall guard wraps the sink's
// transport: while a request has been in flight for stallAfter, it probes the cluster every
// probeEvery with a small request (probeTimeout). A request that was already in flight when a
// probe failed, once a later probe got an answer, is given up: the cluster was unreachable
// while it waited and answers again, so its own connection is the one lost. It fails as a
// connection loss (backpressure; the sink claims its indices again before writing on), and
// the runner offers the batch again at once instead of a minute later.
//
// A request that is merely slow (a cluster that answers probes) is never given up; neither is
// one while the cluster stays unreachable (it fails by its timeout, as before).

const (
	stallAfter   = 3 * time.Second
	probeEvery   = time.Second
	probeTimeout = 3 * time.Second
)

// errStalled is the cause a stalled request is canceled with.
var errStalled = errors.New("no answer: the connection was lost while the cluster was unreachable (it answers again on another connection)")

// stalledError is the error of a request given up by the stall guard: a transport failure
// (search.ErrorClass: unavailable), not a cancellation. err is the client's error, whose text
// is mostly the cancellation's cause again: not repeated.
type stalledError struct{ err error }

func (e *stalledError) Error() string { return errStalled.Error() }

// stallGuard is an esapi.Transport that gives up requests stalled in a lost connection.
type stallGuard struct {
	next esapi.Transport
	// probe asks the cluster something small; nil error when any answer came.
	probe                 func(ctx context.Context) error
	after, every, timeout time.Duration

	mu       sync.Mutex
	flights  map[*flight]struct{}
	watching bool
	failedAt time.Time // when the last failed probe was sent (zero: none since the last success)
}

// flight is one request in flight, until its answer's body is closed.
type flight struct {
	start  time.Time
	cancel context.CancelCauseFunc
}

func newStallGuard(next esapi.Transport) *stallGuard {
	g := &stallGuard{next: next, after: stallAfter, every: probeEvery, timeout: probeTimeout, flights: map[*flight]struct{}{}}
	g.probe = func(ctx context.Context) error {
		ans, err := search.Do(ctx, next, esapi.NodesInfoRequest{NodeID: []string{"_local"}, FilterPath: []string{"nodes.*.version"}})
		if err == nil {
			ans.Release()
		}
		return err
	}
	return g
}

// Perform implements esapi.Transport.
func (g *stallGuard) Perform(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	fl := &flight{start: time.Now(), cancel: cancel}
	g.add(fl)
	res, err := g.next.Perform(req.WithContext(ctx))
	if err != nil {
		g.done(fl)
		return nil, g.judge(ctx, req.Context(), err)
	}
	res.Body = &guardedBody{ReadCloser: res.Body, g: g, fl: fl, ctx: ctx, outer: req.Context()}
	return res, nil
}

// judge turns the failure of a request the guard gave up into a stalledError.
func (g *stallGuard) judge(ctx, outer context.Context, err error) error {
	if outer.Err() == nil && errors.Is(context.Cause(ctx), errStalled) {
		return &stalledError{err: err}
	}
	return err
}

func (g *stallGuard) add(fl *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flights[fl] = struct{}{}
	if !g.watching {
		g.watching = true
		go g.watch()
	}
}

func (g *stallGuard) done(fl *flight) {
	g.mu.Lock()
	delete(g.flights, fl)
	g.mu.Unlock()
	fl.cancel(nil)
}

// watch probes while some request has been in flight for g.after; it ends when none is.
func (g *stallGuard) watch() {
	tick := time.NewTicker(g.every)
	defer tick.Stop()
	for range tick.C {
		g.mu.Lock()
		if len(g.flights) == 0 {
			g.watching = false
			g.mu.Unlock()
			return
		}
		stalled := false
		for fl := range g.flights {
			stalled = stalled || time.Since(fl.start) >= g.after
		}
		g.mu.Unlock()
		if !stalled {
			continue
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		err := g.probe(ctx)
		cancel()
		g.mu.Lock()
		if err != nil {
			g.failedAt = sent
		} else if !g.failedAt.IsZero() {
			for fl := range g.flights {
				if fl.start.Before(g.failedAt) {
					fl.cancel(errStalled)
				}
			}
			g.failedAt = time.Time{}
		}
		g.mu.Unlock()
	}
}

// guardedBody keeps a request in flight until its answer is read and closed: an answer whose
// body stalls is given up like one that never came.
type guardedBody struct {
	io.ReadCloser
	g          *stallGuard
	fl         *flight
	ctx, outer context.Context
	once       sync.Once
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = b.g.judge(b.ctx, b.outer, err)
	}
	return n, err
}

func (b *guardedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.g.done(b.fl) })
	return err
}
