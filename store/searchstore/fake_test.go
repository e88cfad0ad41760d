package searchstore

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/store/driver"
)

// newFake is the shared fake node (internal/search/searchtest) answering every request with
// answer's status and body (nil: 200 "{}"; status -1 drops the connection), so the adapter's
// side of the protocol (request shapes, classification, caching) is tested without a server.
func newFake(t *testing.T, answer func(r *searchtest.Request) (int, string)) *searchtest.Cluster {
	t.Helper()
	f := searchtest.New(t, nil)
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		status, body := 200, "{}"
		if answer != nil {
			status, body = answer(r)
		}
		if status == -1 {
			return searchtest.Drop()
		}
		return searchtest.Status(status, body)
	})
	return f
}

func storeOf(t *testing.T, f *searchtest.Cluster, opts *Options) *Store {
	t.Helper()
	return storeAt(t, []string{f.URL}, opts)
}

// storeAt opens the adapter on urls, closed when the test ends.
func storeAt(t *testing.T, urls []string, opts *Options) *Store {
	t.Helper()
	s, err := NewFromURLs(urls, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func addrOf(dataset, key string) driver.Address {
	return driver.Address{Store: "s", Namespace: "n", Dataset: dataset, Key: driver.NewStringKey(key)}
}

func putOf(a driver.Address, doc string, cond driver.Condition) driver.Write {
	return driver.Write{Kind: driver.Put, Addr: a, Doc: driver.Document{JSON: []byte(doc)}, Cond: cond}
}

func wantKind(t *testing.T, what string, err error, want driver.ErrorKind) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, want)
	}
	if got := driver.KindOf(err); got != want {
		t.Fatalf("%s: %v (kind %v), want %v", what, err, got, want)
	}
}

func TestFakeReadOneMgetRawSource(t *testing.T) {
	const source = `{ "spaced" :  [1, 2.50, "x"] , "u":"\u00e9" }`
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		return 200, `{"docs":[
			{"_index":"a","_id":"1","_version":3,"_seq_no":7,"_primary_term":2,"found":true,"_source":` + source + `},
			{"_index":"b","_id":"2","found":false},
			{"_index":"gone","_id":"3","error":{"root_cause":[],"type":"index_not_found_exception","reason":"no such index [gone]","index":"gone"}}]}`
	})
	s := storeOf(t, f, nil)
	addrs := []driver.Address{addrOf("a", "1"), addrOf("b", "2"), addrOf("gone", "3")}
	res, err := s.Read(context.Background(), addrs)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Found || string(res[0].Doc.JSON) != source || res[0].Doc.Times != nil {
		t.Fatalf("found doc: %+v, want the _source bytes unchanged", res[0])
	}
	if r, _ := decodeRevision(res[0].Revision); r != (revision{7, 2}) {
		t.Fatalf("revision %v, want seq 7 term 2", r)
	}
	if res[1].Found || res[1].Err != nil {
		t.Fatalf("missing doc: %+v", res[1])
	}
	wantKind(t, "missing index", res[2].Err, driver.KindNotFound)
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/_mget" {
		t.Fatalf("requests %+v, want one POST /_mget", reqs)
	}
	var body struct {
		Docs []struct {
			Index string `json:"_index"`
			ID    string `json:"_id"`
		} `json:"docs"`
	}
	if err := json.Unmarshal([]byte(reqs[0].Body), &body); err != nil || len(body.Docs) != 3 || body.Docs[2].Index != "gone" || body.Docs[2].ID != "3" {
		t.Fatalf("mget body %s (%v)", reqs[0].Body, err)
	}
}

// bulkAnswer builds a _bulk answer from item JSON objects, each {"<action>":{...}}.
func bulkAnswer(items ...string) string {
	return `{"took":1,"errors":true,"items":[` + strings.Join(items, ",") + `]}`
}

