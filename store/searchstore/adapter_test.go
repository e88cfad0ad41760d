package searchstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/searchstore"
)

func adapterAt(t *testing.T, url string, opts *searchstore.Options) *searchstore.Store {
	t.Helper()
	s, err := searchstore.NewFromURLs([]string{url}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// service wraps an adapter in the standard store.Service, as applications use it.
func service(t *testing.T, a driver.Store) *store.Service {
	t.Helper()
	svc, err := store.New(map[string]store.Adapter{"search": a}, &store.Options{Coalesce: store.CoalesceOptions{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return svc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func addr(dataset string, k driver.Key) driver.Address {
	return driver.Address{Store: "search", Namespace: "ns", Dataset: dataset, Key: k}
}

func put(a driver.Address, doc string) driver.Write {
	return driver.Write{Kind: driver.Put, Addr: a, Doc: driver.Document{JSON: []byte(doc)}}
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

func wantOutcome(t *testing.T, what string, r driver.WriteResult, want driver.Outcome) {
	t.Helper()
	if r.Err != nil || r.Outcome != want {
		t.Fatalf("%s: outcome %v, error %v; want %v", what, r.Outcome, r.Err, want)
	}
}

// The reserved _id forms are what the server stores, and a string key that imitates one is
// refused before anything is written.
func TestReservedKeys(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		ctx := ctxT(t)
		index := srv.createIndex(t, "reserved")
		a := adapterAt(t, srv.URL, nil)
		res, err := a.Write(ctx, []driver.Write{
			put(addr(index, driver.NewInt64Key(-7)), `{"k":"int"}`),
			put(addr(index, driver.NewBytesKey([]byte{0xff, 0x00})), `{"k":"bytes"}`),
			put(addr(index, driver.NewObjectIDKey([12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})), `{"k":"oid"}`),
		}, driver.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range []string{"~~i:-7", "~~b:_wA", "~~o:0102030405060708090a0b0c"} {
			wantOutcome(t, id, res[i], driver.Created)
			if _, found := srv.getSource(t, index, id); !found {
				t.Fatalf("no document with _id %q on the server", id)
			}
		}

		svc := service(t, a)
		_, err = svc.Do(ctx, []store.Op{store.Put(sa(addr(index, driver.NewStringKey("~~i:-7"))), store.Document{JSON: []byte(`{"k":"string"}`)})}, store.WaitApplied)
		var re *store.RequestError
		if !errors.As(err, &re) || !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("put with a string key in the reserved form: %v, want a *RequestError matching ErrInvalid", err)
		}
		if src, _ := srv.getSource(t, index, "~~i:-7"); src != `{"k":"int"}` {
			t.Fatalf("the int64 key's document became %s", src)
		}
	})
}

// A write to a missing dataset fails with KindNotFound and does not create it, on both
// engines, although both would auto-create it for a plain _bulk.
func TestMissingDatasetIsNotCreated(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		ctx := ctxT(t)
		missing := uniqueName(t, "missing")
		t.Cleanup(func() { srv.DeleteIndices(t, missing) }) // only if the test failed
		a := adapterAt(t, srv.URL, nil)
		k := driver.NewStringKey("k")
		res, err := a.Write(ctx, []driver.Write{
			put(addr(missing, k), `{"v":1}`),
			{Kind: driver.Put, Addr: addr(missing, driver.NewInt64Key(1)), Doc: driver.Document{JSON: []byte(`{}`)}, Cond: driver.Condition{Kind: driver.IfAbsent}},
			{Kind: driver.Delete, Addr: addr(missing, driver.NewInt64Key(2))},
		}, driver.WriteOptions{Visible: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			wantKind(t, fmt.Sprintf("write %d to a missing dataset", i), r.Err, driver.KindNotFound)
		}
		rr, err := a.Read(ctx, []driver.Address{addr(missing, k)})
		if err != nil {
			t.Fatal(err)
		}
		wantKind(t, "read from a missing dataset", rr[0].Err, driver.KindNotFound)
		if srv.IndexExists(t, missing) {
			t.Fatalf("the adapter created the missing dataset %s", missing)
		}

		// A dataset deleted after the adapter saw it: once the server reports it missing,
		// the next write checks again instead of recreating it.
		index := srv.createIndex(t, "deleted")
		wantOutcome(t, "put", mustWrite(t, a, put(addr(index, k), `{"v":1}`)), driver.Created)
		srv.DeleteIndices(t, index)
		rr, err = a.Read(ctx, []driver.Address{addr(index, k)})
		if err != nil {
			t.Fatal(err)
		}
		wantKind(t, "read after the index was deleted", rr[0].Err, driver.KindNotFound)
		wantKind(t, "write after the index was deleted", mustWrite(t, a, put(addr(index, k), `{"v":2}`)).Err, driver.KindNotFound)
		if srv.IndexExists(t, index) {
			t.Fatalf("the adapter recreated the deleted dataset %s", index)
		}
	})
}

func mustWrite(t *testing.T, a driver.Store, w driver.Write) driver.WriteResult {
	t.Helper()
	res, err := a.Write(ctxT(t), []driver.Write{w}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// The dataset may be an alias; _source comes back byte for byte.
func TestAliasAndRawSource(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		ctx := ctxT(t)
		index := srv.createIndex(t, "aliased")
		alias := index + "-alias"
		srv.OK(t, esapi.IndicesPutAliasRequest{Index: []string{index}, Name: alias})
		a := adapterAt(t, srv.URL, nil)
		const odd = `{ "spaced" :  [1, 2.50, "x"] , "e":"\u00e9", "big": 12345678901234567890 }`
		k := addr(alias, driver.NewStringKey("raw"))
		wantOutcome(t, "put through the alias", mustWrite(t, a, put(k, odd)), driver.Created)
		if src, _ := srv.getSource(t, index, "raw"); src != odd {
			t.Fatalf("stored _source %s, want %s", src, odd)
		}
		rr, err := a.Read(ctx, []driver.Address{k})
		if err != nil || rr[0].Err != nil || string(rr[0].Doc.JSON) != odd {
			t.Fatalf("read through the alias: %s, %v, %v", rr[0].Doc.JSON, err, rr[0].Err)
		}
		multi := addr(alias, driver.NewStringKey("multi"))
		wantOutcome(t, "put with line breaks", mustWrite(t, a, put(multi, "{\n  \"a\": 1,\n  \"b\": \"x\"\n}")), driver.Created)
		rr, _ = a.Read(ctx, []driver.Address{multi})
		if got := string(rr[0].Doc.JSON); got != `{   "a": 1,   "b": "x" }` {
			t.Fatalf("a document with line breaks came back as %q", got)
		}
	})
}

// A document the dataset's mapping refuses is KindInvalid, and the error does not quote it.
func TestMappingRefusalIsInvalid(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		index := uniqueName(t, "mapped")
		srv.OK(t, esapi.IndicesCreateRequest{Index: index, Body: estest.JSONBody(t, map[string]any{
			"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0},
			"mappings": map[string]any{"properties": map[string]any{"n": map[string]any{"type": "long"}}},
		})})
		t.Cleanup(func() { srv.DeleteIndices(t, index) })
		a := adapterAt(t, srv.URL, nil)
		r := mustWrite(t, a, put(addr(index, driver.NewStringKey("bad")), `{"n":"SECRET-not-a-number"}`))
		wantKind(t, "unmappable document", r.Err, driver.KindInvalid)
		if strings.Contains(r.Err.Error(), "SECRET") {
			t.Fatalf("the error quotes the document: %v", r.Err)
		}
		var be *searchstore.BackendError
		if !errors.As(r.Err, &be) || be.Status != http.StatusBadRequest || be.Type == "" {
			t.Fatalf("no *BackendError with the server's 400 and type: %v", r.Err)
		}
		t.Logf("server error: %v", be)
	})
}

// A per-item 429 from the real server (an index with a read-only-allow-delete block answers
// writes with TOO_MANY_REQUESTS/12) fails that item only, as retryable and not applied.
func TestPerItemRejectionIsUnavailable(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		open, blocked := srv.createIndex(t, "open"), srv.createIndex(t, "blocked")
		setBlock := func(v any) {
			srv.OK(t, esapi.IndicesPutSettingsRequest{Index: []string{blocked}, Body: estest.JSONBody(t, map[string]any{"index.blocks.read_only_allow_delete": v})})
		}
		setBlock(true)
		t.Cleanup(func() { setBlock(nil) }) // before the index is deleted
		a := adapterAt(t, srv.URL, nil)
		res, err := a.Write(ctxT(t), []driver.Write{
			put(addr(open, driver.NewStringKey("a")), `{"v":1}`),
			put(addr(blocked, driver.NewStringKey("b")), `{"v":1}`),
		}, driver.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, "put beside the rejected one", res[0], driver.Created)
		wantKind(t, "put to a blocked index", res[1].Err, driver.KindUnavailable)
		var be *searchstore.BackendError
		if !errors.As(res[1].Err, &be) || be.Status != http.StatusTooManyRequests {
			t.Fatalf("rejection: %v, want the server's 429", res[1].Err)
		}
		if _, found := srv.getSource(t, blocked, "b"); found {
			t.Fatal("the rejected put was applied")
		}
	})
}

