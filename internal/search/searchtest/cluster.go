package searchtest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"

	"github.com/tributary-dev/tributary/internal/search"
)

// Options configure a Cluster. The zero value (or nil) gives the defaults.
type Options struct {
	// OpenSearch makes the node's info read as OpenSearch 2 (no build_flavor). Default
	// Elasticsearch 8.
	OpenSearch bool
	// AutoCreateIndex is the persistent action.auto_create_index the cluster settings show;
	// "-" shows none. Default "-df-w-*,+*", the rule esfence requires.
	AutoCreateIndex string
	// ClusterUUID is the cluster state's cluster_uuid. Default "fake-cluster-uuid".
	ClusterUUID string
}

// Cluster is a fake node. It is safe for concurrent use.
type Cluster struct {
	// URL is the node's address (an httptest server on loopback).
	URL  string
	srv  *httptest.Server
	opts Options

	// hooks guards the fault hooks; they run outside mu, so that one may block.
	hooks     sync.Mutex
	intercept func(*Request) *Reply
	items     func(call, i int) int

	// mu guards the state and the request log.
	mu       sync.Mutex
	indices  map[string]*Index
	requests []Request
	counts   map[string]int
}

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string // decoded, with the leading slash
	Query  string // raw
	Header http.Header
	Body   string
	// Endpoint is the API the request is for: "_bulk", "_mget", "_aliases", "_mapping",
	// "_cluster/state", "_cluster/settings", "_nodes", "index" (a request on /<name>) or
	// "other".
	Endpoint string
	// Call is the request's number among the requests to its endpoint, from 1.
	Call int
}

// Reply is an answer an interceptor gives instead of the fake.
type Reply struct {
	Status int
	Body   string
	Header http.Header
	// Drop closes the connection without an answer.
	Drop bool
}

// Status answers status with body.
func Status(status int, body string) *Reply { return &Reply{Status: status, Body: body} }

// ErrorAnswer answers status with an error of type typ, shaped as the engines shape it.
func ErrorAnswer(status int, typ string) *Reply {
	return Status(status, `{"error":{"type":"`+typ+`","reason":"injected"},"status":`+strconv.Itoa(status)+`}`)
}

// Drop closes the connection without an answer.
func Drop() *Reply { return &Reply{Drop: true} }

// Index is the state of one index.
type Index struct {
	Mappings map[string]json.RawMessage // the mappings' members but properties (_meta, dynamic, ...)
	Props    map[string]json.RawMessage // the fields
	Settings json.RawMessage            // as created
	Aliases  map[string]bool
	// ReadOnly lists the aliases made with is_write_index false: writes through them fail.
	ReadOnly map[string]bool
	Docs     map[string]Doc
	// Dynamic lists the fields documents brought before the mapping had them, in order.
	Dynamic []string
}

// Doc is one document (or the tombstone of a deleted one).
type Doc struct {
	Version int64
	Deleted bool
	Source  json.RawMessage
}

// New starts a fake node, closed when the test ends.
func New(t testing.TB, opts *Options) *Cluster {
	t.Helper()
	c := &Cluster{indices: map[string]*Index{}, counts: map[string]int{}}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.AutoCreateIndex == "" {
		c.opts.AutoCreateIndex = "-df-w-*,+*"
	}
	if c.opts.ClusterUUID == "" {
		c.opts.ClusterUUID = "fake-cluster-uuid"
	}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serveHTTP))
	c.URL = c.srv.URL
	t.Cleanup(c.srv.Close)
	return c
}

// Intercept sets the function that sees every request first (nil removes it); a non-nil
// Reply is the answer, nil lets the fake answer.
func (c *Cluster) Intercept(f func(r *Request) *Reply) {
	c.hooks.Lock()
	c.intercept = f
	c.hooks.Unlock()
}

// FailItems sets the function that may override the status of item i (from 0) of the call-th
// _bulk request (from 1) with an injected error; 0 keeps the fake's own outcome. nil removes
// it.
func (c *Cluster) FailItems(f func(call, i int) int) {
	c.hooks.Lock()
	c.items = f
	c.hooks.Unlock()
}

// Requests returns every request so far, in order.
func (c *Cluster) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.requests...)
}

// Count returns how many requests went to endpoint.
func (c *Cluster) Count(endpoint string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[endpoint]
}

