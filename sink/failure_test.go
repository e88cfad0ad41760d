package sink

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// wantFailure checks an error's class for the runner's supervision: permanent (cdc.Permanent,
// never backpressure) or backpressure (never permanent).
func wantFailure(t *testing.T, what string, err error, permanent bool) {
	t.Helper()
	var bp *cdc.BackpressureError
	switch {
	case err == nil:
		t.Fatalf("%s: no error", what)
	case permanent && (!cdc.IsPermanent(err) || errors.As(err, &bp)):
		t.Fatalf("%s: %v (permanent %v), want a permanent failure", what, err, cdc.IsPermanent(err))
	case !permanent && (cdc.IsPermanent(err) || !errors.As(err, &bp)):
		t.Fatalf("%s: %v (permanent %v), want backpressure", what, err, cdc.IsPermanent(err))
	}
}

// Every request of a Write -- the claim's (cluster state and settings, index lookup and
// creation), the mapping's, the _bulk -- fails with the class its answer deserves: refusals,
// rejected credentials and requests the cluster refuses as such are permanent; overload, 5xx,
// 408, lost connections are backpressure, and the replay succeeds once the fault is gone.
func TestSinkFailureClasses(t *testing.T) {
	type fault struct {
		name      string
		endpoint  string
		method    string // "" for any
		reply     *searchtest.Reply
		permanent bool
	}
	withRetryAfter := &searchtest.Reply{Status: 429, Body: `{"error":{"type":"es_rejected_execution_exception"},"status":429}`,
		Header: http.Header{"Retry-After": {"3"}}}
	faults := []fault{
		{"state_503", "_cluster/state", "", searchtest.ErrorAnswer(503, "master_not_discovered_exception"), false},
		{"state_429", "_cluster/state", "", searchtest.ErrorAnswer(429, "circuit_breaking_exception"), false},
		{"state_reset", "_cluster/state", "", searchtest.Drop(), false},
		{"state_401", "_cluster/state", "", searchtest.ErrorAnswer(401, "security_exception"), true},
		{"state_403", "_cluster/state", "", searchtest.ErrorAnswer(403, "security_exception"), true},
		{"settings_403", "_cluster/settings", "", searchtest.ErrorAnswer(403, "security_exception"), true}, // fencing_unenforced
		{"lookup_500", "index", http.MethodGet, searchtest.ErrorAnswer(500, "exception"), false},
		{"create_503", "index", http.MethodPut, searchtest.ErrorAnswer(503, "unavailable_shards_exception"), false},
		{"create_400", "index", http.MethodPut, searchtest.ErrorAnswer(400, "mapper_parsing_exception"), true},
		{"bulk_429", "_bulk", "", withRetryAfter, false},
		{"bulk_500", "_bulk", "", searchtest.ErrorAnswer(500, "exception"), false},
		{"bulk_502", "_bulk", "", searchtest.Status(502, "bad gateway"), false},
		{"bulk_503", "_bulk", "", searchtest.ErrorAnswer(503, "cluster_block_exception"), false},
		{"bulk_504", "_bulk", "", searchtest.Status(504, "gateway timeout"), false},
		{"bulk_408", "_bulk", "", searchtest.Status(408, ""), false},
		{"bulk_reset", "_bulk", "", searchtest.Drop(), false},
		{"bulk_401", "_bulk", "", searchtest.ErrorAnswer(401, "security_exception"), true},
		{"bulk_403", "_bulk", "", searchtest.ErrorAnswer(403, "security_exception"), true},
		{"bulk_400", "_bulk", "", searchtest.ErrorAnswer(400, "illegal_argument_exception"), true},
		{"bulk_413", "_bulk", "", searchtest.Status(413, ""), true}, // two documents: not one to dead-letter
		{"bulk_unreadable", "_bulk", "", searchtest.Status(200, `{"errors":`), false},
	}
	sch := ordersSchema("orders")
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			f := newFakeCluster(t)
			k := fakeSink(t, f, Config{}, nil, Options{})
			f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
				if r.Endpoint == fc.endpoint && (fc.method == "" || r.Method == fc.method) {
					return fc.reply
				}
				return nil
			})
			batch := fakeEvents(sch, 1, 2)
			_, err := k.Write(context.Background(), batch)
			wantFailure(t, "Write", err, fc.permanent)
			if fc.reply == withRetryAfter {
				var bp *cdc.BackpressureError
				if errors.As(err, &bp); bp.RetryAfter != 3*time.Second {
					t.Fatalf("RetryAfter %v, want the answer's 3s", bp.RetryAfter)
				}
			}
			if strings.Contains(fc.name, "create_400") && !strings.Contains(err.Error(), "mapping options") {
				t.Fatalf("a refused mapping without the hint: %v", err)
			}
			if fc.permanent {
				return
			}
			// An unreachable or failing cluster is "unavailable" (health says so at once), one
			// that asks to slow down (429) or answers garbage is not.
			var bp *cdc.BackpressureError
			errors.As(err, &bp)
			if want := !strings.Contains(fc.name, "429") && fc.name != "bulk_unreadable"; bp.Unavailable != want {
				t.Fatalf("Unavailable %v, want %v: %v", bp.Unavailable, want, err)
			}
			f.Intercept(nil)
			if dead, err := k.Write(context.Background(), batch); err != nil || len(dead) != 0 {
				t.Fatalf("the replay after the fault: %v, dead %v", err, dead)
			}
			if ix := f.Index(indexOf(t, k, "orders")); ix == nil || len(ix.Docs) != 2 {
				t.Fatalf("after the replay: %+v", ix)
			}
		})
	}
}