// proxied returns an adapter that talks to srv through a fault-injecting HTTP proxy.
func proxied(t *testing.T, srv *server) (*searchstore.Store, *faultproxy.HTTPProxy) {
	t.Helper()
	p, err := faultproxy.NewHTTP(srv.URL, faultproxy.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return adapterAt(t, p.URL(), nil), p
}

func bulkRequests(p *faultproxy.HTTPProxy) int { return requestsTo(p, "/_bulk") }

// requestsTo counts the requests to path the proxy recorded.
func requestsTo(p *faultproxy.HTTPProxy, path string) int {
	n := 0
	for _, r := range p.Records() {
		if r.Path == path {
			n++
		}
	}
	return n
}

// A per-item es_rejected_execution_exception (the write thread pool's queue was full) is
// retryable: the store retries it and the record is written once.
func TestInjectedItemRejectionIsRetried(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		index := srv.createIndex(t, "rejected")
		a, p := proxied(t, srv)
		rejected := `{"took":0,"errors":true,"items":[{"index":{"_index":"` + index + `","_id":"k","status":429,` +
			`"error":{"type":"es_rejected_execution_exception","reason":"rejected execution of coordinating operation"}}}]}`
		if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_bulk", Times: 1, Action: faultproxy.Respond,
			Response: faultproxy.Response{Status: http.StatusOK, Body: []byte(rejected), Header: http.Header{"Content-Type": {"application/json"}}}}); err != nil {
			t.Fatal(err)
		}
		k := addr(index, driver.NewStringKey("k"))
		wantKind(t, "rejected item", mustWrite(t, a, put(k, `{"v":1}`)).Err, driver.KindUnavailable)
		if _, found := srv.getSource(t, index, "k"); found {
			t.Fatal("the rejected item was applied")
		}

		p.ClearRules()
		if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_bulk", Times: 1, Action: faultproxy.Respond,
			Response: faultproxy.Response{Status: http.StatusOK, Body: []byte(rejected), Header: http.Header{"Content-Type": {"application/json"}}}}); err != nil {
			t.Fatal(err)
		}
		p.ResetRecords()
		res, err := service(t, a).Do(ctxT(t), []store.Op{store.Put(sa(k), store.Document{JSON: []byte(`{"v":2}`)})}, store.WaitApplied)
		if err != nil || res[0].Err != nil || res[0].Outcome != store.Created {
			t.Fatalf("put through the store after one rejection: %+v, %v", res, err)
		}
		if n := bulkRequests(p); n != 2 {
			t.Fatalf("%d _bulk requests, want 2 (rejected, then applied)", n)
		}
	})
}

