package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// counting counts adapter calls and refuses, as the backend would, every document holding
// "bad": the write is invalid.
type counting struct {
	driver.Store
	reads, writes atomic.Int64
	// before, when set, runs before every write call (another process's interference).
	before func(ctx context.Context, ws []driver.Write)
}

func (c *counting) Read(ctx context.Context, a []driver.Address) ([]driver.ReadResult, error) {
	c.reads.Add(1)
	return c.Store.Read(ctx, a)
}

func (c *counting) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	c.writes.Add(1)
	if c.before != nil {
		c.before(ctx, ws)
	}
	out := make([]driver.WriteResult, len(ws))
	var pass []driver.Write
	var at []int
	for i, w := range ws {
		if w.Kind == driver.Put && bytes.Contains(w.Doc.JSON, []byte(`"bad"`)) {
			out[i] = driver.WriteResult{Err: driver.NewError(driver.KindInvalid, "the dataset refuses this document", nil)}
			continue
		}
		pass = append(pass, w)
		at = append(at, i)
	}
	res, err := c.Store.Write(ctx, pass, o)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = res[j]
	}
	return out, nil
}

// programs: inc adds 1 to n (creating the record), del deletes, keep leaves the record, fail
// refuses, bad produces a document the adapter refuses.
var programs = store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	cur := map[string]any{}
	if c.Current != nil {
		if err := json.Unmarshal(c.Current.JSON, &cur); err != nil {
			return store.MergeResult{}, err
		}
	}
	switch c.Program {
	case "inc":
		n, _ := cur["n"].(float64)
		cur["n"] = n + 1
	case "bad":
		cur["bad"] = true
	case "del":
		return store.MergeResult{Action: store.MergeDelete}, nil
	case "keep":
		return store.MergeResult{Action: store.MergeUnchanged}, nil
	case "fail":
		return store.MergeResult{}, errors.New("the program refuses")
	default:
		return store.MergeResult{}, fmt.Errorf("unknown program %q", c.Program)
	}
	b, _ := json.Marshal(cur)
	return store.MergeResult{Doc: store.Document{JSON: b}}, nil
})

func newCombineService(t *testing.T, a driver.Store, o *store.Options) *store.Service {
	t.Helper()
	if o == nil {
		o = &store.Options{}
	}
	o.Merger = programs
	o.BackoffBase = time.Microsecond
	s, err := store.New(map[string]store.Adapter{"m": a}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func mustDo(t *testing.T, s *store.Service, ops ...store.Op) []store.Result {
	t.Helper()
	res, err := s.Do(context.Background(), ops, store.WaitApplied)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	return res
}

// Many merges of one record in one request: one read, one write, every merge applied in order.
func TestMergesOfOneRecordShareOneWrite(t *testing.T) {
	c := &counting{Store: memstore.New()}
	s := newCombineService(t, c, nil)
	k := addr("m", "hot")
	var ops []store.Op
	for range 100 {
		ops = append(ops, store.Merge(k, "inc", store.Document{JSON: []byte(`{}`)}))
	}
	res := mustDo(t, s, ops...)
	for i, r := range res {
		want := store.Updated
		if i == 0 {
			want = store.Created
		}
		if r.Err != nil || r.Outcome != want || string(r.Doc.JSON) != fmt.Sprintf(`{"n":%d}`, i+1) {
			t.Fatalf("merge %d: %+v (doc %s), want %v with n=%d", i, r, r.Doc.JSON, want, i+1)
		}
		if (i == len(res)-1) == r.Revision.IsZero() {
			t.Fatalf("merge %d: revision %v; only the last, stored state has one", i, r.Revision)
		}
	}
	if r, w := c.reads.Load(), c.writes.Load(); r != 1 || w != 1 {
		t.Fatalf("%d read and %d write calls, want 1 and 1", r, w)
	}
	got := mustDo(t, s, store.Read(k))[0]
	if !got.Revision.Equal(res[len(res)-1].Revision) || string(got.Doc.JSON) != `{"n":100}` {
		t.Fatalf("read %s at %v, want n=100 at the last merge's revision %v", got.Doc.JSON, got.Revision, res[len(res)-1].Revision)
	}
}

// A read queued behind a write of the same request is answered by that write: its revision
// is the stored one, and no read call is made.
func TestReadAfterWriteIsAnsweredByTheWrite(t *testing.T) {
	c := &counting{Store: memstore.New()}
	s := newCombineService(t, c, nil)
	k := addr("m", "k")
	res := mustDo(t, s, store.Put(k, store.Document{JSON: []byte(`{"v":1}`)}), store.Read(k))
	if res[0].Outcome != store.Created || res[1].Outcome != store.Found || !res[1].Revision.Equal(res[0].Revision) || string(res[1].Doc.JSON) != `{"v":1}` {
		t.Fatalf("put then read: %+v %+v", res[0], res[1])
	}
	if r, w := c.reads.Load(), c.writes.Load(); r != 0 || w != 1 {
		t.Fatalf("%d read and %d write calls, want 0 and 1", r, w)
	}
}

// Concurrent one-operation merges of one record through one coalescing Service never lose
// a compare-and-set to each other: no retry, no refusal, and far fewer writes than merges.
func TestOneServiceNeverRacesItself(t *testing.T) {
	c := &counting{Store: memstore.New()}
	obs := &events{}
	s := newCombineService(t, c, &store.Options{Observer: obs})
	k := addr("m", "hot")
	const clients, each = 50, 20
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				res, err := s.Do(context.Background(), []store.Op{store.Merge(k, "inc", store.Document{JSON: []byte(`{}`)})}, store.WaitApplied)
				if err != nil || res[0].Err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d merges failed", n)
	}
	if got := string(mustDo(t, s, store.Read(k))[0].Doc.JSON); got != fmt.Sprintf(`{"n":%d}`, clients*each) {
		t.Fatalf("counter %s, want %d", got, clients*each)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, r := range obs.retries {
		if r.Reason == store.RetryMergeConflict {
			t.Fatalf("a merge retried after a lost compare-and-set within one Service: %+v", r)
		}
	}
}

// Another process writing between a round's read and its write: the merges run again on a
// fresh read and none is lost.
func TestCombinedMergesRunAgainAfterAnotherWriter(t *testing.T) {
	mem := memstore.New()
	var interfered atomic.Int64
	c := &counting{Store: mem}
	c.before = func(ctx context.Context, ws []driver.Write) {
		if interfered.Add(1) > 3 {
			return
		}
		for _, w := range ws { // another process adds 10
			res, _ := mem.Read(ctx, []driver.Address{w.Addr})
			n := struct{ N int }{}
			if res[0].Found {
				_ = json.Unmarshal(res[0].Doc.JSON, &n)
			}
			b, _ := json.Marshal(map[string]int{"n": n.N + 10})
			_, _ = mem.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: w.Addr, Doc: driver.Document{JSON: b}}}, driver.WriteOptions{})
		}
	}
	s := newCombineService(t, c, nil)
	k := addr("m", "k")
	var ops []store.Op
	for range 5 {
		ops = append(ops, store.Merge(k, "inc", store.Document{JSON: []byte(`{}`)}))
	}
	res := mustDo(t, s, ops...)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("merge %d: %v", i, r.Err)
		}
	}
	if got := string(mustDo(t, s, store.Read(k))[0].Doc.JSON); got != `{"n":35}` {
		t.Fatalf("counter %s, want 35 (3 interfering +10 and 5 merges)", got)
	}
}

