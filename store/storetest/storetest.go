package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// Harness is what an adapter supplies to the suite.
type Harness struct {
	// Adapter is the adapter under test. The suite closes it at the end.
	Adapter store.Adapter
	// Namespace and Dataset name an existing, writable dataset (the suite never creates one:
	// search adapters must be given an existing index). Every behaviour uses its own keys.
	Namespace, Dataset string
	// Visible, if set, counts the documents a search of the dataset sees now, without forcing
	// a refresh; it lets the suite prove the visible completion mode.
	Visible func(ctx context.Context) (int, error)
	// PlainTimes declares that the backend keeps marked date-times as the strings they are and
	// cannot tell on a read which were marked (Elasticsearch, OpenSearch): reads return no
	// pointers, and the suite checks only that the values come back unchanged.
	PlainTimes bool
	// Refuses names the backend whose refusals the adapter has, as memstore copies them
	// (memstore.Options.Like): the Refusals behaviour checks that the adapter refuses each case
	// that backend refuses, with its kind, and accepts the others. mongostore on FerretDB is
	// memstore.FerretDB, on MongoDB memstore.MongoDB; searchstore memstore.Search. Unset
	// (Strictest), the behaviour is skipped for an adapter other than memstore, whose own
	// Options.Like is used.
	Refuses memstore.Backend
}

const storeName = "conformance"

// mergeBudget is the merge budget of the suite's services: as long as a behaviour's own
// bound, so MergeContention proves that no update is lost between two services, not that
// merges are fast on a loaded machine. (The default budget, 10s, is a production trade-off
// between giving up and waiting.)
const mergeBudget = 2 * time.Minute

// Run runs every behaviour against h.
func Run(t *testing.T, h Harness) {
	opts := &store.Options{Merger: merger{}, MaxDocumentBytes: docLimit, MergeBudget: mergeBudget}
	s, err := store.New(map[string]store.Adapter{storeName: h.Adapter}, opts)
	if err != nil {
		t.Fatal(err)
	}
	// A second service over the same adapter, without coalescing, competes with the first in
	// the contention test the way two processes would. Only the first closes the adapter.
	opts.Coalesce.Disabled = true
	direct, err := store.New(map[string]store.Adapter{storeName: unclosable{h.Adapter}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := direct.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	e := &env{h: h, s: s, direct: direct}
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			b.run(ctx, t, e.forTest())
		})
	}
}

// docLimit is the document size limit the suite configures; small enough to test both sides of
// it cheaply on every backend.
const docLimit = 256 << 10

type env struct {
	h      Harness
	s      *store.Service
	direct *store.Service // the same adapter, no coalescing
	prefix string         // unique per behaviour, so keys never collide across runs on a reused server
}

func (e *env) forTest() *env {
	c := *e
	var b [6]byte
	_, _ = rand.Read(b[:])
	c.prefix = hex.EncodeToString(b[:]) + "-"
	return &c
}

func (e *env) addr(k store.Key) store.Address {
	return store.Address{Store: storeName, Namespace: e.h.Namespace, Dataset: e.h.Dataset, Key: k}
}

func (e *env) key(name string) store.Address { return e.addr(store.StringKey(e.prefix + name)) }

// do runs ops and fails the test on a whole-request error.
func (e *env) do(ctx context.Context, t *testing.T, mode store.Completion, ops ...store.Op) []store.Result {
	t.Helper()
	res, err := e.s.Do(ctx, ops, mode)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if len(res) != len(ops) {
		t.Fatalf("Do returned %d results for %d ops", len(res), len(ops))
	}
	return res
}

func (e *env) one(ctx context.Context, t *testing.T, op store.Op) store.Result {
	t.Helper()
	return e.do(ctx, t, store.WaitApplied, op)[0]
}

func doc(t *testing.T, v any, times ...string) store.Document {
	t.Helper()
	d, err := store.NewDocument(v, times...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// wantOK fails unless r succeeded with outcome want.
func wantOK(t *testing.T, what string, r store.Result, want store.Outcome) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: unexpected error %v", what, r.Err)
	}
	if r.Outcome != want {
		t.Fatalf("%s: outcome %v, want %v", what, r.Outcome, want)
	}
}

