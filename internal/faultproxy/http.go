package faultproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what a matching Rule does with a request.
type Action int

const (
	// Forward passes the request to the target and the target's response back unchanged
	// (after the rule's Delay, if any). It is also what happens when no rule matches.
	Forward Action = iota
	// Respond answers with the rule's Response without contacting the target. The request
	// body is read and discarded first, as a real server would before answering.
	Respond
	// Drop reads the request body, then closes the client's connection without any response
	// and without contacting the target.
	Drop
	// ForwardThenRespond forwards the request, waits for the target's complete response,
	// discards it and answers with the rule's Response instead: the target applied the
	// request but the client is told it failed (e.g. a 429 on a _bulk that was indexed).
	// The Response is sent even if the target could not be reached; Record.Err says so.
	ForwardThenRespond
	// ForwardThenDrop forwards the request, waits for the target's complete response, and
	// then closes the client's connection without any response.
	ForwardThenDrop
)

func (a Action) String() string {
	switch a {
	case Forward:
		return "forward"
	case Respond:
		return "respond"
	case Drop:
		return "drop"
	case ForwardThenRespond:
		return "forward-then-respond"
	case ForwardThenDrop:
		return "forward-then-drop"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

func (a Action) forwards() bool {
	return a == Forward || a == ForwardThenRespond || a == ForwardThenDrop
}

// Response is an injected HTTP response.
type Response struct {
	// Status is the status code; required (100-999).
	Status int
	// Header is added to the response, e.g. Retry-After. Default: none besides Content-Type.
	Header http.Header
	// Body is the response body. Default (nil): a small JSON error in the shape Elasticsearch
	// uses, {"error":{"type":"injected_fault","reason":"..."},"status":N}, with Content-Type
	// application/json unless Header sets one. A non-nil empty slice sends no body.
	Body []byte
}

// TooManyRequests returns a 429 Response with a Retry-After header of retryAfter rounded up to
// whole seconds (omitted when retryAfter <= 0).
func TooManyRequests(retryAfter time.Duration) Response {
	r := Response{Status: http.StatusTooManyRequests}
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		r.Header = http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}}
	}
	return r
}

// Rule selects requests and says what to do with them. A request matches when every matcher
// that is set matches. Rules are tried in the order they were added; the first matching rule
// that has uses left handles the request, and requests no rule takes are forwarded unchanged.
type Rule struct {
	// Name labels the rule in Records. Optional.
	Name string
	// Method matches the request method, case-insensitively. Default "": any method.
	Method string
	// PathPrefix matches the start of the request's URL path, e.g. "/_bulk" (which does not
	// match "/index/_bulk"; use Match for that). Default "": any path.
	PathPrefix string
	// Match is an extra predicate. It runs on the proxy's request-handling goroutine and must
	// not read the body. Default nil: any request.
	Match func(*http.Request) bool
	// Times limits the rule to the first Times matching requests; afterwards it is exhausted
	// and requests fall through to later rules. Default 0: every matching request.
	Times int
	// Delay is waited before the action, whatever it is (before forwarding, answering or
	// dropping). Default 0.
	Delay time.Duration
	// Action is what to do. Default Forward.
	Action Action
	// Response is what Respond and ForwardThenRespond answer; ignored otherwise.
	Response Response
}

func (r Rule) validate() error {
	if r.Action < Forward || r.Action > ForwardThenDrop {
		return fmt.Errorf("faultproxy: unknown Action %d", int(r.Action))
	}
	if (r.Action == Respond || r.Action == ForwardThenRespond) &&
		(r.Response.Status < 100 || r.Response.Status > 999) {
		return fmt.Errorf("faultproxy: rule %q: %v needs a Response.Status in 100-999, got %d",
			r.Name, r.Action, r.Response.Status)
	}
	if r.Times < 0 || r.Delay < 0 {
		return fmt.Errorf("faultproxy: rule %q: negative Times or Delay", r.Name)
	}
	return nil
}

func (r *Rule) matches(req *http.Request) bool {
	return (r.Method == "" || strings.EqualFold(r.Method, req.Method)) &&
		strings.HasPrefix(req.URL.Path, r.PathPrefix) &&
		(r.Match == nil || r.Match(req))
}

// RuleID identifies a rule added to an HTTPProxy. IDs start at 1; 0 means "no rule".
type RuleID int64

type ruleState struct {
	id   RuleID
	rule Rule
	hits atomic.Int64
}

