package sink

import (
	"strconv"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// fakeCluster is the shared fake node (internal/search/searchtest): the requests the sink and
// its fence send, _bulk with external versions through aliases, real-time _mget. Unit tests use
// it to check what the sink sends and counts without a server; the behaviour it imitates is
// pinned against the real engines by the *_server_test.go tests.
type fakeCluster struct {
	*searchtest.Cluster
}

func newFakeCluster(t testing.TB) *fakeCluster {
	return &fakeCluster{Cluster: searchtest.New(t, nil)}
}

// failWhole answers the call-th request (from 1) to endpoint ("_bulk", "_mget", ...) as a
// whole: an HTTP status with an error of type "injected", -1 for a lost connection, 0 to let
// it through. nil removes the fault.
func (f *fakeCluster) failWhole(endpoint string, fn func(call int) int) {
	if fn == nil {
		f.Intercept(nil)
		return
	}
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		if r.Endpoint != endpoint {
			return nil
		}
		switch st := fn(r.Call); {
		case st < 0:
			return searchtest.Drop()
		case st > 0:
			return searchtest.ErrorAnswer(st, "injected")
		}
		return nil
	})
}

// requestLines is "METHOD /path" of every request, in order.
func (f *fakeCluster) requestLines() []string {
	var out []string
	for _, r := range f.Requests() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// bodies is the body size of every _bulk request, in order.
func (f *fakeCluster) bodies() []int {
	var out []int
	for _, r := range f.Requests() {
		if r.Endpoint == "_bulk" {
			out = append(out, len(r.Body))
		}
	}
	return out
}

// fakeSink is a sink writing to a fake cluster.
func fakeSink(t *testing.T, f *fakeCluster, cfg Config, st statestore.Store, o Options) *Sink {
	t.Helper()
	if cfg.ID == "" {
		cfg.ID = "fake"
	}
	if cfg.URL == "" && len(cfg.URLs) == 0 {
		cfg.URL = f.URL
	}
	if cfg.Index == "" {
		cfg.Index = "cdc-{table}"
	}
	if cfg.Auth.Type == "" {
		cfg.Auth.Type = AuthNone
	}
	if st == nil {
		st = statestore.NewMemory()
	}
	if o.Engine == nil {
		e := Elasticsearch
		o.Engine = &e
	}
	if o.ItemRetryBackoff == 0 {
		o.ItemRetryBackoff = time.Millisecond
	}
	k, err := New(cfg, "p", st, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// fakeEvents is n inserts of the orders table from version from on.
func fakeEvents(sch *cdc.TableSchema, from, n int64) []cdc.Event {
	var out []cdc.Event
	for i := from; i < from+n; i++ {
		out = append(out, ev(cdc.Insert, sch, i, nil, row(i, "n"+strconv.FormatInt(i, 10), i)))
	}
	return out
}
