package faultproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seenReq is what the backend observed of one request.
type seenReq struct {
	Method, Path, Query, Host, Tag string
	BodyLen                        int
	BodySum                        [32]byte
}

// backend is the HTTP target. Paths: /echo returns the body, /broken breaks off its response
// body, /hang blocks until the request is canceled, /status/N answers N, anything else 200
// with a small JSON body.
type backend struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenReq
	hung chan struct{} // receives when a /hang request arrives
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{hung: make(chan struct{}, 16)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.seen = append(b.seen, seenReq{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host,
			Tag: r.Header.Get("X-Tag"), BodyLen: len(body), BodySum: sha256.Sum256(body),
		})
		b.mu.Unlock()
		switch {
		case r.URL.Path == "/echo":
			w.Write(body)
		case r.URL.Path == "/broken":
			// Promise more than is sent, then cut the connection.
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("partial"))
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		case r.URL.Path == "/hang":
			b.hung <- struct{}{}
			<-r.Context().Done()
		case strings.HasPrefix(r.URL.Path, "/status/"):
			code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
			w.WriteHeader(code)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"ok":true,"path":%q}`, r.URL.Path)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) requests() []seenReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seenReq(nil), b.seen...)
}

func newHTTP(t *testing.T, target string, opts HTTPOptions) *HTTPProxy {
	t.Helper()
	p, err := NewHTTP(target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func addRule(t *testing.T, p *HTTPProxy, r Rule) RuleID {
	t.Helper()
	id, err := p.AddRule(r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// client returns an HTTP client with its own connection pool, closed at the end of the test.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func send(ctx context.Context, c *http.Client, method, url string, body io.Reader) (result, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return result{}, err
	}
	req.Header.Set("X-Tag", "tagged")
	resp, err := c.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, b}, err
}

func mustSend(t *testing.T, c *http.Client, method, url string, body io.Reader) result {
	t.Helper()
	r, err := send(testCtx(t), c, method, url, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func statusOf(t *testing.T, c *http.Client, method, url string) int {
	t.Helper()
	return mustSend(t, c, method, url, strings.NewReader("{}")).status
}

func TestHTTPForwards(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)

	r := mustSend(t, c, http.MethodGet, p.URL()+"/idx/_doc/1?refresh=true", nil)
	if r.status != 200 || string(r.body) != `{"ok":true,"path":"/idx/_doc/1"}` {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	seen := b.requests()
	if len(seen) != 1 {
		t.Fatalf("backend saw %d requests, want 1", len(seen))
	}
	if s := seen[0]; s.Method != "GET" || s.Path != "/idx/_doc/1" || s.Query != "refresh=true" ||
		s.Tag != "tagged" || s.Host != strings.TrimPrefix(b.URL, "http://") {
		t.Fatalf("backend saw %+v", s)
	}
	want := Record{Seq: 1, Method: "GET", Path: "/idx/_doc/1", Query: "refresh=true",
		Action: Forward, Forwarded: true, BackendStatus: 200, Status: 200}
	if recs := p.Records(); len(recs) != 1 || recs[0] != want {
		t.Fatalf("records = %+v, want [%+v]", recs, want)
	}
	// Backend statuses pass through untouched.
	if s := statusOf(t, c, "GET", p.URL()+"/status/404"); s != 404 {
		t.Fatalf("status = %d, want the backend's 404", s)
	}
}

func TestHTTPTargetPathPrefix(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL+"/base", HTTPOptions{})
	mustSend(t, client(t), "GET", p.URL()+"/x", nil)
	if seen := b.requests(); len(seen) != 1 || seen[0].Path != "/base/x" {
		t.Fatalf("backend saw %+v, want /base/x", seen)
	}
}

func TestHTTPInjectsOnlyForMatchingRequests(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	bulk := addRule(t, p, Rule{
		Name: "bulk-429", Method: "post", PathPrefix: "/_bulk",
		Action: Respond, Response: TooManyRequests(1500 * time.Millisecond),
	})
	addRule(t, p, Rule{
		Name:     "search-503",
		Match:    func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/_search") },
		Action:   Respond,
		Response: Response{Status: 503, Header: http.Header{"X-Why": {"test"}}, Body: []byte("busy")},
	})

	r := mustSend(t, c, "POST", p.URL()+"/_bulk", strings.NewReader(`{"index":{}}`+"\n{}\n"))
	if r.status != 429 || r.header.Get("Retry-After") != "2" ||
		r.header.Get("Content-Type") != "application/json" ||
		!strings.Contains(string(r.body), `"type":"injected_fault"`) ||
		!strings.Contains(string(r.body), `"status":429`) {
		t.Fatalf("bulk: got %d %v %s", r.status, r.header, r.body)
	}
	r = mustSend(t, c, "GET", p.URL()+"/idx/_search", nil)
	if r.status != 503 || r.header.Get("X-Why") != "test" || string(r.body) != "busy" {
		t.Fatalf("search: got %d %v %s", r.status, r.header, r.body)
	}
	// Non-matching method, path, and a path the prefix does not cover are all forwarded.
	for _, req := range [][2]string{{"GET", "/_bulk"}, {"POST", "/other"}, {"POST", "/idx/_bulk"}} {
		if s := statusOf(t, c, req[0], p.URL()+req[1]); s != 200 {
			t.Fatalf("%v: status %d, want 200 from the backend", req, s)
		}
	}
	if seen := b.requests(); len(seen) != 3 {
		t.Fatalf("backend saw %d requests, want only the 3 unmatched ones: %+v", len(seen), seen)
	}
	recs := p.Records()
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	if r := recs[0]; r.RuleID != bulk || r.RuleName != "bulk-429" || r.Action != Respond ||
		r.Forwarded || r.Status != 429 || r.BackendStatus != 0 || r.RequestBytes != 16 {
		t.Fatalf("bulk record = %+v", r)
	}
	if r := recs[1]; r.RuleName != "search-503" || r.Status != 503 || r.Forwarded {
		t.Fatalf("search record = %+v", r)
	}
	if r := recs[4]; r.RuleID != 0 || !r.Forwarded || r.Status != 200 {
		t.Fatalf("unmatched record = %+v", r)
	}
}

func TestHTTPFirstN(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	id := addRule(t, p, Rule{Times: 2, Action: Respond, Response: Response{Status: 503}})
	var got []int
	for range 4 {
		got = append(got, statusOf(t, c, "POST", p.URL()+"/x"))
	}
	if fmt.Sprint(got) != "[503 503 200 200]" {
		t.Fatalf("statuses %v, want the first two to fail", got)
	}
	if h := p.Hits(id); h != 2 {
		t.Fatalf("Hits = %d, want 2", h)
	}

	// Under concurrency exactly Times requests get the fault.
	addRule(t, p, Rule{PathPrefix: "/par", Times: 5, Action: Respond, Response: TooManyRequests(0)})
	var n429, n200 atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			r, err := send(testCtx(t), c, "POST", p.URL()+"/par", strings.NewReader("{}"))
			switch {
			case err != nil:
				t.Error(err)
			case r.status == 429:
				if r.header.Get("Retry-After") != "" {
					t.Error("Retry-After set for a zero duration")
				}
				n429.Add(1)
			case r.status == 200:
				n200.Add(1)
			}
		})
	}
	wg.Wait()
	if n429.Load() != 5 || n200.Load() != 15 {
		t.Fatalf("got %d x 429 and %d x 200, want 5 and 15", n429.Load(), n200.Load())
	}
}

func TestHTTPRuleOrderAndFallThrough(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	// Let two requests through, then fail the rest: an exhausted rule falls through.
	pass := addRule(t, p, Rule{Name: "pass", Times: 2})
	fail := addRule(t, p, Rule{Name: "fail", Action: Respond, Response: Response{Status: 503}})
	var got []int
	for range 4 {
		got = append(got, statusOf(t, c, "GET", p.URL()+"/"))
	}
	if fmt.Sprint(got) != "[200 200 503 503]" {
		t.Fatalf("statuses %v", got)
	}
	if p.Hits(pass) != 2 || p.Hits(fail) != 2 {
		t.Fatalf("hits %d/%d, want 2/2", p.Hits(pass), p.Hits(fail))
	}

	if !p.RemoveRule(fail) || p.RemoveRule(fail) {
		t.Fatal("RemoveRule should succeed exactly once")
	}
	if p.Hits(fail) != 0 {
		t.Fatal("Hits of a removed rule should be 0")
	}
	if s := statusOf(t, c, "GET", p.URL()+"/"); s != 200 {
		t.Fatalf("after RemoveRule: %d", s)
	}
	addRule(t, p, Rule{Action: Respond, Response: Response{Status: 500}})
	p.ClearRules()
	if s := statusOf(t, c, "GET", p.URL()+"/"); s != 200 {
		t.Fatalf("after ClearRules: %d", s)
	}
}

func TestHTTPDelay(t *testing.T) {
	const d = 150 * time.Millisecond
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	addRule(t, p, Rule{PathPrefix: "/slow", Delay: d})
	addRule(t, p, Rule{PathPrefix: "/fail-slowly", Delay: d, Action: Respond, Response: Response{Status: 503}})

	for path, want := range map[string]int{"/slow": 200, "/fail-slowly": 503} {
		start := time.Now()
		if s := statusOf(t, c, "POST", p.URL()+path); s != want {
			t.Fatalf("%s: status %d, want %d", path, s, want)
		}
		if el := time.Since(start); el < d {
			t.Fatalf("%s took %v, want at least %v", path, el, d)
		}
	}
	if seen := b.requests(); len(seen) != 1 || seen[0].Path != "/slow" {
		t.Fatalf("backend saw %+v, want only the delayed forward", seen)
	}
}

func TestHTTPForwardThenRespond(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	addRule(t, p, Rule{
		Method: "POST", PathPrefix: "/_bulk", Times: 1,
		Action: ForwardThenRespond, Response: TooManyRequests(time.Second),
	})
	body := `{"index":{"_index":"i","_id":"1"}}` + "\n" + `{"f":1}` + "\n"

	r := mustSend(t, c, "POST", p.URL()+"/_bulk", strings.NewReader(body))
	if r.status != 429 || r.header.Get("Retry-After") != "1" || strings.Contains(string(r.body), `"ok"`) {
		t.Fatalf("got %d %v %s, want the injected 429 only", r.status, r.header, r.body)
	}
	seen := b.requests()
	if len(seen) != 1 || seen[0].BodySum != sha256.Sum256([]byte(body)) {
		t.Fatalf("backend saw %+v, want the bulk request with its body intact", seen)
	}
	// The retry goes through: the backend sees the same request twice.
	if s := statusOf(t, c, "POST", p.URL()+"/_bulk"); s != 200 {
		t.Fatalf("retry status %d", s)
	}
	rec := p.Records()[0]
	if !rec.Forwarded || rec.BackendStatus != 200 || rec.Status != 429 || rec.Action != ForwardThenRespond ||
		rec.RequestBytes != int64(len(body)) || rec.Err != "" {
		t.Fatalf("record = %+v", rec)
	}
}

func TestHTTPDrop(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	addRule(t, p, Rule{PathPrefix: "/drop", Action: Drop})
	addRule(t, p, Rule{PathPrefix: "/applied", Action: ForwardThenDrop})

	// POST, so Go's transport does not transparently retry on the closed connection.
	for _, path := range []string{"/drop", "/applied"} {
		if r, err := send(testCtx(t), c, "POST", p.URL()+path, strings.NewReader("{}")); err == nil {
			t.Fatalf("%s: got status %d, want a connection error", path, r.status)
		}
	}
	if seen := b.requests(); len(seen) != 1 || seen[0].Path != "/applied" {
		t.Fatalf("backend saw %+v, want only /applied", seen)
	}
	recs := p.Records()
	if len(recs) != 2 {
		t.Fatalf("records %+v", recs)
	}
	if r := recs[0]; r.Action != Drop || r.Forwarded || r.Status != 0 || r.Err != "" {
		t.Fatalf("drop record %+v", r)
	}
	if r := recs[1]; r.Action != ForwardThenDrop || !r.Forwarded || r.BackendStatus != 200 || r.Status != 0 || r.Err != "" {
		t.Fatalf("forward-then-drop record %+v", r)
	}
	if s := statusOf(t, c, "POST", p.URL()+"/fine"); s != 200 {
		t.Fatalf("after drops: %d", s)
	}
}

func TestHTTPBodyIntegrity(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	sum := sha256.Sum256(data)

	addRule(t, p, Rule{PathPrefix: "/delayed", Delay: 10 * time.Millisecond})
	addRule(t, p, Rule{PathPrefix: "/replaced", Action: ForwardThenRespond, Response: Response{Status: 429}})
	addRule(t, p, Rule{PathPrefix: "/refused", Action: Respond, Response: Response{Status: 413}})

	cases := []struct {
		path    string
		chunked bool
		status  int
		reaches bool
	}{
		{"/echo", false, 200, true},
		{"/echo", true, 200, true},
		{"/delayed", false, 200, true},
		{"/replaced", true, 429, true},
		{"/refused", false, 413, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-chunked=%v", tc.path[1:], tc.chunked), func(t *testing.T) {
			before := len(b.requests())
			p.ResetRecords()
			var body io.Reader = bytes.NewReader(data)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length: sent with chunked encoding
			}
			r := mustSend(t, c, "POST", p.URL()+tc.path, body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d", r.status, tc.status)
			}
			if tc.path == "/echo" && !bytes.Equal(r.body, data) {
				t.Fatalf("response body corrupted (%d bytes)", len(r.body))
			}
			seen := b.requests()[before:]
			switch {
			case !tc.reaches && len(seen) != 0:
				t.Fatalf("backend saw %d requests, want none", len(seen))
			case tc.reaches && (len(seen) != 1 || seen[0].BodyLen != len(data) || seen[0].BodySum != sum):
				t.Fatalf("backend did not get the body intact: %d requests", len(seen))
			}
			if recs := p.Records(); len(recs) != 1 || recs[0].RequestBytes != int64(len(data)) {
				t.Fatalf("records %+v, want RequestBytes %d", recs, len(data))
			}
		})
	}
}

func TestHTTPTargetDown(t *testing.T) {
	b := startBackend(t)
	url := b.URL
	b.Close()
	p := newHTTP(t, url, HTTPOptions{})
	if s := statusOf(t, client(t), "GET", p.URL()+"/"); s != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", s)
	}
	if r := p.Records()[0]; !r.Forwarded || r.BackendStatus != 0 || r.Status != 502 || r.Err == "" {
		t.Fatalf("record %+v", r)
	}
}

func TestHTTPTargetBreaksOff(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{})
	c := client(t)
	addRule(t, p, Rule{Match: func(r *http.Request) bool { return r.URL.Query().Has("replace") },
		Action: ForwardThenRespond, Response: Response{Status: 503}})

	if r, err := send(testCtx(t), c, "POST", p.URL()+"/broken", nil); err == nil {
		t.Fatalf("got a complete response (%d %q) from a broken backend", r.status, r.body)
	}
	// A replaced response hides the breakage from the client but not from the record.
	if s := statusOf(t, c, "POST", p.URL()+"/broken?replace"); s != 503 {
		t.Fatalf("status %d, want the injected 503", s)
	}
	recs := p.Records()
	if len(recs) != 2 {
		t.Fatalf("records %+v", recs)
	}
	for _, r := range recs {
		if !r.Forwarded || r.BackendStatus != 200 || r.Err == "" {
			t.Errorf("record %+v, want backend status 200 and an error", r)
		}
	}
}

func TestHTTPRecordsCap(t *testing.T) {
	b := startBackend(t)
	c := client(t)
	p := newHTTP(t, b.URL, HTTPOptions{MaxRecords: 3})
	for range 5 {
		statusOf(t, c, "GET", p.URL()+"/")
	}
	recs := p.Records()
	if len(recs) != 3 || recs[0].Seq != 3 || recs[2].Seq != 5 {
		t.Fatalf("records %+v, want the last three", recs)
	}
	p.ResetRecords()
	if len(p.Records()) != 0 {
		t.Fatal("ResetRecords left records")
	}
	off := newHTTP(t, b.URL, HTTPOptions{MaxRecords: -1})
	statusOf(t, c, "GET", off.URL()+"/")
	if len(off.Records()) != 0 {
		t.Fatal("records kept with MaxRecords < 0")
	}
}

// TestHTTPConcurrentRuleChanges changes rules and reads records while requests flow, for the
// race detector; every answer must come from the backend or from one of the rules.
func TestHTTPConcurrentRuleChanges(t *testing.T) {
	b := startBackend(t)
	p := newHTTP(t, b.URL, HTTPOptions{MaxRecords: 50})
	c := client(t)
	ctx := testCtx(t)

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 40 {
				r, err := send(ctx, c, "POST", p.URL()+"/_bulk", strings.NewReader("{}\n"))
				if err != nil {
					t.Error(err)
					return
				}
				if r.status != 200 && r.status != 429 && r.status != 503 {
					t.Errorf("unexpected status %d", r.status)
				}
			}
		})
	}
	for w := range 3 {
		wg.Go(func() {
			for i := range 60 {
				switch (i + w) % 6 {
				case 0, 1:
					id, err := p.AddRule(Rule{PathPrefix: "/_bulk", Times: i % 3, Action: Respond, Response: TooManyRequests(time.Second)})
					if err != nil {
						t.Error(err)
					}
					p.Hits(id)
				case 2:
					p.AddRule(Rule{Method: "POST", Action: ForwardThenRespond, Response: Response{Status: 503}, Times: 1})
				case 3:
					p.RemoveRule(RuleID(i))
				case 4:
					_ = p.Records()
					p.ResetRecords()
				case 5:
					p.ClearRules()
				}
			}
		})
	}
	wg.Wait()
	p.ClearRules()
	if s := statusOf(t, c, "POST", p.URL()+"/_bulk"); s != 200 {
		t.Fatalf("after clearing rules: %d", s)
	}
}

func TestHTTPCloseStopsEverything(t *testing.T) {
	b := startBackend(t)
	p, err := NewHTTP(b.URL, HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)
	ctx := testCtx(t)
	statusOf(t, c, "GET", p.URL()+"/") // leaves an idle keep-alive connection on both hops

	// One request waits out a long delay, another waits for a backend that never answers.
	inDelay := make(chan struct{}, 1)
	addRule(t, p, Rule{
		PathPrefix: "/slow",
		Match:      func(*http.Request) bool { inDelay <- struct{}{}; return true },
		Delay:      time.Hour,
	})
	addRule(t, p, Rule{PathPrefix: "/hang", Action: ForwardThenRespond, Response: Response{Status: 429}})
	errs := make(chan error, 2)
	for _, path := range []string{"/slow", "/hang"} {
		go func() {
			_, err := send(ctx, c, "POST", p.URL()+path, strings.NewReader("{}"))
			errs <- err
		}()
	}
	<-inDelay
	<-b.hung
	if len(proxyGoroutines()) == 0 {
		t.Fatal("proxyGoroutines finds nothing while requests are in flight; the leak check is blind")
	}

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitNoProxyGoroutines(t)
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("a request in flight at Close succeeded")
		}
	}
	recs := p.Records()
	if len(recs) != 3 || recs[1].Err == "" || recs[2].Err == "" {
		t.Fatalf("records %+v, want the two interrupted requests with an error", recs)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := send(ctx, c, "GET", p.URL()+"/", nil); err == nil {
		t.Fatal("request after Close succeeded")
	}
	// With the backend and the client pool gone too, no HTTP connection goroutine may remain
	// (the proxy's server side and its transport to the backend included).
	b.Close()
	c.CloseIdleConnections()
	waitNoGoroutines(ctx, t, "net/http.(*conn).serve", "net/http.(*persistConn)")
}

func TestHTTPOptionsAndErrors(t *testing.T) {
	for _, target := range []string{"127.0.0.1:9200", "ftp://h/", "http://", "::"} {
		if _, err := NewHTTP(target, HTTPOptions{}); err == nil {
			t.Errorf("target %q accepted", target)
		}
	}
	if _, err := NewHTTP("http://127.0.0.1:1", HTTPOptions{ListenAddr: "0.0.0.0:0"}); err == nil {
		t.Error("a non-loopback listen address was accepted")
	}
	p := newHTTP(t, "http://127.0.0.1:1", HTTPOptions{})
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") || p.URL() != "http://"+p.Addr() {
		t.Errorf("URL %q, Addr %q", p.URL(), p.Addr())
	}
	for _, r := range []Rule{
		{Action: Respond},
		{Action: ForwardThenRespond, Response: Response{Status: 42}},
		{Action: Action(99)},
		{Times: -1},
		{Delay: -time.Second},
	} {
		if _, err := p.AddRule(r); err == nil {
			t.Errorf("invalid rule %+v accepted", r)
		}
	}
	if id, err := p.AddRule(Rule{Action: Drop}); err != nil || id == 0 {
		t.Errorf("valid rule: id %d, err %v", id, err)
	}
}