// wantErr fails unless r failed with kind want (and only that kind).
func wantErr(t *testing.T, what string, r store.Result, want error) {
	t.Helper()
	if r.Err == nil {
		t.Fatalf("%s: succeeded with outcome %v, want error %v", what, r.Outcome, want)
	}
	if !errors.Is(r.Err, want) {
		t.Fatalf("%s: error %v (kind %v), want %v", what, r.Err, store.KindOf(r.Err), want)
	}
	if r.Outcome != 0 {
		t.Fatalf("%s: failed result has outcome %v", what, r.Outcome)
	}
}

// sameJSON fails unless got and want hold equal JSON values.
func sameJSON(t *testing.T, what string, got []byte, want any) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: stored document is not JSON: %v", what, err)
	}
	wb, _ := json.Marshal(want)
	_ = json.Unmarshal(wb, &w)
	gb, _ := json.Marshal(g)
	wb, _ = json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("%s: document %s, want %s", what, gb, wb)
	}
}

// merger runs the suite's programs, named by Program.
type merger struct{}

func (merger) Merge(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	switch c.Program {
	case "increment": // {"n": current.n + incoming.by}
		var cur, in struct{ N, By int64 }
		if c.Current != nil {
			if err := json.Unmarshal(c.Current.JSON, &cur); err != nil {
				return store.MergeResult{}, err
			}
		}
		if err := json.Unmarshal(c.Incoming.JSON, &in); err != nil {
			return store.MergeResult{}, err
		}
		if c.Current != nil {
			time.Sleep(200 * time.Microsecond) // widen the read-modify-write window, as a slow program would
		}
		b, _ := json.Marshal(map[string]int64{"n": cur.N + in.By})
		return store.MergeResult{Doc: store.Document{JSON: b}}, nil
	case "replace":
		return store.MergeResult{Doc: c.Incoming}, nil
	case "delete":
		return store.MergeResult{Action: store.MergeDelete}, nil
	case "keep":
		return store.MergeResult{Action: store.MergeUnchanged}, nil
	case "fail":
		return store.MergeResult{}, errors.New("the program refuses this input")
	case "oversize":
		return store.MergeResult{Doc: store.Document{JSON: []byte(`{"pad":"` + strings.Repeat("x", docLimit) + `"}`)}}, nil
	}
	return store.MergeResult{}, fmt.Errorf("unknown test program %q", c.Program)
}

// parallel runs f(i) for i in [0,n) concurrently and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// Shared returns a for a second Service over the same adapter, as a second process would have:
// its Close does nothing (the first Service closes a), and it keeps a's optional capabilities
// (driver.AddressValidator, driver.TimePrecisioner), which an embedding wrapper would hide.
func Shared(a store.Adapter) store.Adapter { return unclosable{a} }

type unclosable struct{ driver.Store }

func (unclosable) Close(context.Context) error { return nil }

func (u unclosable) ValidateAddress(a driver.Address) error {
	if v, ok := u.Store.(driver.AddressValidator); ok {
		return v.ValidateAddress(a)
	}
	return nil
}

func (u unclosable) TimePrecision() time.Duration {
	if p, ok := u.Store.(driver.TimePrecisioner); ok {
		return p.TimePrecision()
	}
	return 0
}

// StoreAddress returns a, an address in the adapter contract's vocabulary (package driver), as
// package store's Address: for adapter tests that drive an adapter through a store.Service.
func StoreAddress(a driver.Address) store.Address {
	var k store.Key
	switch a.Key.Kind() {
	case driver.StringKey:
		k = store.StringKey(a.Key.StringValue())
	case driver.Int64Key:
		k = store.Int64Key(a.Key.Int64Value())
	case driver.BytesKey:
		k = store.BytesKey(a.Key.BytesValue())
	case driver.ObjectIDKey:
		k = store.ObjectIDKey(a.Key.ObjectIDValue())
	}
	return store.Address{Store: a.Store, Namespace: a.Namespace, Dataset: a.Dataset, Key: k}
}