// A request that outlives request_timeout is backpressure, and the next Write claims again
// (the connection state is unknown).
func TestSinkTimeoutIsBackpressure(t *testing.T) {
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{RequestTimeout: Duration(50 * time.Millisecond)}, nil, Options{})
	sch := ordersSchema("orders")
	write(t, k, fakeEvents(sch, 1, 1))
	release := make(chan struct{})
	f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		if r.Endpoint == "_bulk" {
			<-release
		}
		return nil
	})
	_, err := k.Write(context.Background(), fakeEvents(sch, 2, 1))
	close(release)
	wantFailure(t, "a timed-out _bulk", err, false)
	f.Intercept(nil)
	aliases := f.Count("_aliases")
	write(t, k, fakeEvents(sch, 2, 1))
	if f.Count("_aliases") != aliases+1 {
		t.Fatal("the Write after a timeout did not claim the index again")
	}
}

// Mapping reads and additions (a new column, a new session) fail by class too.
func TestSinkMappingFailureClasses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		method    string
		status    int
		permanent bool
	}{{"put_503", http.MethodPut, 503, false}, {"put_403", http.MethodPut, 403, true},
		{"get_429", http.MethodGet, 429, false}, {"get_401", http.MethodGet, 401, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t)
			st := statestore.NewMemory()
			v1 := ordersSchema("orders")
			write(t, fakeSink(t, f, Config{}, st, Options{}), fakeEvents(v1, 1, 1))
			k := fakeSink(t, f, Config{}, st, Options{}) // a new session reads the mapping
			f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
				if r.Endpoint == "_mapping" && r.Method == tc.method {
					return searchtest.ErrorAnswer(tc.status, "injected")
				}
				return nil
			})
			batch := []cdc.Event{ev(cdc.Insert, addColumns(v1), 2, nil, wideRow(2))}
			_, err := k.Write(context.Background(), batch)
			wantFailure(t, "Write", err, tc.permanent)
			if !tc.permanent {
				f.Intercept(nil)
				write(t, k, batch)
			}
		})
	}
}