// A record kept changing by another process: a merge gives up with ErrConflict once its
// budget is spent. The budget (200ms) leaves room for the merge's first run and a retry
// however loaded the machine (1ms failed under load: the first run alone spent it).
func TestMergeBudgetRunsOut(t *testing.T) {
	mem := memstore.New()
	c := &counting{Store: mem}
	c.before = func(ctx context.Context, ws []driver.Write) {
		for _, w := range ws {
			_, _ = mem.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: w.Addr, Doc: driver.Document{JSON: []byte(`{"n":0}`)}}}, driver.WriteOptions{})
		}
	}
	s := newCombineService(t, c, &store.Options{MergeBudget: 200 * time.Millisecond})
	k := addr("m", "k")
	res := mustDo(t, s, store.Merge(k, "inc", store.Document{JSON: []byte(`{}`)}))
	if !errors.Is(res[0].Err, store.ErrConflict) {
		t.Fatalf("merge on a record that always changes: %v, want ErrConflict", res[0].Err)
	}
	if c.writes.Load() < 2 {
		t.Fatalf("%d write calls: the merge never ran again", c.writes.Load())
	}
}

// The adapter refusing a combined document: the operations run again one write each, so the
// refusal is the one operation's that caused it.
func TestRefusedCombinedWriteIsSplit(t *testing.T) {
	s := newCombineService(t, &counting{Store: memstore.New()}, nil)
	k := addr("m", "k")
	inc := store.Document{JSON: []byte(`{}`)}
	res := mustDo(t, s, store.Merge(k, "inc", inc), store.Merge(k, "bad", inc), store.Merge(k, "inc", inc))
	if res[0].Outcome != store.Created || !errors.Is(res[1].Err, store.ErrInvalid) || res[2].Outcome != store.Updated || string(res[2].Doc.JSON) != `{"n":2}` {
		t.Fatalf("results %+v / %v / %+v", res[0], res[1].Err, res[2])
	}
}

// An unavailable backend fails every operation a combined write carried, retryably.
func TestUnavailableCombinedWriteFailsItsOperations(t *testing.T) {
	f := &flaky{Store: memstore.New()}
	f.failures.Store(1 << 20)
	s := newCombineService(t, f, &store.Options{RetryAttempts: 2})
	k := addr("m", "k")
	res := mustDo(t, s, store.Put(k, store.Document{JSON: []byte(`{"v":1}`)}), store.Merge(k, "inc", store.Document{JSON: []byte(`{}`)}))
	for i, r := range res {
		if !errors.Is(r.Err, store.ErrUnavailable) {
			t.Fatalf("op %d: %v, want ErrUnavailable", i, r.Err)
		}
	}
}