// Index returns a copy of the index's state, nil when there is no such index.
func (c *Cluster) Index(name string) *Index {
	c.mu.Lock()
	defer c.mu.Unlock()
	ix := c.indices[name]
	if ix == nil {
		return nil
	}
	cp := &Index{Mappings: clone(ix.Mappings), Props: clone(ix.Props), Aliases: clone(ix.Aliases), ReadOnly: clone(ix.ReadOnly),
		Docs: clone(ix.Docs), Settings: ix.Settings, Dynamic: append([]string(nil), ix.Dynamic...)}
	return cp
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// EditIndex runs f on the index's state (as another client of the cluster would change it);
// false when there is no such index.
func (c *Cluster) EditIndex(name string, f func(ix *Index)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ix := c.indices[name]
	if ix == nil {
		return false
	}
	f(ix)
	return true
}

// DeleteIndex removes an index, as a user deleting it would.
func (c *Cluster) DeleteIndex(name string) {
	c.mu.Lock()
	delete(c.indices, name)
	c.mu.Unlock()
}

// Perform answers r in-process, which makes the Cluster an esapi.Transport: for benchmarks
// that measure the client without sockets. A dropped connection is an error.
func (c *Cluster) Perform(r *http.Request) (*http.Response, error) {
	rep := c.handle(r)
	if rep.Drop {
		return nil, errors.New("searchtest: connection dropped")
	}
	h := rep.Header
	if h == nil {
		h = http.Header{}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return &http.Response{StatusCode: rep.Status, Header: h, Body: io.NopCloser(strings.NewReader(rep.Body)), Request: r}, nil
}

func (c *Cluster) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rep := c.handle(r)
	if rep.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rep.Status)
	_, _ = io.WriteString(w, rep.Body)
}

// handle records the request, lets the interceptor answer and else the simulation.
func (c *Cluster) handle(r *http.Request) *Reply {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	req := Request{Method: r.Method, Path: "/" + strings.Trim(r.URL.Path, "/"), Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: string(body)}
	req.Endpoint = endpointOf(req.Path)
	c.mu.Lock()
	c.counts[req.Endpoint]++
	req.Call = c.counts[req.Endpoint]
	c.requests = append(c.requests, req)
	c.mu.Unlock()

	c.hooks.Lock()
	intercept, items := c.intercept, c.items
	c.hooks.Unlock()
	if intercept != nil {
		if rep := intercept(&req); rep != nil {
			return rep
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.simulate(&req, items)
}

func endpointOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	last := parts[len(parts)-1]
	switch {
	case strings.HasPrefix(path, "/_cluster/state"):
		return "_cluster/state"
	case path == "/_cluster/settings":
		return "_cluster/settings"
	case strings.HasPrefix(path, "/_nodes"):
		return "_nodes"
	case last == "_bulk", last == "_mget", last == "_aliases", last == "_mapping", last == "_refresh":
		return last
	case len(parts) == 1 && parts[0] != "" && !strings.HasPrefix(parts[0], "_"):
		return "index"
	}
	return "other"
}

func errorReply(status int, typ string) *Reply {
	return Status(status, `{"error":{"type":"`+typ+`","reason":"fake"},"status":`+strconv.Itoa(status)+`}`)
}

func jsonReply(status int, v any) *Reply {
	b, err := json.Marshal(v)
	if err != nil {
		return errorReply(500, "fake_marshal_failure")
	}
	return Status(status, string(b))
}

func (c *Cluster) simulate(r *Request, items func(call, i int) int) *Reply {
	parts := strings.Split(strings.Trim(r.Path, "/"), "/")
	switch r.Endpoint {
	case "_cluster/state":
		return Status(200, `{"metadata":{"cluster_uuid":`+strconv.Quote(c.opts.ClusterUUID)+`}}`)
	case "_cluster/settings":
		if r.Method != http.MethodGet {
			break
		}
		if c.opts.AutoCreateIndex == "-" {
			return Status(200, `{}`)
		}
		return Status(200, `{"persistent":{"action":{"auto_create_index":`+strconv.Quote(c.opts.AutoCreateIndex)+`}}}`)
	case "_nodes":
		if c.opts.OpenSearch {
			return Status(200, `{"nodes":{"n1":{"version":"2.19.0"}}}`)
		}
		return Status(200, `{"nodes":{"n1":{"version":"8.19.0","build_flavor":"default"}}}`)
	case "_bulk":
		return c.bulk(r, items)
	case "_aliases":
		return c.aliasActions(r.Body)
	case "_refresh":
		if len(parts) == 2 {
			if _, ix := c.resolve(parts[0], false); ix == nil {
				return errorReply(404, "index_not_found_exception")
			}
		}
		return Status(200, `{"_shards":{"total":1,"successful":1,"failed":0}}`)
	case "_mget":
		name := ""
		if len(parts) == 2 {
			name = parts[0]
		}
		return c.mget(name, r.Body)
	case "_mapping":
		if len(parts) == 2 {
			return c.mapping(r.Method, parts[0], r.Body)
		}
	case "index":
		switch r.Method {
		case http.MethodPut:
			return c.create(parts[0], r.Body)
		case http.MethodGet, http.MethodHead:
			return c.get(parts[0], strings.Contains(r.Query, "ignore_unavailable=true"))
		case http.MethodDelete:
			if c.indices[parts[0]] == nil {
				return errorReply(404, "index_not_found_exception")
			}
			delete(c.indices, parts[0])
			return Status(200, `{"acknowledged":true}`)
		}
	}
	return errorReply(400, "fake_unsupported_request")
}

// Client returns a client of the fake built as the code under test builds its own
// (search.NewClient), closed when the test ends.
func (c *Cluster) Client(t testing.TB) *elastictransport.Client {
	t.Helper()
	tp, err := search.NewClient(search.Options{URLs: []string{c.URL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close(context.Background()) })
	return tp
}
