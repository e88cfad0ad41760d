package faultproxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/internal/faultproxy"
)

// A bulk request is applied by the backend, but the client is told to back off.
func ExampleHTTPProxy_forwardThenRespond() {
	var applied atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		applied.Add(1)
		io.WriteString(w, `{"errors":false}`)
	}))
	defer backend.Close()

	p, err := faultproxy.NewHTTP(backend.URL, faultproxy.HTTPOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	if _, err := p.AddRule(faultproxy.Rule{
		Method:     http.MethodPost,
		PathPrefix: "/_bulk",
		Times:      1,
		Action:     faultproxy.ForwardThenRespond,
		Response:   faultproxy.TooManyRequests(time.Second),
	}); err != nil {
		panic(err)
	}

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for range 2 {
		resp, err := client.Post(p.URL()+"/_bulk", "application/x-ndjson", strings.NewReader("{}\n"))
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("status %d, Retry-After %q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	fmt.Println("applied by the backend:", applied.Load())
	for _, r := range p.Records() {
		fmt.Println(r.Seq, r.Method, r.Path, r.Action, "backend:", r.BackendStatus, "client:", r.Status)
	}
	// Output:
	// status 429, Retry-After "1"
	// status 200, Retry-After ""
	// applied by the backend: 2
	// 1 POST /_bulk forward-then-respond backend: 200 client: 429
	// 2 POST /_bulk forward backend: 200 client: 200
}

// A connection through the TCP proxy goes silent while a black-hole is set.
func ExampleTCPProxy_SetBlackhole() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() { // a one-connection echo server
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()

	p, err := faultproxy.NewTCP(ln.Addr().String(), faultproxy.TCPOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	buf := make([]byte, 16)

	p.SetBlackhole(faultproxy.Both)
	io.WriteString(c, "lost")
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = c.Read(buf)
	fmt.Println("black-holed, read timed out:", err.(net.Error).Timeout())

	p.SetBlackhole(faultproxy.None)
	io.WriteString(c, "back")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.ReadFull(c, buf[:4])
	fmt.Printf("healed, echoed %q\n", buf[:n])
	// Output:
	// black-holed, read timed out: true
	// healed, echoed "back"
}
