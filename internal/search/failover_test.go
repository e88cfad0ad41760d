package search_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/search"
)

// countingServer answers every request 200 with the request's body, counting requests.
func countingServer(t *testing.T, n *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A request that cannot reach a node goes to the next one, its body intact, and the next
// requests go to a live node first.
func TestFailoverToTheNextNode(t *testing.T) {
	var hits atomic.Int64
	live := countingServer(t, &hits)
	tp := client(t, search.Options{URLs: []string{estest.ClosedURL(t, "http"), estest.ClosedURL(t, "http"), live.URL}})
	for i := range 5 {
		body := `{"n":` + string(rune('0'+i)) + `}`
		a, err := search.Do(ctxT(t), tp, esapi.BulkRequest{Body: strings.NewReader(body)})
		if err != nil {
			t.Fatalf("request %d with two dead nodes and one live: %v", i, err)
		}
		if string(a.Body) != body {
			t.Fatalf("request %d: the live node got %q, want %q", i, a.Body, body)
		}
		a.Release()
	}
	if hits.Load() != 5 {
		t.Fatalf("%d requests reached the live node, want 5", hits.Load())
	}
}

// When every node refuses the connection, the request fails with the last dial error (no
// "no connection available"), after one attempt per node; and once a node listens again
// a request reaches it whatever the nodes' backoffs.
func TestFailoverEveryNodeDown(t *testing.T) {
	urls := []string{estest.ClosedURL(t, "http"), estest.ClosedURL(t, "http"), estest.ClosedURL(t, "http")}
	tp := client(t, search.Options{URLs: urls})
	for range 3 {
		_, err := search.Do(ctxT(t), tp, esapi.InfoRequest{})
		if err == nil || !search.NotSent(err) || strings.Contains(err.Error(), "no connection") {
			t.Fatalf("every node down: %v (not sent %v)", err, search.NotSent(err))
		}
	}
	// The second node comes back on its port.
	ln, err := net.Listen("tcp", strings.TrimPrefix(urls[1], "http://"))
	if err != nil {
		t.Skipf("the closed port was taken meanwhile: %v", err)
	}
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(countingServer(t, &hits).Config.Handler)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	a, err := search.Do(ctxT(t), tp, esapi.InfoRequest{})
	if err != nil {
		t.Fatalf("a node is back but the request failed: %v", err)
	}
	a.Release()
}

// A request that may have reached a server is never sent again: a dropped connection and
// a 503 come back to the caller after one attempt.
func TestNoFailoverOnceSent(t *testing.T) {
	var hits atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/_bulk" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	})
	s1, s2 := httptest.NewServer(h), httptest.NewServer(h)
	defer s1.Close()
	defer s2.Close()
	tp := client(t, search.Options{URLs: []string{s1.URL, s2.URL}})
	_, err := search.Do(ctxT(t), tp, esapi.InfoRequest{})
	if err == nil || search.NotSent(err) {
		t.Fatalf("dropped: %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("a dropped request was sent %d times", n)
	}
	a, err := search.Do(ctxT(t), tp, esapi.BulkRequest{Body: bytes.NewReader([]byte("{}\n"))})
	if err != nil || a.Status != 503 {
		t.Fatalf("503: %v", err)
	}
	a.Release()
	if n := hits.Load(); n != 2 {
		t.Fatalf("a 503 was sent %d times", n-1)
	}
}

// A canceled request is not sent to the next node.
func TestNoFailoverAfterCancel(t *testing.T) {
	tp := client(t, search.Options{URLs: []string{estest.ClosedURL(t, "http"), estest.ClosedURL(t, "http")}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := search.Do(ctx, tp, esapi.InfoRequest{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

// A node that accepts connections but never completes a TLS handshake (a stopped process:
// its kernel still queues connections) is passed over once the handshake times out: nothing
// of the request was written.
func TestFailoverPastAHungTLSHandshake(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() { // accept and hold every connection, saying nothing
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	var hits atomic.Int64
	live := httptest.NewUnstartedServer(countingServer(t, &hits).Config.Handler)
	live.StartTLS()
	defer live.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: live.Certificate().Raw})

	// Alone, the hung node's failure is a handshake timeout that counts as not sent.
	_, err = search.Do(ctxT(t), client(t, search.Options{URLs: []string{"https://" + hung.Addr().String()}, CACert: ca, ConnectTimeout: 300 * time.Millisecond}), esapi.InfoRequest{})
	if err == nil || !search.NotSent(err) || search.ErrorClass(err) != search.Unavailable {
		t.Fatalf("hung handshake: %v (not sent %v)", err, search.NotSent(err))
	}
	// Listed first, it is passed over.
	tp := client(t, search.Options{URLs: []string{"https://" + hung.Addr().String(), live.URL}, CACert: ca, ConnectTimeout: 5 * time.Second})
	a, err := search.Do(ctxT(t), tp, esapi.BulkRequest{Body: strings.NewReader("{}\n")})
	if err != nil || string(a.Body) != "{}\n" {
		t.Fatalf("with a hung node first: %v", err)
	}
	a.Release()
}