// Differential: random sequences of every operation kind and precondition on a few records, run
// in ONE request (combined into segments) and one operation per request on another service
// (the plain, uncombined order), give the same outcomes, documents, error kinds and final
// states. (Programs whose result the backend refuses are left out: a state a later operation of
// the same write replaces is never sent, so its refusal cannot happen -- see
// TestRefusedCombinedWriteIsSplit for a refused stored state.)
func TestCombiningMatchesOneOperationAtATime(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		one := newCombineService(t, &counting{Store: memstore.New()}, nil)
		ref := newCombineService(t, &counting{Store: memstore.New()}, &store.Options{Coalesce: store.CoalesceOptions{Disabled: true}})
		keys := []string{"a", "b", "c"}
		type revs struct{ base, stale store.Revision }
		setup := func(s *store.Service) map[string]revs {
			out := map[string]revs{}
			for i, k := range keys {
				a := addr("m", k)
				r1 := mustDo(t, s, store.Put(a, store.Document{JSON: []byte(`{"v":0}`)}))[0]
				if i == 2 { // c starts absent
					mustDo(t, s, store.Delete(a))
					out[k] = revs{base: r1.Revision, stale: r1.Revision}
					continue
				}
				r2 := mustDo(t, s, store.Put(a, store.Document{JSON: []byte(`{"v":1}`)}))[0]
				out[k] = revs{base: r2.Revision, stale: r1.Revision}
			}
			return out
		}
		oneRevs, refRevs := setup(one), setup(ref)
		type spec struct {
			kind, cond int
			key        string
			prog       string
			v          int
		}
		n := 1 + rng.IntN(12)
		specs := make([]spec, n)
		for i := range specs {
			specs[i] = spec{kind: rng.IntN(4), cond: rng.IntN(4), key: keys[rng.IntN(len(keys))], prog: []string{"inc", "inc", "del", "keep", "fail"}[rng.IntN(5)], v: i + 2}
		}
		build := func(r map[string]revs) []store.Op {
			ops := make([]store.Op, n)
			for i, sp := range specs {
				a := addr("m", sp.key)
				var op store.Op
				switch sp.kind {
				case 0:
					op = store.Read(a)
				case 1:
					op = store.Put(a, store.Document{JSON: []byte(fmt.Sprintf(`{"v":%d}`, sp.v))})
				case 2:
					op = store.Delete(a)
				case 3:
					op = store.Merge(a, sp.prog, store.Document{JSON: []byte(`{}`)})
				}
				if sp.kind == 1 || sp.kind == 2 {
					switch sp.cond {
					case 1:
						op = op.WithPrecondition(store.IfAbsent())
					case 2:
						op = op.WithPrecondition(store.IfRevision(r[sp.key].base))
					case 3:
						op = op.WithPrecondition(store.IfRevision(r[sp.key].stale))
					}
				}
				ops[i] = op
			}
			return ops
		}
		got := mustDo(t, one, build(oneRevs)...)
		refOps := build(refRevs)
		want := make([]store.Result, n)
		for i, op := range refOps {
			want[i] = mustDo(t, ref, op)[0]
		}
		describe := func(r store.Result) string {
			if r.Err != nil {
				return "error " + store.KindOf(r.Err).String()
			}
			return r.Outcome.String() + " " + string(r.Doc.JSON)
		}
		for i := range specs {
			if describe(got[i]) != describe(want[i]) {
				t.Fatalf("seed %d, op %d of %+v: combined %s, one at a time %s", seed, i, specs, describe(got[i]), describe(want[i]))
			}
			if got[i].Err == nil && !got[i].Revision.IsZero() && want[i].Revision.IsZero() {
				t.Fatalf("seed %d, op %d: a revision for a state that has none", seed, i)
			}
		}
		for _, k := range keys {
			g, w := mustDo(t, one, store.Read(addr("m", k)))[0], mustDo(t, ref, store.Read(addr("m", k)))[0]
			if describe(g) != describe(w) {
				t.Fatalf("seed %d, record %s: combined ends %s, one at a time %s", seed, k, describe(g), describe(w))
			}
			// The last operation on the record that reports a revision reports the stored one.
			for i := n - 1; i >= 0; i-- {
				if specs[i].key == k && got[i].Err == nil && !got[i].Revision.IsZero() {
					if !got[i].Revision.Equal(g.Revision) {
						last := true
						for j := i + 1; j < n; j++ {
							if specs[j].key == k && got[j].Err == nil && got[j].Outcome != store.Found && got[j].Outcome != store.Unchanged && got[j].Outcome != store.Absent {
								last = false
							}
						}
						if last {
							t.Fatalf("seed %d, record %s: op %d reports revision %v, the record is at %v", seed, k, i, got[i].Revision, g.Revision)
						}
					}
					break
				}
			}
		}
	}
}
