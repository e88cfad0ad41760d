package estest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder stands in for the test a helper is given, so a test can see the helper fail it.
// Fatal stops the helper's goroutine as the testing package does; everything not overridden
// goes to the real test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	fatal  bool
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.mu.Lock()
	r.fatal = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// failures returns what the helper reported, joined.
func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "; ")
}

// record runs fn with a recorder on its own goroutine, so a Fatal in it ends only that
// goroutine, and returns the recorder once fn has returned or stopped.
func record(t *testing.T, fn func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

// fakeNode is a Node talking to handler instead of a real server.
func fakeNode(t *testing.T, handler http.HandlerFunc) *Node {
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return Connect(t, Elasticsearch, srv.URL)
}
