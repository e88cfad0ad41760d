package searchstore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/store/driver"
)

// TestFakeFailoverPastStoppedNodes: with stopped nodes listed first and last, every read,
// write and dataset check still succeeds through the live node: a request that cannot
// connect (nothing was sent) goes to the next URL instead of failing.
func TestFakeFailoverPastStoppedNodes(t *testing.T) {
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		switch r.Endpoint {
		case "_bulk":
			return 200, `{"errors":false,"items":[{"create":{"_index":"d","_id":"x","_seq_no":1,"_primary_term":1,"result":"created","status":201}}]}`
		case "_mget":
			return 200, `{"docs":[{"_index":"d","_id":"x","_seq_no":1,"_primary_term":1,"found":true,"_source":{"n":1}}]}`
		}
		return 200, "" // HEAD /d: the dataset exists
	})
	s := storeAt(t, []string{estest.ClosedURL(t, "http"), f.URL, estest.ClosedURL(t, "http")}, &Options{DatasetTTL: 1}) // every write checks its dataset
	ctx := context.Background()
	for i := range 30 {
		a := addrOf("d", fmt.Sprint(i))
		res, err := s.Write(ctx, []driver.Write{putOf(a, `{"n":1}`, driver.Condition{Kind: driver.IfAbsent})}, driver.WriteOptions{})
		if err != nil || res[0].Err != nil || res[0].Outcome != driver.Created {
			t.Fatalf("write %d: %+v, %v", i, res, err)
		}
		rr, err := s.Read(ctx, []driver.Address{a})
		if err != nil || rr[0].Err != nil || !rr[0].Found {
			t.Fatalf("read %d: %+v, %v", i, rr, err)
		}
	}
	if n := f.Count("_bulk"); n != 30 {
		t.Fatalf("the live node got %d _bulk requests, want 30", n)
	}
	if n := f.Count("index"); n < 2 {
		t.Fatalf("the live node got %d dataset checks", n)
	}
}

// TestFakeEveryNodeStopped: when no node can be reached, the failure is KindUnavailable
// ("cannot connect; nothing was sent"), for writes too: nothing reached a server.
func TestFakeEveryNodeStopped(t *testing.T) {
	s := storeAt(t, []string{estest.ClosedURL(t, "http"), estest.ClosedURL(t, "http")}, &Options{SkipDatasetCheck: true})
	res, err := s.Write(context.Background(), []driver.Write{putOf(addrOf("d", "1"), `{}`, driver.Condition{})}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "write", res[0].Err, driver.KindUnavailable)
	if !strings.Contains(res[0].Err.Error(), "nothing was sent") {
		t.Fatalf("write: %v", res[0].Err)
	}
}

// resettingNode is an HTTP node that reads each request whole and then drops the connection
// without answering: a node that died with the request in flight. It counts the requests.
func resettingNode(t *testing.T) (url string, requests *atomic.Int64) {
	t.Helper()
	requests = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, requests
}

// TestFakeReadResentAfterLostConnection: a read whose node drops the connection after taking
// the request is sent once more, to the next node, and succeeds with the same body; a write
// in the same position is not sent again (it may have been applied): its outcome is unknown.
func TestFakeReadResentAfterLostConnection(t *testing.T) {
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		switch r.Endpoint {
		case "_bulk":
			return 200, `{"errors":false,"items":[{"index":{"_index":"d","_id":"x","_seq_no":1,"_primary_term":1,"result":"created","status":201}}]}`
		case "_mget":
			if !strings.Contains(r.Body, `"_id":"1"`) {
				return 400, `{"error":{"type":"parse_exception"}}`
			}
			return 200, `{"docs":[{"_index":"d","_id":"1","_seq_no":1,"_primary_term":1,"found":true,"_source":{"n":1}}]}`
		}
		return 200, ""
	})
	dying, hits := resettingNode(t)
	ctx := context.Background()

	s := storeAt(t, []string{dying, f.URL}, &Options{SkipDatasetCheck: true})
	rr, err := s.Read(ctx, []driver.Address{addrOf("d", "1")})
	if err != nil || rr[0].Err != nil || !rr[0].Found {
		t.Fatalf("read: %+v, %v", rr, err)
	}
	if hits.Load() != 1 || f.Count("_mget") != 1 {
		t.Fatalf("the dying node got %d requests and the live one %d _mget, want 1 and 1", hits.Load(), f.Count("_mget"))
	}

	w := storeAt(t, []string{dying, f.URL}, &Options{SkipDatasetCheck: true})
	res, err := w.Write(ctx, []driver.Write{putOf(addrOf("d", "x"), `{"n":1}`, driver.Condition{})}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "write whose connection was lost", res[0].Err, driver.KindOutcomeUnknown)
	if n := f.Count("_bulk"); n != 0 {
		t.Fatalf("a write whose first attempt reached a node was sent again (%d _bulk on the live node)", n)
	}
}