// Whole-request 429 and 503 mean nothing was applied: retryable, and the store's retry
// applies the write once.
func TestWholeRequestRefusalIsUnavailable(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		index := srv.createIndex(t, "refused")
		a, p := proxied(t, srv)
		for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			p.ClearRules()
			p.ResetRecords()
			if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_bulk", Times: 1, Action: faultproxy.Respond,
				Response: faultproxy.Response{Status: status}}); err != nil {
				t.Fatal(err)
			}
			id := "k" + http.StatusText(status)[:3]
			k := addr(index, driver.NewStringKey(id))
			wantKind(t, http.StatusText(status), mustWrite(t, a, put(k, `{"v":1}`)).Err, driver.KindUnavailable)
			if _, found := srv.getSource(t, index, id); found {
				t.Fatalf("%d: the refused put was applied", status)
			}

			if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_bulk", Times: 1, Action: faultproxy.Respond,
				Response: faultproxy.Response{Status: status}}); err != nil {
				t.Fatal(err)
			}
			p.ResetRecords()
			res, err := service(t, a).Do(ctxT(t), []store.Op{store.Put(sa(k), store.Document{JSON: []byte(`{"v":2}`)})}, store.WaitApplied)
			if err != nil || res[0].Err != nil || res[0].Outcome != store.Created {
				t.Fatalf("%d: put through the store after one refusal: %+v, %v", status, res, err)
			}
			if n := bulkRequests(p); n != 2 {
				t.Fatalf("%d: %d _bulk requests, want 2", status, n)
			}
		}
	})
}