// Refusals are permanent and stay *esfence.ConflictError: an index owned by another
// deployment, a fenced claim's writes and its unchanged-value reads, a deleted index.
func TestSinkRefusalsArePermanent(t *testing.T) {
	ctx := context.Background()
	sch := ordersSchema("orders")
	wantRefusal := func(t *testing.T, what string, err error, class esfence.Class) {
		t.Helper()
		wantFailure(t, what, err, true)
		var ce *esfence.ConflictError
		if !errors.As(err, &ce) || ce.Class != class || !errors.Is(err, esfence.ErrDestinationConflict) || esfence.ClassOf(err) != class {
			t.Fatalf("%s: %v, want a *esfence.ConflictError of class %s", what, err, class)
		}
	}

	f := newFakeCluster(t)
	st := statestore.NewMemory()
	a := fakeSink(t, f, Config{}, st, Options{})
	write(t, a, fakeEvents(sch, 1, 1))
	_, err := fakeSink(t, f, Config{}, nil, Options{}).Write(ctx, fakeEvents(sch, 2, 1)) // another deployment
	wantRefusal(t, "another deployment's sink", err, esfence.OwnedByOther)

	b := fakeSink(t, f, Config{}, st, Options{}) // a copy of a's deployment claims the index
	write(t, b, fakeEvents(sch, 2, 1))
	_, err = a.Write(ctx, fakeEvents(sch, 3, 1))
	wantRefusal(t, "the fenced sink's _bulk", err, esfence.Fenced)
	unchanged := []cdc.Event{ev(cdc.Update, sch, 4, nil, []cdc.Value{int64(1), cdc.Unchanged{}, int64(4), true})}
	_, err = a.Write(ctx, unchanged)
	wantRefusal(t, "the fenced sink's next Write (an _mget of unchanged values)", err, esfence.Fenced)

	// A second table into an index bound this session to the first.
	static := fakeSink(t, f, Config{Index: "shared"}, nil, Options{})
	write(t, static, fakeEvents(sch, 1, 1))
	_, err = static.Write(ctx, fakeEvents(ordersSchema("customers"), 1, 1))
	wantRefusal(t, "a second table into a bound index", err, esfence.BoundToAnotherRelation)

	f.DeleteIndex(indexOf(t, b, "orders"))
	mgets := f.Count("_mget")
	_, err = b.Write(ctx, unchanged)
	wantRefusal(t, "the _mget of a deleted index", err, esfence.DestinationMissing)
	if f.Count("_mget") != mgets+1 {
		t.Fatal("the refusal did not come from the _mget")
	}
}

// The engine check fails by class too: a refused user is permanent, an overloaded node not.
func TestSinkEngineCheckFailureClasses(t *testing.T) {
	for status, permanent := range map[int]bool{401: true, 503: false, 429: false} {
		f := newFakeCluster(t)
		k, err := New(Config{ID: "e", URL: f.URL, Index: "cdc-{table}", Auth: Auth{Type: AuthNone}}, "p", statestore.NewMemory(), nil)

		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		f.Intercept(func(r *searchtest.Request) *searchtest.Reply {
			if r.Endpoint == "_nodes" {
				return searchtest.ErrorAnswer(status, "injected")
			}
			return nil
		})
		_, err = k.Write(context.Background(), fakeEvents(ordersSchema("orders"), 1, 1))
		wantFailure(t, "status "+http.StatusText(status), err, permanent)
	}
}

// A table met at run time whose mapping cannot be generated (a column name no field can have)
// neither stops the pipeline nor is retried: its rows are dead-lettered, and no index is made.
func TestSinkUnmappableTableDeadLettered(t *testing.T) {
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{}, nil, Options{})
	sch := ordersSchema("orders")
	sch.Columns[1].Name = "na.me"
	dead, err := k.Write(context.Background(), fakeEvents(sch, 1, 1))
	if err != nil || len(dead) != 1 || !strings.HasPrefix(dead[0].Reason, "invalid_field_name: ") {
		t.Fatalf("Write: dead %+v, err %v; want the row dead-lettered", dead, err)
	}
	for _, r := range f.requestLines() {
		if strings.HasPrefix(r, "PUT ") {
			t.Fatalf("%s sent for a table without a mapping", r)
		}
	}
}