// claim takes one use of the rule, reporting false when it is exhausted.
func (s *ruleState) claim() bool {
	for {
		n := s.hits.Load()
		if s.rule.Times > 0 && n >= int64(s.rule.Times) {
			return false
		}
		if s.hits.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Record describes one request the HTTP proxy handled.
type Record struct {
	Seq           int64  // arrival order, from 1
	Method        string // request method
	Path          string // request URL path
	Query         string // raw query, without '?'
	RuleID        RuleID // rule that handled the request; 0 if none did
	RuleName      string // that rule's Name
	Action        Action // action taken (Forward when no rule matched)
	Forwarded     bool   // the request was sent to the target
	BackendStatus int    // status the target answered; 0 if not forwarded or it failed
	Status        int    // status the client was sent; 0 if dropped or no answer was sent
	RequestBytes  int64  // request body bytes read from the client (and forwarded, if Forwarded)
	Err           string // what went wrong talking to the target or waiting; "" if nothing
}

// HTTPOptions holds the optional settings of NewHTTP. The zero value is ready to use.
type HTTPOptions struct {
	// ListenAddr is the address to listen on; it must be a loopback address.
	// Default "127.0.0.1:0", a free port chosen by the kernel.
	ListenAddr string
	// Transport carries requests to the target. Default: a private clone of
	// http.DefaultTransport whose idle connections Close shuts.
	Transport http.RoundTripper
	// MaxRecords caps how many Records are kept; beyond it the oldest are discarded.
	// Default 10000. Negative: keep none.
	MaxRecords int
	// ErrorLog receives the server's and reverse proxy's error messages. Default: discarded.
	ErrorLog *log.Logger
}

// HTTPProxy is a reverse proxy in front of a target URL that applies Rules to requests. All
// methods are safe for concurrent use.
type HTTPProxy struct {
	target    *url.URL
	ownsTrans *http.Transport // closed by Close when the proxy created it
	rp        *httputil.ReverseProxy
	srv       *http.Server
	addr      string
	maxRec    int

	ctx       context.Context // canceled by Close; aborts waits and forwarded requests
	cancel    context.CancelFunc
	serveDone chan struct{}
	closeOnce sync.Once
	closeErr  error

	connsMu sync.Mutex
	conns   map[net.Conn]struct{}
	connsWG sync.WaitGroup // server connections, tracked through ConnState

	seq    atomic.Int64
	nextID atomic.Int64

	rulesMu sync.RWMutex
	rules   []*ruleState

	recMu   sync.Mutex
	records []Record
}

// NewHTTP starts a reverse proxy in front of target, an http:// or https:// URL whose path,
// if any, is prefixed to every request path.
func NewHTTP(target string, opts HTTPOptions) (*HTTPProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: bad target URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q must be an http(s) URL with a host", target)
	}
	if opts.ListenAddr == "" {
		opts.ListenAddr = "127.0.0.1:0"
	}
	if err := checkLoopback(opts.ListenAddr); err != nil {
		return nil, err
	}
	switch {
	case opts.MaxRecords == 0:
		opts.MaxRecords = 10000
	case opts.MaxRecords < 0:
		opts.MaxRecords = 0
	}
	errLog := opts.ErrorLog
	if errLog == nil {
		errLog = log.New(io.Discard, "", 0)
	}

	p := &HTTPProxy{
		target:    u,
		maxRec:    opts.MaxRecords,
		serveDone: make(chan struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	transport := opts.Transport
	if transport == nil {
		p.ownsTrans = http.DefaultTransport.(*http.Transport).Clone()
		transport = p.ownsTrans
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
		},
		Transport:    transport,
		ErrorLog:     errLog,
		ErrorHandler: proxyError,
	}

	ln, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p.addr = ln.Addr().String()
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ErrorLog:          errLog,
		ReadHeaderTimeout: time.Minute,
		ConnState:         p.trackConn,
	}
	go func() {
		defer close(p.serveDone)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// URL returns the proxy's base URL, "http://127.0.0.1:PORT"; point clients here.
func (p *HTTPProxy) URL() string { return "http://" + p.addr }

// Addr returns the proxy's listening "host:port".
func (p *HTTPProxy) Addr() string { return p.addr }

// Target returns the URL requests are forwarded to.
func (p *HTTPProxy) Target() string { return p.target.String() }

// AddRule appends r after the existing rules and returns its ID. It fails only for an invalid
// rule (unknown Action, missing Response.Status, negative Times or Delay).
func (p *HTTPProxy) AddRule(r Rule) (RuleID, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	s := &ruleState{id: RuleID(p.nextID.Add(1)), rule: r}
	p.rulesMu.Lock()
	// Copy on write: request handlers iterate a snapshot without holding the lock.
	p.rules = append(slices.Clip(p.rules), s)
	p.rulesMu.Unlock()
	return s.id, nil
}

// RemoveRule removes a rule; it reports whether the rule was present. Requests already being
// handled by the rule finish as it said.
func (p *HTTPProxy) RemoveRule(id RuleID) bool {
	p.rulesMu.Lock()
	defer p.rulesMu.Unlock()
	i := slices.IndexFunc(p.rules, func(s *ruleState) bool { return s.id == id })
	if i < 0 {
		return false
	}
	p.rules = slices.Delete(slices.Clone(p.rules), i, i+1)
	return true
}

// ClearRules removes every rule, so all requests are forwarded unchanged.
func (p *HTTPProxy) ClearRules() {
	p.rulesMu.Lock()
	p.rules = nil
	p.rulesMu.Unlock()
}

// Hits returns how many requests the rule has handled so far (0 for an unknown or removed
// rule).
func (p *HTTPProxy) Hits(id RuleID) int {
	p.rulesMu.RLock()
	defer p.rulesMu.RUnlock()
	for _, s := range p.rules {
		if s.id == id {
			return int(s.hits.Load())
		}
	}
	return 0
}

// Records returns a copy of the requests handled so far, ordered by arrival (Seq). A request
// appears once it is finished.
func (p *HTTPProxy) Records() []Record {
	p.recMu.Lock()
	out := slices.Clone(p.records)
	p.recMu.Unlock()
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// ResetRecords forgets all Records.
func (p *HTTPProxy) ResetRecords() {
	p.recMu.Lock()
	p.records = nil
	p.recMu.Unlock()
}

// Close stops the proxy: it closes the listener and every client connection, cancels requests
// in flight (including ones waiting out a Delay), and waits until all request handlers and
// connection goroutines have finished. It is idempotent.
func (p *HTTPProxy) Close() error {
	p.closeOnce.Do(func() {
		// Close client connections before canceling, so that no handler woken by the
		// cancellation can still send an answer.
		p.closeErr = p.srv.Close()
		p.cancel()
		<-p.serveDone // after Serve returns no connection can be added
		p.connsWG.Wait()
		if p.ownsTrans != nil {
			p.ownsTrans.CloseIdleConnections()
		}
	})
	return p.closeErr
}

func (p *HTTPProxy) trackConn(c net.Conn, state http.ConnState) {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()
	switch state {
	case http.StateNew:
		p.conns[c] = struct{}{}
		p.connsWG.Add(1)
	case http.StateClosed, http.StateHijacked:
		if _, ok := p.conns[c]; ok {
			delete(p.conns, c)
			p.connsWG.Done()
		}
	}
}

// pick returns the first matching rule with uses left, having claimed one use of it.
func (p *HTTPProxy) pick(r *http.Request) *ruleState {
	p.rulesMu.RLock()
	rules := p.rules
	p.rulesMu.RUnlock()
	for _, s := range rules {
		if s.rule.matches(r) && s.claim() {
			return s
		}
	}
	return nil
}

func (p *HTTPProxy) record(rec Record) {
	if p.maxRec == 0 {
		return
	}
	p.recMu.Lock()
	defer p.recMu.Unlock()
	if len(p.records) >= p.maxRec {
		p.records = slices.Delete(p.records, 0, len(p.records)-p.maxRec+1)
	}
	p.records = append(p.records, rec)
}

func (p *HTTPProxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// Tie the request to the proxy's lifetime so Close cancels delays and forwarded requests.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	r = r.WithContext(ctx)

	body := &countingBody{rc: r.Body}
	r.Body = body
	rec := Record{
		Seq:    p.seq.Add(1),
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
	}
	var cw *captureWriter // set once the request is forwarded
	dropping := false     // set before a deliberate abort, which is no error
	// Deferred so that requests ending in a panic are recorded too: deliberate drops, and
	// ReverseProxy's http.ErrAbortHandler when copying the response to the client fails.
	defer func() {
		v := recover()
		rec.RequestBytes = body.n.Load()
		if cw != nil {
			rec.Forwarded = true
			rec.BackendStatus = cw.backendStatus()
			if cw.err != nil {
				rec.Err = cw.err.Error()
			}
			if !cw.discard {
				rec.Status = cw.status
			}
		}
		switch {
		case v == nil || dropping || rec.Err != "":
		case v == http.ErrAbortHandler:
			rec.Err = "response aborted: the target's body broke off or the client went away"
		default:
			rec.Err = fmt.Sprint("panic: ", v)
		}
		p.record(rec)
		if v != nil {
			panic(v)
		}
	}()

	var rule Rule
	if s := p.pick(r); s != nil {
		rule = s.rule
		rec.RuleID, rec.RuleName = s.id, rule.Name
	}
	rec.Action = rule.Action

	if rule.Delay > 0 {
		t := time.NewTimer(rule.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			rec.Err = "delay interrupted: " + context.Cause(ctx).Error()
			// The client left or the proxy is closing: returning normally would send an
			// empty 200, so abort the connection instead.
			panic(http.ErrAbortHandler)
		}
	}

	if !rule.Action.forwards() {
		// Read the body as the target would have, so the client can finish sending it and
		// the connection stays usable.
		_, _ = io.Copy(io.Discard, r.Body)
	}
	switch rule.Action {
	case Forward:
		cw = &captureWriter{ResponseWriter: w}
		p.rp.ServeHTTP(cw, r)
	case Respond:
		rec.Status = writeResponse(w, rule.Response)
	case Drop:
		dropping = true
		panic(http.ErrAbortHandler)
	case ForwardThenRespond, ForwardThenDrop:
		cw = &captureWriter{discard: true}
		p.forwardDiscarding(cw, r)
		if rule.Action == ForwardThenDrop || ctx.Err() != nil {
			dropping = rule.Action == ForwardThenDrop
			panic(http.ErrAbortHandler)
		}
		rec.Status = writeResponse(w, rule.Response)
	}
}

// forwardDiscarding forwards r and reads the target's whole response into cw, which keeps
// only the status.
func (p *HTTPProxy) forwardDiscarding(cw *captureWriter, r *http.Request) {
	defer func() {
		// ReverseProxy aborts with this panic when the target's body breaks off midway;
		// here it only means the backend response was incomplete.
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			if cw.err == nil {
				cw.err = errors.New("target response body broke off")
			}
		}
	}()
	p.rp.ServeHTTP(cw, r)
}

func writeResponse(w http.ResponseWriter, resp Response) int {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = slices.Clone(vs)
	}
	body := resp.Body
	if body == nil {
		reason := fmt.Sprintf("%d %s injected by faultproxy", resp.Status, http.StatusText(resp.Status))
		body = fmt.Appendf(nil, `{"error":{"type":"injected_fault","reason":%q},"status":%d}`,
			reason, resp.Status)
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "application/json")
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(body)
	return resp.Status
}

// proxyError is the ReverseProxy's ErrorHandler: it remembers the transport error for the
// Record and answers 502 like the default handler.
func proxyError(w http.ResponseWriter, _ *http.Request, err error) {
	if cw, ok := w.(*captureWriter); ok {
		cw.err, cw.failed = err, true
	}
	w.WriteHeader(http.StatusBadGateway)
}

// captureWriter notes the status written through it and, with discard set, swallows the
// response instead of passing it on to a client.
type captureWriter struct {
	http.ResponseWriter // nil when discard is set
	discard             bool
	header              http.Header
	status              int
	err                 error // what went wrong forwarding, if anything
	failed              bool  // no response came from the target; status is the proxy's 502
}

func (c *captureWriter) Header() http.Header {
	if !c.discard {
		return c.ResponseWriter.Header()
	}
	if c.header == nil {
		c.header = make(http.Header)
	}
	return c.header
}

func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 && status >= 200 {
		c.status = status
	}
	if !c.discard {
		c.ResponseWriter.WriteHeader(status)
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.discard {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Flush lets ReverseProxy stream responses through.
func (c *captureWriter) Flush() {
	if !c.discard {
		_ = http.NewResponseController(c.ResponseWriter).Flush()
	}
}

// Unwrap exposes the client's writer to http.ResponseController.
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *captureWriter) backendStatus() int {
	if c.failed {
		return 0
	}
	return c.status
}

// countingBody counts the request body bytes read, whoever reads them.
type countingBody struct {
	rc io.ReadCloser
	n  atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }
