package search_test

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]search.Class{
		200: search.OK, 201: search.OK, 299: search.OK,
		429: search.Overloaded,
		500: search.Unavailable, 502: search.Unavailable, 503: search.Unavailable, 504: search.Unavailable, 501: search.Unavailable, 408: search.Unavailable,
		401: search.Auth, 403: search.Auth,
		404: search.NotFound, 409: search.Conflict, 413: search.TooLarge,
		400: search.BadRequest, 405: search.BadRequest, 422: search.BadRequest,
		301: search.Other, 100: search.Other,
	} {
		if got := search.StatusClass(status); got != want {
			t.Errorf("status %d: %v, want %v", status, got, want)
		}
	}
	for _, c := range []search.Class{search.Overloaded, search.Unavailable} {
		if !c.Retryable() {
			t.Errorf("%v not retryable", c)
		}
	}
	for _, c := range []search.Class{search.OK, search.Auth, search.NotFound, search.Conflict, search.TooLarge, search.BadRequest, search.Canceled, search.Other} {
		if c.Retryable() {
			t.Errorf("%v retryable", c)
		}
	}
}

func client(t *testing.T, o search.Options) esapi.Transport {
	t.Helper()
	c, err := search.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// ctxT bounds one call of a test: generous, beyond the secured servers' tests' one-minute
// connect timeout (a TLS handshake on a loaded machine takes seconds).
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Every way a request can get no answer is classified, and only a refused connection
// proves that nothing was sent.
func TestErrorClass(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	_, err = search.Do(ctxT(t), client(t, search.Options{URLs: []string{refused}}), esapi.InfoRequest{})
	if c := search.ErrorClass(err); c != search.Unavailable || !search.NotSent(err) {
		t.Fatalf("refused connection: %v: %v (not sent %v)", err, c, search.NotSent(err))
	}

	f := searchtest.New(t, nil)
	release := make(chan struct{})
	defer close(release)
	hung := make(chan struct{}, 2)
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		switch r.Path {
		case "/reset":
			return searchtest.Drop()
		case "/hang":
			hung <- struct{}{}
			<-release
		}
		return nil
	})
	tp := client(t, search.Options{URLs: []string{f.URL}})
	_, err = search.Do(ctxT(t), tp, esapi.IndicesExistsRequest{Index: []string{"reset"}})
	if c := search.ErrorClass(err); c != search.Unavailable || search.NotSent(err) {
		t.Fatalf("dropped connection: %v: %v (not sent %v)", err, c, search.NotSent(err))
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Millisecond)
	defer cancel()
	_, err = search.Do(ctx, tp, esapi.IndicesExistsRequest{Index: []string{"hang"}})
	if c := search.ErrorClass(err); c != search.Unavailable {
		t.Fatalf("timeout: %v: %v", err, c)
	}
	ctx, cancel = context.WithCancel(ctxT(t))
	<-hung // the timed-out request's
	go func() { <-hung; cancel() }()
	_, err = search.Do(ctx, tp, esapi.IndicesExistsRequest{Index: []string{"hang"}})
	if c := search.ErrorClass(err); c != search.Canceled {
		t.Fatalf("canceled: %v: %v", err, c)
	}
	if search.ErrorClass(nil) != search.OK {
		t.Fatal("nil is not OK")
	}
}

// The client trusts the configured CA only, sends the configured credentials, never asks for
// gzip unless told, and an untrusted server is an Auth failure.
func TestNewClientTLSAndAuth(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted-CA case logs a handshake error
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	last := func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}

	a, err := search.Do(ctxT(t), client(t, search.Options{URLs: []string{srv.URL}, CACert: ca, Username: "u", Password: "pw"}), esapi.InfoRequest{})
	if err != nil || !a.OK() {
		t.Fatalf("through TLS with the CA: %v", err)
	}
	a.Release()
	if h := last(); !strings.HasPrefix(h.Get("Authorization"), "Basic ") || h.Get("Accept-Encoding") != "" {
		t.Fatalf("headers %v: want basic auth and no Accept-Encoding", h)
	}
	if _, err := search.Do(ctxT(t), client(t, search.Options{URLs: []string{srv.URL}, CACert: ca, APIKey: "a2V5", AcceptGzip: true}), esapi.InfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if h := last(); !strings.EqualFold(h.Get("Authorization"), "ApiKey a2V5") || h.Get("Accept-Encoding") != "gzip" {
		t.Fatalf("headers %v: want the API key and gzip", h)
	}
	_, err = search.Do(ctxT(t), client(t, search.Options{URLs: []string{srv.URL}}), esapi.InfoRequest{})
	if c := search.ErrorClass(err); c != search.Auth {
		t.Fatalf("untrusted server: %v: %v, want auth", err, c)
	}

	if _, err := search.NewClient(search.Options{URLs: []string{"ftp://user:hunter2@x"}}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad URL: %v", err)
	}
	if _, err := search.NewClient(search.Options{URLs: []string{srv.URL}, CACert: []byte("not pem")}); err == nil {
		t.Fatal("a CA that is no PEM was accepted")
	}
	if _, err := search.NewClient(search.Options{}); err == nil {
		t.Fatal("no URL was accepted")
	}
}

func TestRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, " 0 ": 0, "-1": 0, "3600": 0, "Wed, 21 Oct 2015 07:28:00 GMT": 0} {
		if got := search.RetryAfter(http.Header{"Retry-After": {v}}); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

func TestParseError(t *testing.T) {
	e := search.ParseError([]byte(`{"error":{"type":"a","reason":"secret 42","index":"i","caused_by":{"type":"b","caused_by":{"type":"c","reason":"x"}}},"status":400}`))
	if e.Type != "a" || e.Index != "i" || len(e.CausedBy) != 2 || e.CausedBy[1] != "c" || !e.Has("b") || e.Has("secret") {
		t.Fatalf("%+v", e)
	}
	for _, body := range []string{`{"error":"a bare string"}`, `not json`, `{}`, ``} {
		if e := search.ParseError([]byte(body)); e.Type != "" || e.CausedBy != nil {
			t.Errorf("%q: %+v", body, e)
		}
	}
	deep := `{"type":"t0"}`
	for i := 1; i < 20; i++ {
		deep = `{"type":"t","caused_by":` + deep + `}`
	}
	if e := search.ParseErrorObject([]byte(deep)); len(e.CausedBy) != 8 {
		t.Fatalf("%d causes, want at most 8", len(e.CausedBy))
	}
}

func TestDoReadsTheWholeAnswer(t *testing.T) {
	f := searchtest.New(t, nil)
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		return &searchtest.Reply{Status: 503, Body: `{"error":{"type":"unavailable_shards_exception"}}`, Header: http.Header{"Retry-After": {"2"}}}
	})
	a, err := search.Do(ctxT(t), f, esapi.IndicesExistsRequest{Index: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if a.Class() != search.Unavailable || a.Error().Type != "unavailable_shards_exception" || search.RetryAfter(a.Header) != 2*time.Second {
		t.Fatalf("answer %d %s", a.Status, a.Body)
	}
	var re *search.ReadError
	if errors.As(err, &re) {
		t.Fatal(re)
	}
}
