package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// TestClusterHealth: nothing is asked before the sink holds an index; then one
// _cluster/health read names the concrete indices it claimed, level=indices, and the colors
// come back per index, the worst as Status; an index the answer lacks is red; a 408 is still
// an answer; a failed status is an error.
func TestClusterHealth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{}, nil, Options{})
	h, err := k.ClusterHealth(ctx)
	if err != nil || h.Status != "" || !h.ReadAt.IsZero() || len(f.Requests()) != 0 {
		t.Fatalf("before any claim: %+v, %v, %d requests", h, err, len(f.Requests()))
	}
	sch := ordersSchema("orders")
	if _, err := k.Write(ctx, fakeEvents(sch, 1, 2)); err != nil { // claims the index
		t.Fatal(err)
	}
	var asked []*searchtest.Request
	answer := func(st int, body string) {
		f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
			if !strings.HasPrefix(r.Path, "/_cluster/health") {
				return nil
			}
			asked = append(asked, r)
			return searchtest.Status(st, body)
		})
	}
	k.mu.Lock()
	var idx string
	for name := range k.claims {
		idx = name
	}
	k.mu.Unlock()
	if idx == "" {
		t.Fatal("the write claimed no index")
	}

	answer(200, `{"status":"yellow","indices":{"`+idx+`":{"status":"yellow"}}}`)
	if h, err = k.ClusterHealth(ctx); err != nil {
		t.Fatal(err)
	}
	if h.Status != "yellow" || h.Indices[idx] != "yellow" || h.ReadAt.IsZero() || h.Err != nil {
		t.Errorf("yellow answer: %+v", h)
	}
	if len(asked) != 1 || asked[0].Path != "/_cluster/health/"+idx || !strings.Contains(asked[0].Query, "level=indices") {
		t.Errorf("requests: %+v", asked)
	}

	answer(408, `{"status":"red","timed_out":true,"indices":{}}`)
	if h, err = k.ClusterHealth(ctx); err != nil || h.Status != "red" || h.Indices[idx] != "red" {
		t.Errorf("408 without the index: %+v, %v", h, err)
	}
	answer(200, `{"status":"green","indices":{"`+idx+`":{"status":"green"}}}`)
	if h, err = k.ClusterHealth(ctx); err != nil || h.Status != "green" {
		t.Errorf("green: %+v, %v", h, err)
	}
	answer(503, `{"error":{"type":"master_not_discovered_exception","reason":"no master"},"status":503}`)
	if _, err = k.ClusterHealth(ctx); err == nil {
		t.Error("503: no error")
	}
}

func TestWorseHealth(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"", "green", "green"}, {"green", "yellow", "yellow"}, {"red", "yellow", "red"}, {"yellow", "purple", "purple"}, {"green", "", "green"},
	} {
		if got := worseHealth(c.a, c.b); got != c.want {
			t.Errorf("worseHealth(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
