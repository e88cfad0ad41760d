package sink

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/search"
)

// hangingTransport answers nothing until the request's context ends (a black-holed
// connection), or after delay when it is set (a slow cluster).
type hangingTransport struct{ delay time.Duration }

func (h hangingTransport) Perform(req *http.Request) (*http.Response, error) {
	if h.delay > 0 {
		select {
		case <-time.After(h.delay):
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}}, nil
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// testGuard is a stall guard with short bounds whose probes answer as reachable says.
func testGuard(next hangingTransport, reachable *atomic.Bool) *stallGuard {
	g := newStallGuard(next)
	g.after, g.every, g.timeout = 50*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	g.probe = func(context.Context) error {
		if reachable.Load() {
			return nil
		}
		return errors.New("probe: no answer")
	}
	return g
}

func perform(t *testing.T, g *stallGuard, ctx context.Context) chan error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://cluster/_bulk", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan error, 1)
	go func() {
		res, err := g.Perform(req)
		if err == nil {
			res.Body.Close()
		}
		out <- err
	}()
	return out
}

// TestStallGuardGivesUpAfterTheNetworkReturns: a request stuck while probes fail is given up
// once a probe answers again, as a connection loss (unavailable, not a cancellation).
func TestStallGuardGivesUpAfterTheNetworkReturns(t *testing.T) {
	var reachable atomic.Bool
	g := testGuard(hangingTransport{}, &reachable)
	done := perform(t, g, context.Background())
	select {
	case err := <-done:
		t.Fatalf("given up while the cluster was unreachable: %v", err)
	case <-time.After(300 * time.Millisecond): // proves an absence: many probes failed meanwhile
	}
	reachable.Store(true)
	select {
	case err := <-done:
		var se *stalledError
		if !errors.As(err, &se) || search.ErrorClass(err) != search.Unavailable || errors.Is(err, context.Canceled) {
			t.Fatalf("got %v (%T), want a stalledError of class unavailable", err, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled request was not given up after the cluster answered again")
	}
}

// TestStallGuardLeavesSlowRequests: a request that is slow while the cluster answers probes
// is never given up, nor one whose own context ends (that error is the context's).
func TestStallGuardLeavesSlowRequests(t *testing.T) {
	var reachable atomic.Bool
	reachable.Store(true)
	g := testGuard(hangingTransport{delay: 400 * time.Millisecond}, &reachable)
	if err := <-perform(t, g, context.Background()); err != nil {
		t.Fatalf("a slow request on a reachable cluster: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	g = testGuard(hangingTransport{}, &reachable)
	if err := <-perform(t, g, ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the caller's deadline: %v", err)
	}
	// Every flight done: the watcher ends.
	deadline := time.Now().Add(30 * time.Second)
	for {
		g.mu.Lock()
		w := g.watching
		g.mu.Unlock()
		if !w {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not end with the last request")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
