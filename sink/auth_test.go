package sink

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// A dead first node does not stall the sink: the claim, the mapping and the _bulk requests
// go to the next node, and nothing marks the sink stale (no transport error reached it).
func TestWriteFailsOverPastADeadFirstURL(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{URLs: []string{estest.ClosedURL(t, "http"), f.URL}}, nil, Options{})
	sch := ordersSchema("orders")
	for round := range 3 {
		dead, err := k.Write(ctx, fakeEvents(sch, int64(1+10*round), 10))
		if err != nil || len(dead) != 0 {
			t.Fatalf("round %d with the first node down: %v %+v", round, err, dead)
		}
		if k.stale.Load() {
			t.Fatalf("round %d: the sink went stale though every request reached a node", round)
		}
	}
	if n := len(f.Index(indexOf(t, k, "orders")).Docs); n != 30 {
		t.Fatalf("%d documents, want 30", n)
	}
}

// forbid answers every request to endpoint with a 403 security_exception whose reason is
// reason (the real engines' wording).
func forbid(f *fakeCluster, endpoint, reason string) {
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		if r.Endpoint != endpoint {
			return nil
		}
		return searchtest.Status(403, `{"error":{"root_cause":[{"type":"security_exception","reason":"`+reason+`"}],"type":"security_exception","reason":"`+reason+`"},"status":403}`)
	})
}

// 401 and 403 anywhere in the sink are permanent, never backpressure, and say what to fix:
// the credentials, or the action, indices and privileges the cluster names.
func TestAuthRefusalsArePermanentAndNamed(t *testing.T) {
	ctx := context.Background()
	sch := ordersSchema("orders")
	check := func(name string, err error, want ...string) {
		t.Helper()
		var ae *search.AuthError
		var bp *cdc.BackpressureError
		if err == nil || !cdc.IsPermanent(err) || errors.As(err, &bp) || !errors.As(err, &ae) {
			t.Fatalf("%s: %v, want a permanent auth error", name, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q lacks %q", name, err, w)
			}
		}
	}

	// _bulk refused as a whole (OpenSearch checks it as a cluster action).
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{}, nil, Options{})
	forbid(f, "_bulk", "no permissions for [indices:data/write/bulk] and User [name=tributary, backend_roles=[], requestedTenant=null]")
	_, err := k.Write(ctx, fakeEvents(sch, 1, 3))
	check("_bulk 403", err, "_bulk: permission denied: action indices:data/write/bulk for user tributary")

	// One _bulk item refused (Elasticsearch checks the index privilege per shard request).
	f = newFakeCluster(t)
	k = fakeSink(t, f, Config{}, nil, Options{})
	if _, err := k.Write(ctx, fakeEvents(sch, 1, 1)); err != nil { // claims the index
		t.Fatal(err)
	}
	reason := "action [indices:data/write/bulk[s]] is unauthorized for user [tributary] with effective roles [mirror] on indices [cdc-orders-g1], this action is granted by the index privileges [create_doc,create,index,write,all]"
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		if r.Endpoint != "_bulk" {
			return nil
		}
		return searchtest.Status(200, `{"errors":true,"items":[{"index":{"_index":"cdc-orders-g1","_id":"2","status":403,"error":{"type":"security_exception","reason":"`+reason+`"}}}]}`)
	})
	dead, err := k.Write(ctx, fakeEvents(sch, 2, 1))
	check("_bulk item 403", err, "permission denied: action indices:data/write/bulk[s] on indices cdc-orders-g1 for user tributary (granted by the index privileges create_doc, create, index, write, all)")
	if len(dead) != 0 {
		t.Fatalf("a refused item was dead-lettered: %+v", dead)
	}

	// A fence request (index creation) refused: esfence's ServerError wraps the AuthError.
	f = newFakeCluster(t)
	k = fakeSink(t, f, Config{}, nil, Options{})
	forbid(f, "index", "action [indices:admin/create] is unauthorized for user [tributary] with effective roles [mirror] on indices [cdc-orders-g1], this action is granted by the index privileges [create_index,manage,all]")
	_, err = k.Write(ctx, fakeEvents(sch, 1, 1))
	check("index creation 403", err, "action indices:admin/create", "create_index")
	var se *esfence.ServerError
	if !errors.As(err, &se) || se.Auth == nil {
		t.Fatalf("index creation 403: no *esfence.ServerError with Auth in %v", err)
	}

	// The engine check refused the credentials.
	f = newFakeCluster(t)
	k = fakeSink(t, f, Config{Auth: Auth{Type: AuthBasic, Username: "u", Password: "pw-secret-3"}}, nil, Options{})
	k.engineKnown = false
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		return searchtest.Status(401, `{"error":{"type":"security_exception","reason":"unable to authenticate user [u] for REST request [/_nodes/_local]"},"status":401}`)
	})
	err = k.detectEngine(ctx)
	check("engine check 401", err, "reading the cluster's version: authentication failed: the cluster refused the credentials (basic)")
	if strings.Contains(err.Error(), "pw-secret-3") || strings.Contains(err.Error(), "REST request") {
		t.Fatalf("401 quotes too much: %v", err)
	}
}