func TestFakeWriteClassifiesItems(t *testing.T) {
	ok := func(action, result string, status int) string {
		return `{"` + action + `":{"_index":"d","_id":"x","_version":1,"result":"` + result + `","_seq_no":4,"_primary_term":1,"status":` + itoa(status) + `}}`
	}
	fail := func(action string, status int, typ string) string {
		return `{"` + action + `":{"_index":"d","_id":"x","status":` + itoa(status) + `,"error":{"type":"` + typ + `","reason":"secret value 42"}}}`
	}
	items := []string{
		ok("index", "created", 201),
		ok("index", "updated", 200),
		fail("create", 409, "version_conflict_engine_exception"),
		fail("index", 409, "version_conflict_engine_exception"),
		fail("index", 429, "es_rejected_execution_exception"),
		fail("index", 400, "document_parsing_exception"),
		fail("index", 404, "index_not_found_exception"),
		ok("delete", "deleted", 200),
		`{"delete":{"_index":"d","_id":"x","_version":1,"result":"not_found","_seq_no":5,"_primary_term":1,"status":404}}`,
		fail("delete", 409, "version_conflict_engine_exception"),
	}
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		if r.Method == http.MethodHead {
			return 200, ""
		}
		return 200, bulkAnswer(items...)
	})
	s := storeOf(t, f, nil)
	rev := driver.Condition{Kind: driver.IfRevision, Revision: revision{3, 1}.encode()}
	a := addrOf("d", "x")
	writes := []driver.Write{
		putOf(addrOf("d", "0"), `{}`, driver.Condition{}),
		putOf(addrOf("d", "1"), `{}`, rev),
		putOf(addrOf("d", "2"), `{}`, driver.Condition{Kind: driver.IfAbsent}),
		putOf(addrOf("d", "3"), `{}`, rev),
		putOf(addrOf("d", "4"), `{}`, driver.Condition{}),
		putOf(addrOf("d", "5"), `{"v":"secret value 42"}`, driver.Condition{}),
		putOf(addrOf("d", "6"), `{}`, driver.Condition{}),
		{Kind: driver.Delete, Addr: addrOf("d", "7")},
		{Kind: driver.Delete, Addr: addrOf("d", "8")},
		{Kind: driver.Delete, Addr: a, Cond: rev},
	}
	res, err := s.Write(context.Background(), writes, driver.WriteOptions{Visible: true})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome := func(i int, o driver.Outcome, withRev bool) {
		t.Helper()
		if res[i].Err != nil || res[i].Outcome != o || (len(res[i].Revision) > 0) != withRev {
			t.Fatalf("write %d: %+v, want outcome %v (revision %v)", i, res[i], o, withRev)
		}
	}
	wantOutcome(0, driver.Created, true)
	wantOutcome(1, driver.Updated, true)
	wantKind(t, "create on existing", res[2].Err, driver.KindAlreadyExists)
	wantKind(t, "stale index", res[3].Err, driver.KindConflict)
	wantKind(t, "rejected", res[4].Err, driver.KindUnavailable)
	wantKind(t, "mapping", res[5].Err, driver.KindInvalid)
	if strings.Contains(res[5].Err.Error(), "secret") {
		t.Fatalf("error carries document contents: %v", res[5].Err)
	}
	wantKind(t, "missing index", res[6].Err, driver.KindNotFound)
	wantOutcome(7, driver.Deleted, false)
	wantOutcome(8, driver.Absent, false)
	wantKind(t, "stale delete", res[9].Err, driver.KindConflict)

	reqs := f.Requests()
	if len(reqs) != 2 || reqs[0].Method != http.MethodHead || reqs[0].Path != "/d" || reqs[1].Path != "/_bulk" {
		t.Fatalf("requests %+v, want HEAD /d then one POST /_bulk", reqs)
	}
	if !strings.Contains(reqs[1].Query, "refresh=wait_for") {
		t.Fatalf("visible write without refresh=wait_for: %q", reqs[1].Query)
	}
	if n := strings.Count(reqs[1].Body, "\n"); n != 7*2+3 {
		t.Fatalf("bulk body has %d lines, want 17", n)
	}
	// The item answered index_not_found dropped the dataset from the cache: the next write
	// checks again.
	_, _ = s.Write(context.Background(), writes[:1], driver.WriteOptions{})
	if reqs := f.Requests(); len(reqs) != 4 || reqs[2].Method != http.MethodHead {
		t.Fatalf("after a missing-index item, requests %+v, want a new HEAD", reqs)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestFakeMissingDatasetIsNotWritten(t *testing.T) {
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		switch {
		case r.Method == http.MethodHead && r.Path == "/missing":
			return 404, ""
		case r.Method == http.MethodHead:
			return 200, ""
		}
		return 200, bulkAnswer(`{"index":{"result":"created","status":201,"_seq_no":0,"_primary_term":1}}`)
	})
	s := storeOf(t, f, nil)
	res, err := s.Write(context.Background(), []driver.Write{
		putOf(addrOf("missing", "1"), `{}`, driver.Condition{}),
		putOf(addrOf("present", "1"), `{}`, driver.Condition{}),
		{Kind: driver.Delete, Addr: addrOf("missing", "2")},
	}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "put to a missing dataset", res[0].Err, driver.KindNotFound)
	wantKind(t, "delete in a missing dataset", res[2].Err, driver.KindNotFound)
	if res[1].Err != nil || res[1].Outcome != driver.Created {
		t.Fatalf("put beside them: %+v", res[1])
	}
	for _, r := range f.Requests() {
		if r.Path == "/_bulk" && strings.Contains(r.Body, `"missing"`) {
			t.Fatalf("a write to the missing dataset was sent: %s", r.Body)
		}
	}
}