// A _bulk the server applied but whose answer was lost has an unknown outcome:
// KindOutcomeUnknown (retryable by its caller's choice), which the Service reports and does
// not resend. A lost _mget answer is KindUnavailable, since a read changes nothing.
func TestDroppedAnswer(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		index := srv.createIndex(t, "dropped")
		a, p := proxied(t, srv)
		k := addr(index, driver.NewStringKey("k"))
		if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_bulk", Times: 1, Action: faultproxy.ForwardThenDrop}); err != nil {
			t.Fatal(err)
		}
		r := mustWrite(t, a, driver.Write{Kind: driver.Put, Addr: k, Doc: driver.Document{JSON: []byte(`{"v":1}`)}, Cond: driver.Condition{Kind: driver.IfAbsent}})
		wantKind(t, "put whose answer was lost", r.Err, driver.KindOutcomeUnknown)
		if !strings.Contains(r.Err.Error(), "outcome is unknown") {
			t.Fatalf("error %v does not say the outcome is unknown", r.Err)
		}
		if src, found := srv.getSource(t, index, "k"); !found || src != `{"v":1}` {
			t.Fatalf("the server did not apply the put (found %v, %s): the test proves nothing", found, src)
		}
		// A 5xx other than 503 (here after the server applied the _bulk) says as little.
		for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout} {
			if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_bulk", Times: 1, Action: faultproxy.ForwardThenRespond,
				Response: faultproxy.Response{Status: status}}); err != nil {
				t.Fatal(err)
			}
			id := "s" + strconv.Itoa(status)
			r := mustWrite(t, a, driver.Write{Kind: driver.Put, Addr: addr(index, driver.NewStringKey(id)), Doc: driver.Document{JSON: []byte(`{"v":1}`)}})
			wantKind(t, http.StatusText(status)+" after the put was applied", r.Err, driver.KindOutcomeUnknown)
			if _, found := srv.getSource(t, index, id); !found {
				t.Fatalf("%d: the server did not apply the put: the test proves nothing", status)
			}
		}

		// Through the store: reported, not retried (a retry of this create would answer
		// AlreadyExists for the caller's own write).
		if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_bulk", Times: 1, Action: faultproxy.ForwardThenDrop}); err != nil {
			t.Fatal(err)
		}
		p.ResetRecords()
		svc := service(t, a)
		k2 := addr(index, driver.NewStringKey("k2"))
		res, err := svc.Do(ctxT(t), []store.Op{store.Put(sa(k2), store.Document{JSON: []byte(`{"v":1}`)}).WithPrecondition(store.IfAbsent())}, store.WaitApplied)
		if err != nil || !errors.Is(res[0].Err, store.ErrOutcomeUnknown) || !store.KindOf(res[0].Err).Retryable() {
			t.Fatalf("put through the store: %+v, %v; want ErrOutcomeUnknown", res, err)
		}
		if n := bulkRequests(p); n != 1 {
			t.Fatalf("%d _bulk requests, want 1: an outcome-unknown write must not be retried", n)
		}

		// A read whose answer was lost changed nothing: it is sent once more (to the next node
		// when there are several), and only a second loss fails it, KindUnavailable.
		p.ResetRecords()
		if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_mget", Times: 1, Action: faultproxy.ForwardThenDrop}); err != nil {
			t.Fatal(err)
		}
		rr, err := a.Read(ctxT(t), []driver.Address{k})
		if err != nil || rr[0].Err != nil || !rr[0].Found {
			t.Fatalf("read whose first answer was lost: %+v, %v; want it sent again and found", rr, err)
		}
		if n := requestsTo(p, "/_mget"); n != 2 {
			t.Fatalf("%d _mget requests, want 2 (the lost one and its resend)", n)
		}
		p.ResetRecords()
		if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_mget", Times: 2, Action: faultproxy.ForwardThenDrop}); err != nil {
			t.Fatal(err)
		}
		_, err = a.Read(ctxT(t), []driver.Address{k})
		wantKind(t, "read whose answer was lost twice", err, driver.KindUnavailable)
		if n := requestsTo(p, "/_mget"); n != 2 {
			t.Fatalf("%d _mget requests, want 2: a read is sent again once, not more", n)
		}
		if _, err := p.AddRule(faultproxy.Rule{Method: http.MethodPost, PathPrefix: "/_mget", Times: 1, Action: faultproxy.ForwardThenDrop}); err != nil {
			t.Fatal(err)
		}
		res, err = svc.Do(ctxT(t), []store.Op{store.Read(sa(k))}, store.WaitApplied)
		if err != nil || res[0].Err != nil || res[0].Outcome != store.Found {
			t.Fatalf("read through the store after a lost answer: %+v, %v", res, err)
		}
	})
}

// A dataset name that is valid on the server but not as a bare URL path segment ('%', '&',
// non-ASCII) is checked, written and read like any other.
func TestDatasetNameNeedsEscaping(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		index := uniqueName(t, "é%&=;") // the engines accept all of these in index names
		srv.OK(t, esapi.IndicesCreateRequest{Index: url.PathEscape(index), Body: estest.JSONBody(t, map[string]any{
			"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0},
		})})
		t.Cleanup(func() { srv.DeleteIndices(t, url.PathEscape(index)) })
		a := adapterAt(t, srv.URL, nil)
		k := addr(index, driver.NewStringKey("k"))
		if err := a.ValidateAddress(k); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, "put", mustWrite(t, a, put(k, `{"v":1}`)), driver.Created)
		rr, err := a.Read(ctxT(t), []driver.Address{k})
		if err != nil || rr[0].Err != nil || !rr[0].Found {
			t.Fatalf("read: %+v, %v", rr, err)
		}
	})
}