func TestFakeDatasetCacheTTL(t *testing.T) {
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		if r.Method == http.MethodHead {
			return 200, ""
		}
		return 200, bulkAnswer(`{"delete":{"result":"deleted","status":200}}`)
	})
	now := time.Unix(1000, 0)
	s := storeOf(t, f, &Options{DatasetTTL: time.Minute, Now: func() time.Time { return now }})
	heads := func() int {
		n := 0
		for _, r := range f.Requests() {
			if r.Method == http.MethodHead {
				n++
			}
		}
		return n
	}
	del := []driver.Write{{Kind: driver.Delete, Addr: addrOf("d", "1")}}
	for range 3 {
		if res, err := s.Write(context.Background(), del, driver.WriteOptions{}); err != nil || res[0].Err != nil {
			t.Fatalf("write: %v %+v", err, res)
		}
	}
	if heads() != 1 {
		t.Fatalf("%d existence checks for three writes within the TTL, want 1", heads())
	}
	now = now.Add(time.Minute)
	_, _ = s.Write(context.Background(), del, driver.WriteOptions{})
	if heads() != 2 {
		t.Fatalf("%d existence checks after the TTL, want 2", heads())
	}
	skip := storeOf(t, f, &Options{SkipDatasetCheck: true})
	_, _ = skip.Write(context.Background(), del, driver.WriteOptions{})
	if heads() != 2 {
		t.Fatal("SkipDatasetCheck still checked")
	}
}

func TestFakeWholeRequestFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		write    driver.ErrorKind
		read     driver.ErrorKind
		unknown  bool // the write's message must say the outcome is unknown
		dropOnly bool
	}{
		{"429", 429, `{"error":{"type":"circuit_breaking_exception"},"status":429}`, driver.KindUnavailable, driver.KindUnavailable, false, false},
		{"503", 503, `{"error":{"type":"cluster_block_exception"},"status":503}`, driver.KindUnavailable, driver.KindUnavailable, false, false},
		{"413", 413, ``, driver.KindTooLarge, driver.KindTooLarge, false, false},
		{"400", 400, `{"error":{"type":"action_request_validation_exception"},"status":400}`, driver.KindInvalid, driver.KindInvalid, false, false},
		{"500", 500, `{"error":{"type":"exception"},"status":500}`, driver.KindOutcomeUnknown, driver.KindUnavailable, true, false},
		{"504", 504, `gateway timeout`, driver.KindOutcomeUnknown, driver.KindUnavailable, true, false},
		{"dropped", -1, ``, driver.KindOutcomeUnknown, driver.KindUnavailable, true, true},
		{"truncated", 200, `{"items":[{"index":{"status":201`, driver.KindOutcomeUnknown, driver.KindInternal, true, false},
		{"no items", 200, `{"items":[]}`, driver.KindOutcomeUnknown, driver.KindInternal, true, false},
		{"item without an action", 200, `{"items":[{}]}`, driver.KindOutcomeUnknown, driver.KindInternal, true, false},
		{"403", 403, `{"error":{"type":"security_exception"},"status":403}`, driver.KindPermissionDenied, driver.KindPermissionDenied, false, false},
		{"401", 401, `Unauthorized`, driver.KindPermissionDenied, driver.KindPermissionDenied, false, false},
		{"403 block", 403, `{"error":{"type":"cluster_block_exception","reason":"index [d] blocked by: [FORBIDDEN/8/index write (api)];"},"status":403}`, driver.KindInternal, driver.KindInternal, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(r *searchtest.Request) (int, string) {
				if r.Method == http.MethodHead {
					return 200, ""
				}
				return tc.status, tc.body
			})
			s := storeOf(t, f, nil)
			res, err := s.Write(context.Background(), []driver.Write{putOf(addrOf("d", "1"), `{}`, driver.Condition{})}, driver.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantKind(t, "write", res[0].Err, tc.write)
			if tc.unknown && !strings.Contains(res[0].Err.Error(), "outcome is unknown") {
				t.Fatalf("write error %v does not say the outcome is unknown", res[0].Err)
			}
			_, rerr := s.Read(context.Background(), []driver.Address{addrOf("d", "1")})
			wantKind(t, "read", rerr, tc.read)
		})
	}
}

func TestFakeConnectionRefusedIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	s, err := NewFromURLs([]string{url}, &Options{SkipDatasetCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	res, err := s.Write(context.Background(), []driver.Write{putOf(addrOf("d", "1"), `{}`, driver.Condition{})}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "write", res[0].Err, driver.KindUnavailable)
	_, err = s.Read(context.Background(), []driver.Address{addrOf("d", "1")})
	wantKind(t, "read", err, driver.KindUnavailable)

	checked, err := NewFromURLs([]string{url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer checked.Close(context.Background())
	res, _ = checked.Write(context.Background(), []driver.Write{putOf(addrOf("d", "1"), `{}`, driver.Condition{})}, driver.WriteOptions{})
	wantKind(t, "write behind a failed dataset check", res[0].Err, driver.KindUnavailable)
}

// A write that Options.Timeout or its caller's context ends while it is in flight has an
// unknown outcome; a read so ended is retryable (timeout) or canceled; a write whose caller
// had gone before it was sent is canceled and never sent.
func TestFakeTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		switch {
		case r.Method == http.MethodHead:
			return 200, ""
		case r.Path == "/_bulk" && strings.Contains(r.Body, `"warm"`):
			return 200, bulkAnswer(`{"index":{"result":"created","status":201,"_seq_no":0,"_primary_term":1}}`)
		case r.Path == "/_bulk" && strings.Contains(r.Body, `"inflight"`):
			arrived <- struct{}{}
		}
		<-release
		return 200, "{}"
	})
	defer close(release)
	// One transport for both stores: the unbounded store's write leaves an idle connection,
	// so the bounded store's write is sent on it and its timeout cannot end a dial instead
	// (which would prove nothing was sent).
	tp, err := search.NewClient(search.Options{URLs: []string{f.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close(context.Background())
	newStore := func(o *Options) *Store {
		s, err := New(tp, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	free := newStore(&Options{SkipDatasetCheck: true})
	if res, err := free.Write(context.Background(), []driver.Write{putOf(addrOf("d", "warm"), `{}`, driver.Condition{})}, driver.WriteOptions{}); err != nil || res[0].Err != nil {
		t.Fatalf("warming write: %+v, %v", res, err)
	}
	s := newStore(&Options{SkipDatasetCheck: true, Timeout: 50 * time.Millisecond})
	res, err := s.Write(context.Background(), []driver.Write{putOf(addrOf("d", "1"), `{}`, driver.Condition{})}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "timed-out write", res[0].Err, driver.KindOutcomeUnknown)
	if !errors.Is(res[0].Err, errRequestTimeout) || !strings.Contains(res[0].Err.Error(), "outcome is unknown") {
		t.Fatalf("timed-out write: %v", res[0].Err)
	}
	_, err = s.Read(context.Background(), []driver.Address{addrOf("d", "1")})
	wantKind(t, "timed-out read", err, driver.KindUnavailable)

	// The caller leaves once the write reached the server.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	res, err = free.Write(ctx, []driver.Write{putOf(addrOf("d", "inflight"), `{}`, driver.Condition{})}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "write whose caller left while it was in flight", res[0].Err, driver.KindOutcomeUnknown)
	if !errors.Is(res[0].Err, context.Canceled) || !strings.Contains(res[0].Err.Error(), "outcome is unknown") {
		t.Fatalf("write whose caller left while it was in flight: %v", res[0].Err)
	}

	// A caller gone before anything was sent: canceled, and nothing reaches the server.
	_, err = free.Read(ctx, []driver.Address{addrOf("d", "1")})
	wantKind(t, "read whose caller had gone", err, driver.KindCanceled)
	res, err = free.Write(ctx, []driver.Write{putOf(addrOf("d", "gone"), `{}`, driver.Condition{})}, driver.WriteOptions{})
	if err == nil {
		err = res[0].Err
	}
	wantKind(t, "write whose caller had gone", err, driver.KindCanceled)
	// perform itself checks (the caller may leave after Write began, during a dataset check).
	_, derr := free.perform(ctx, func() esapi.Request {
		return esapi.BulkRequest{Body: strings.NewReader(`{"index":{"_index":"d","_id":"gone"}}` + "\n{}\n")}
	}, mutating, "_bulk")
	if derr == nil {
		t.Fatal("a _bulk whose caller had gone was performed")
	}
	wantKind(t, "_bulk whose caller had gone", derr, driver.KindCanceled)
	for _, r := range f.Requests() {
		if r.Path == "/_bulk" && strings.Contains(r.Body, `"gone"`) {
			t.Fatal("a write whose caller had gone was sent")
		}
	}
}

func TestFakeMalformedRevisionAndAbsentDelete(t *testing.T) {
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		if r.Path == "/_mget" {
			return 200, `{"docs":[{"found":true,"_seq_no":1,"_primary_term":1,"_source":{}},{"found":false}]}`
		}
		return 200, "{}"
	})
	s := storeOf(t, f, nil)
	res, err := s.Write(context.Background(), []driver.Write{
		putOf(addrOf("d", "1"), `{}`, driver.Condition{Kind: driver.IfRevision, Revision: []byte("junk")}),
		{Kind: driver.Delete, Addr: addrOf("d", "2"), Cond: driver.Condition{Kind: driver.IfAbsent}},
		{Kind: driver.Delete, Addr: addrOf("d", "3"), Cond: driver.Condition{Kind: driver.IfAbsent}},
	}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "malformed revision", res[0].Err, driver.KindInvalid)
	wantKind(t, "if-absent delete of an existing record", res[1].Err, driver.KindAlreadyExists)
	if res[2].Err != nil || res[2].Outcome != driver.Absent {
		t.Fatalf("if-absent delete of a missing record: %+v", res[2])
	}
	for _, r := range f.Requests() {
		if r.Path == "/_bulk" || r.Method == http.MethodHead {
			t.Fatalf("nothing to write, yet %s %s was sent", r.Method, r.Path)
		}
	}
}

func TestFakeClosed(t *testing.T) {
	f := newFake(t, nil)
	s := storeOf(t, f, nil)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(context.Background(), []driver.Address{addrOf("d", "1")}); err == nil {
		t.Fatal("read after Close succeeded")
	}
	if _, err := s.Write(context.Background(), nil, driver.WriteOptions{}); err == nil {
		t.Fatal("write after Close succeeded")
	}
}
