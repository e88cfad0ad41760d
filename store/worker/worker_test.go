package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/worker"
)

const (
	topic    = "mutations"
	dlqTopic = "dead"
	group    = "workers"
)

// Merge programs of the tests, run by testMerger:
//   - "add": current.n += incoming.n, and incoming.op (an operation id) is added to the
//     set current.ops -- so a test can tell an operation applied twice from one lost;
//   - "fail": the program fails on its input (a permanent failure).
const (
	progAdd  = "add"
	progFail = "fail"
)

type counter struct {
	N   int             `json:"n"`
	Ops map[string]bool `json:"ops,omitempty"`
	Seq int             `json:"seq,omitempty"`
}

var testMerger = store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	if c.Program == progFail {
		return store.MergeResult{}, errors.New("the program failed on its input")
	}
	var cur, in counter
	if c.Current != nil {
		if err := json.Unmarshal(c.Current.JSON, &cur); err != nil {
			return store.MergeResult{}, err
		}
	}
	if err := json.Unmarshal(c.Incoming.JSON, &in); err != nil {
		return store.MergeResult{}, err
	}
	cur.N += in.N
	if cur.Ops == nil {
		cur.Ops = map[string]bool{}
	}
	for op := range in.Ops {
		cur.Ops[op] = true
	}
	b, err := json.Marshal(cur)
	return store.MergeResult{Doc: store.Document{JSON: b}}, err
})

func key(k string) store.Address {
	return store.Address{Store: "m", Namespace: "ns", Dataset: "ds", Key: store.StringKey(k)}
}

func jsonDoc(t testing.TB, v any) store.Document {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return store.Document{JSON: b}
}

// rig is a service whose store "m" publishes accepted writes to a memqueue topic, and the
// broker a worker consumes them from.
type rig struct {
	b       *memqueue.Broker
	adapter driver.Store
	svc     *store.Service
}

func newRig(t testing.TB, adapter driver.Store, partitions int) *rig {
	t.Helper()
	b := memqueue.New(&memqueue.Options{Partitions: partitions})
	pub, err := b.Publisher(topic)
	if err != nil {
		t.Fatal(err)
	}
	if adapter == nil {
		adapter = memstore.New()
	}
	svc, err := store.New(map[string]store.Adapter{"m": adapter}, &store.Options{
		Merger:        testMerger,
		Queues:        map[string]store.Queue{"m": accepted.NewPublisher(pub)},
		RetryAttempts: 1, // the worker's retries are under test, not the service's
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return &rig{b: b, adapter: adapter, svc: svc}
}

// accept runs ops in accepted mode and requires every write to be accepted.
func (r *rig) accept(t testing.TB, ops ...store.Op) {
	t.Helper()
	res, err := r.svc.Do(context.Background(), ops, store.ReturnAccepted)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range res {
		if x.Err != nil || x.Outcome != store.Accepted {
			t.Fatalf("op %d: %+v, want Accepted", i, x)
		}
	}
}

// worker starts a worker on a new consumer of the group; stop stops it gracefully and
// returns Run's error.
func (r *rig) worker(t testing.TB, opts *worker.Options) (stop func() error) {
	t.Helper()
	c, err := r.b.Consumer(topic, group)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := r.b.Publisher(dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &worker.Options{}
	}
	if opts.BackoffBase == 0 {
		opts.BackoffBase, opts.BackoffMax = time.Millisecond, 5*time.Millisecond
	}
	w, err := worker.New("m", c, r.svc, dlq, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	return func() error {
		if err := w.Stop(context.Background()); err != nil {
			return err
		}
		err := <-done
		_ = c.Close()
		return err
	}
}

// waitCommitted waits until the group committed every message of the topic.
func (r *rig) waitCommitted(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang guard, not a speed assertion
	for {
		want := int64(len(r.b.Messages(topic)))
		var got int64
		for _, off := range r.b.Committed(topic, group) {
			got += off
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker committed %d of %d messages", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *rig) read(t testing.TB, a store.Address) store.Result {
	t.Helper()
	res, err := r.svc.Do(context.Background(), []store.Op{store.Read(a)}, store.WaitApplied)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	return res[0]
}

func TestWorkerAppliesAcceptedWritesLikeTheSynchronousPath(t *testing.T) {
	r := newRig(t, nil, 4)
	ref, err := store.New(map[string]store.Adapter{"m": memstore.New()}, &store.Options{Merger: testMerger})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close(context.Background())

	var ops []store.Op
	for i := range 60 {
		a := key(fmt.Sprint("k", i%7))
		switch i % 4 {
		case 0, 1:
			ops = append(ops, store.Merge(a, progAdd, jsonDoc(t, counter{N: i})))
		case 2:
			ops = append(ops, store.Put(a, jsonDoc(t, counter{N: 1000 + i})))
		case 3:
			if i%8 == 3 {
				ops = append(ops, store.Delete(a))
			}
		}
	}
	stop := r.worker(t, nil)
	r.accept(t, ops[:30]...)
	r.accept(t, ops[30:]...)
	if _, err := ref.Do(context.Background(), ops, store.WaitApplied); err != nil {
		t.Fatal(err)
	}
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
	for i := range 7 {
		a := key(fmt.Sprint("k", i))
		got := r.read(t, a)
		want, _ := ref.Do(context.Background(), []store.Op{store.Read(a)}, store.WaitApplied)
		if got.Outcome != want[0].Outcome || string(got.Doc.JSON) != string(want[0].Doc.JSON) {
			t.Errorf("%v: worker left %v %s, the synchronous path %v %s", a, got.Outcome, got.Doc.JSON, want[0].Outcome, want[0].Doc.JSON)
		}
	}
	if n := len(r.b.Messages(dlqTopic)); n != 0 {
		t.Fatalf("%d dead letters for valid writes", n)
	}
}

// recording remembers, per address, the seq of every put the adapter applied.
type recording struct {
	driver.Store
	mu   sync.Mutex
	seqs map[store.Address][]int
}

func (r *recording) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	res, err := r.Store.Write(ctx, ws, o)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range ws {
		if err != nil || res[i].Err != nil || w.Kind != driver.Put {
			continue
		}
		var c counter
		if json.Unmarshal(w.Doc.JSON, &c) == nil {
			r.seqs[sa(w.Addr)] = append(r.seqs[sa(w.Addr)], c.Seq)
		}
	}
	return res, err
}

func TestWorkerKeepsPerKeyOrderAcrossManyKeysAndPartitions(t *testing.T) {
	rec := &recording{Store: memstore.New(), seqs: map[store.Address][]int{}}
	r := newRig(t, rec, 8)
	const keys, perKey = 300, 12
	rng := rand.New(rand.NewPCG(1, 2))
	next := make([]int, keys)
	stop := r.worker(t, nil)
	// Interleaved requests of random sizes, each touching random keys, some twice.
	for sent := 0; sent < keys*perKey; {
		var ops []store.Op
		for range 1 + rng.IntN(40) {
			k := rng.IntN(keys)
			if next[k] == perKey {
				continue
			}
			next[k]++
			ops = append(ops, store.Put(key(fmt.Sprint("k", k)), jsonDoc(t, counter{Seq: next[k]})))
			sent++
		}
		if len(ops) > 0 {
			r.accept(t, ops...)
		}
	}
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		got := rec.seqs[key(fmt.Sprint("k", k))]
		if len(got) != perKey || !slices.IsSorted(got) || got[len(got)-1] != perKey {
			t.Fatalf("key %d: puts applied in the order %v, want 1..%d", k, got, perKey)
		}
	}
}

func header(m queue.Message, k string) string {
	for _, h := range m.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func TestWorkerDeadLetterPoisonDoesNotBlockItsPartition(t *testing.T) {
	r := newRig(t, nil, 1) // one partition: everything queues behind the poison
	r.accept(t, store.Put(key("exists"), jsonDoc(t, counter{N: 1})))
	// An undecodable message with the key of a real record, then a permanently failing
	// merge, a precondition that fails, and valid writes after each on the same records.
	raw, err := r.b.Publisher(topic)
	if err != nil {
		t.Fatal(err)
	}
	garbage := queue.Message{Key: accepted.MessageKey(key("a")), Value: []byte(`{"v":1,"op":"put","doc":{"secret":"x"`),
		Headers: []queue.Header{{Key: "trace", Value: []byte("t1")}}}
	if err := raw.Publish(context.Background(), []queue.Message{garbage}); err != nil {
		t.Fatal(err)
	}
	r.accept(t,
		store.Put(key("a"), jsonDoc(t, counter{N: 2})),
		store.Merge(key("b"), progFail, jsonDoc(t, counter{N: 1})),
		store.Merge(key("b"), progAdd, jsonDoc(t, counter{N: 3})),
		store.Put(key("exists"), jsonDoc(t, counter{N: 9})).WithPrecondition(store.IfAbsent()),
		store.Merge(key("exists"), progAdd, jsonDoc(t, counter{N: 4})),
	)
	stop := r.worker(t, nil)
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for k, want := range map[string]int{"a": 2, "b": 3, "exists": 5} {
		var c counter
		if err := json.Unmarshal(r.read(t, key(k)).Doc.JSON, &c); err != nil || c.N != want {
			t.Errorf("%s: n = %d (%v), want %d: the writes after the poison were not applied", k, c.N, err, want)
		}
	}
	src := r.b.Messages(topic)
	dead := r.b.Messages(dlqTopic)
	wantDead := []struct{ reason, kind, attempts string }{
		{worker.ReasonMalformed, "invalid", "0"},
		{worker.ReasonFailed, "invalid", "1"},
		{worker.ReasonFailed, "already exists", "1"},
	}
	if len(dead) != len(wantDead) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(wantDead))
	}
	for i, d := range dead {
		w := wantDead[i]
		if header(d, worker.HeaderReason) != w.reason || header(d, worker.HeaderErrorKind) != w.kind || header(d, worker.HeaderAttempts) != w.attempts {
			t.Errorf("dead letter %d: headers %q, want reason %s, kind %s, attempts %s", i, d.Headers, w.reason, w.kind, w.attempts)
		}
		off, err := strconv.ParseInt(header(d, worker.HeaderOffset), 10, 64)
		if err != nil || header(d, worker.HeaderTopic) != topic || header(d, worker.HeaderPartition) != "0" {
			t.Fatalf("dead letter %d: source headers %q", i, d.Headers)
		}
		orig := src[off]
		if string(orig.Key) != string(d.Key) || string(orig.Value) != string(d.Value) {
			t.Errorf("dead letter %d is not a copy of the message at offset %d", i, off)
		}
		for _, h := range d.Headers {
			if string(h.Value) == "x" || string(h.Value) == `{"n":9}` {
				t.Errorf("dead letter %d: header %s carries document data", i, h.Key)
			}
		}
	}
	if header(dead[0], "trace") != "t1" {
		t.Errorf("the dead letter lost the original headers: %q", dead[0].Headers)
	}
}

// flaky fails every Read and Write with KindUnavailable while its budget lasts, always for
// the records failAlways names, and for the records failFirst names while their own budget
// lasts.
type flaky struct {
	driver.Store
	mu         sync.Mutex
	budget     int
	failAlways map[store.Address]bool
	failFirst  map[store.Address]int
}

func (f *flaky) fail(addrs []driver.Address) (bool, map[int]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.budget > 0 {
		f.budget--
		return true, nil
	}
	bad := map[int]bool{}
	for i, a := range addrs {
		if f.failAlways[sa(a)] {
			bad[i] = true
		}
		if f.failFirst[sa(a)] > 0 {
			f.failFirst[sa(a)]--
			bad[i] = true
		}
	}
	return false, bad
}

var errDown = driver.NewError(driver.KindUnavailable, "backend down", nil)

func (f *flaky) Read(ctx context.Context, addrs []driver.Address) ([]driver.ReadResult, error) {
	all, bad := f.fail(addrs)
	if all {
		return nil, errDown
	}
	res, err := f.Store.Read(ctx, addrs)
	for i := range bad {
		res[i] = driver.ReadResult{Err: errDown}
	}
	return res, err
}

func (f *flaky) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	addrs := make([]driver.Address, len(ws))
	for i, w := range ws {
		addrs[i] = w.Addr
	}
	all, bad := f.fail(addrs)
	if all {
		return nil, errDown
	}
	var keep []driver.Write
	for i, w := range ws {
		if !bad[i] {
			keep = append(keep, w)
		}
	}
	got, err := f.Store.Write(ctx, keep, o)
	if err != nil {
		return nil, err
	}
	res := make([]driver.WriteResult, len(ws))
	for i, j := 0, 0; i < len(ws); i++ {
		if bad[i] {
			res[i] = driver.WriteResult{Err: errDown}
		} else {
			res[i], j = got[j], j+1
		}
	}
	return res, nil
}

type statsLog struct {
	mu    sync.Mutex
	stats []worker.FetchStats
}

func (s *statsLog) FetchDone(f worker.FetchStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = append(s.stats, f)
}

func (s *statsLog) total() (t worker.FetchStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.stats {
		t.Records += f.Records
		t.Applied += f.Applied
		t.Retries += f.Retries
		t.DeadLettered += f.DeadLettered
	}
	return t
}

func TestWorkerRetriesThenSucceeds(t *testing.T) {
	f := &flaky{Store: memstore.New()}
	r := newRig(t, f, 2)
	r.accept(t, store.Put(key("p"), jsonDoc(t, counter{N: 1})), store.Merge(key("m"), progAdd, jsonDoc(t, counter{N: 2})))
	f.mu.Lock()
	f.budget = 5 // five failed adapter calls: a few applications fail before one succeeds
	f.mu.Unlock()
	obs := &statsLog{}
	stop := r.worker(t, &worker.Options{MaxAttempts: 10, Observer: obs})
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := r.read(t, key("m")); c.Outcome != store.Found || string(c.Doc.JSON) != `{"n":2}` {
		t.Fatalf("merge after retries: %v %s", c.Outcome, c.Doc.JSON)
	}
	if r.read(t, key("p")).Outcome != store.Found {
		t.Fatal("put after retries not applied")
	}
	if tot := obs.total(); tot.Retries == 0 || tot.Applied != 2 || tot.DeadLettered != 0 {
		t.Fatalf("stats %+v: want retries, 2 applied, no dead letters", tot)
	}
}

func TestWorkerDeadLetterAfterRetriesExhausted(t *testing.T) {
	f := &flaky{Store: memstore.New(), failAlways: map[store.Address]bool{key("down"): true}}
	r := newRig(t, f, 1)
	r.accept(t, store.Put(key("down"), jsonDoc(t, counter{N: 1})), store.Put(key("up"), jsonDoc(t, counter{N: 1})),
		store.Put(key("down"), jsonDoc(t, counter{N: 2})))
	stop := r.worker(t, &worker.Options{MaxAttempts: 3})
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dead := r.b.Messages(dlqTopic)
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want both writes of the unavailable record", len(dead))
	}
	for _, d := range dead {
		if header(d, worker.HeaderReason) != worker.ReasonRetriesExhausted || header(d, worker.HeaderAttempts) != "3" || header(d, worker.HeaderErrorKind) != "unavailable" {
			t.Fatalf("dead letter headers %q", d.Headers)
		}
	}
	if r.read(t, key("up")).Outcome != store.Found {
		t.Fatal("the healthy record was not applied")
	}
}

// gated blocks Apply until release is closed, and tells when a call entered.
type gated struct {
	worker.Applier
	entered chan struct{}
	release chan struct{}
}

func (g *gated) ApplyInOrder(ctx context.Context, recs []store.QueuedOp) ([]store.Result, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.Applier.ApplyInOrder(ctx, recs)
}

func TestWorkerStopDrainsTheFetchInHand(t *testing.T) {
	r := newRig(t, nil, 2)
	var ops []store.Op
	for i := range 50 {
		ops = append(ops, store.Put(key(fmt.Sprint("k", i)), jsonDoc(t, counter{N: i})))
	}
	r.accept(t, ops...)
	c, _ := r.b.Consumer(topic, group)
	dlq, _ := r.b.Publisher(dlqTopic)
	g := &gated{Applier: r.svc, entered: make(chan struct{}, 1), release: make(chan struct{})}
	w, err := worker.New("m", c, g, dlq, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	<-g.entered
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	close(g.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
	// Whatever the worker fetched before Stop is applied and committed; nothing else is.
	committed := int64(0)
	for _, off := range r.b.Committed(topic, group) {
		committed += off
	}
	if committed == 0 {
		t.Fatal("Stop abandoned the fetch in hand")
	}
	applied := 0
	for i := range 50 {
		if r.read(t, key(fmt.Sprint("k", i))).Outcome == store.Found {
			applied++
		}
	}
	if int64(applied) != committed {
		t.Fatalf("%d records applied, %d committed: a graceful stop commits exactly what it applied", applied, committed)
	}
}

func TestNewNeedsItsParts(t *testing.T) {
	if _, err := worker.New("m", nil, nil, nil, nil); err == nil {
		t.Fatal("New without a consumer, applier and dead-letter publisher succeeded")
	}
	r := newRig(t, nil, 1)
	c, _ := r.b.Consumer(topic, group)
	dlq, _ := r.b.Publisher(dlqTopic)
	for name, c := range map[string]struct {
		store string
		opts  *worker.Options
		want  string
	}{
		"no store":           {"", nil, "worker: New needs the name of the store whose queue the worker consumes"},
		"unconfigured store": {"es", nil, `worker: store "es" is not configured in the applier, so its records could never be applied`},
		"unconfigured also":  {"m", &worker.Options{AlsoApply: []string{"m", "es"}}, `worker: store "es" is not configured in the applier, so its records could never be applied`},
		"empty also":         {"m", &worker.Options{AlsoApply: []string{""}}, "worker: Options.AlsoApply holds an empty store name"},
	} {
		_, err := worker.New(c.store, &struct{ queue.Consumer }{}, r.svc, dlq, c.opts)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: New = %v, want %q", name, err, c.want)
		}
	}
	_ = c.Close()
}

// TestWorkerAppliesItsOwnStoreOnly: a record of another store on the worker's topic -- here
// one for "es", a store of the same service that has no queue -- is dead-lettered with
// reason other_store, never applied, while the records of the worker's store around it are;
// listed in Options.AlsoApply, the same record is applied.
func TestWorkerAppliesItsOwnStoreOnly(t *testing.T) {
	for _, also := range []bool{false, true} {
		t.Run(fmt.Sprintf("also_apply=%v", also), func(t *testing.T) {
			b := memqueue.New(&memqueue.Options{Partitions: 1})
			pub, err := b.Publisher(topic)
			if err != nil {
				t.Fatal(err)
			}
			svc, err := store.New(map[string]store.Adapter{"m": memstore.New(), "es": memstore.New()}, &store.Options{
				Merger: testMerger, Queues: map[string]store.Queue{"m": accepted.NewPublisher(pub)}})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close(context.Background())
			at := time.Now()
			foreign := store.Address{Store: "es", Namespace: "ns", Dataset: "ds", Key: store.StringKey("k")}
			var msgs []queue.Message
			for i, op := range []store.Op{
				store.Put(key("before"), jsonDoc(t, counter{N: 1})),
				store.Put(foreign, jsonDoc(t, counter{N: 7})),
				store.Put(key("after"), jsonDoc(t, counter{N: 2})),
			} {
				value := accepted.Append(nil, &accepted.Record{RequestID: "r", Index: i, AcceptedAt: at, Op: op}, "")
				msgs = append(msgs, queue.Message{Key: accepted.MessageKey(op.Addr), Value: value})
			}
			if err := pub.Publish(context.Background(), msgs); err != nil {
				t.Fatal(err)
			}
			c, _ := b.Consumer(topic, group)
			dlq, _ := b.Publisher(dlqTopic)
			opts := &worker.Options{BackoffBase: time.Millisecond}
			if also {
				opts.AlsoApply = []string{"es"}
			}
			w, err := worker.New("m", c, svc, dlq, opts)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Run(context.Background()) }()
			deadline := time.Now().Add(time.Minute) // a hang guard, not a speed assertion
			for b.Committed(topic, group)[0] != int64(len(msgs)) {
				if time.Now().After(deadline) {
					t.Fatal("the worker did not commit the three records")
				}
				time.Sleep(time.Millisecond)
			}
			if err := w.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			res, err := svc.Do(context.Background(), []store.Op{store.Read(key("before")), store.Read(foreign), store.Read(key("after"))}, store.WaitApplied)
			if err != nil {
				t.Fatal(err)
			}
			wantForeign := store.Absent
			if also {
				wantForeign = store.Found
			}
			if res[0].Outcome != store.Found || res[1].Outcome != wantForeign || res[2].Outcome != store.Found {
				t.Fatalf("after the worker: %v %v %v, want found, %v, found", res[0].Outcome, res[1].Outcome, res[2].Outcome, wantForeign)
			}
			dead := b.Messages(dlqTopic)
			if also {
				if len(dead) != 0 {
					t.Fatalf("%d dead letters, want none", len(dead))
				}
				return
			}
			if len(dead) != 1 {
				t.Fatalf("%d dead letters, want the record of store es", len(dead))
			}
			d := dead[0]
			if header(d, worker.HeaderReason) != worker.ReasonOtherStore || header(d, worker.HeaderErrorKind) != "invalid" ||
				header(d, worker.HeaderAttempts) != "0" || header(d, worker.HeaderOffset) != "1" {
				t.Errorf("dead letter headers %q, want reason other_store, kind invalid, attempts 0, offset 1", d.Headers)
			}
			if string(d.Value) != string(msgs[1].Value) || string(d.Key) != string(msgs[1].Key) {
				t.Error("the dead letter is not a copy of the record")
			}
		})
	}
}

func TestWorkerDeadLetterFailureStopsBeforeCommittingThePoison(t *testing.T) {
	r := newRig(t, nil, 1)
	r.accept(t, store.Put(key("a"), jsonDoc(t, counter{N: 1})), store.Merge(key("b"), progFail, jsonDoc(t, counter{N: 1})),
		store.Put(key("c"), jsonDoc(t, counter{N: 1})))
	// Every publish now goes to the dead-letter topic: make both attempts fail.
	down := &queue.Error{Kind: queue.Unavailable, Queue: dlqTopic, Err: errors.New("broker down")}
	r.b.FailNext(memqueue.OpPublish, down)
	r.b.FailNext(memqueue.OpPublish, down)
	c, _ := r.b.Consumer(topic, group)
	dlq, _ := r.b.Publisher(dlqTopic)
	w, err := worker.New("m", c, r.svc, dlq, &worker.Options{MaxAttempts: 2, BackoffBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); !errors.Is(err, down) {
		t.Fatalf("Run with an unwritable dead letter: %v, want the publish error", err)
	}
	_ = c.Close()
	// The records before the poison are committed, the poison and what follows are not.
	if got := r.b.Committed(topic, group)[0]; got != 1 {
		t.Fatalf("committed offset %d, want 1: just past the record before the poison", got)
	}
	stop := r.worker(t, nil)
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(r.b.Messages(dlqTopic)); n != 1 {
		t.Fatalf("%d dead letters after the restart, want the poison once", n)
	}
}

// A record failing retryably holds back the later records of its address in the same fetch,
// so they are applied after it, in order.
func TestWorkerRetryKeepsPerKeyOrder(t *testing.T) {
	rec := &recording{seqs: map[store.Address][]int{}}
	f := &flaky{Store: memstore.New(), failFirst: map[store.Address]int{}}
	rec.Store = f
	r := newRig(t, rec, 2)
	var ops []store.Op
	for seq := 1; seq <= 4; seq++ {
		for _, k := range []string{"a", "b"} {
			ops = append(ops, store.Put(key(k), jsonDoc(t, counter{Seq: seq})))
		}
	}
	r.accept(t, ops...)
	f.mu.Lock()
	f.failFirst[key("a")] = 2 // the first put of a fails twice, then succeeds
	f.mu.Unlock()
	stop := r.worker(t, &worker.Options{MaxAttempts: 5})
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if got := rec.seqs[key(k)]; !slices.Equal(got, []int{1, 2, 3, 4}) {
			t.Fatalf("%s: puts applied as %v, want 1 2 3 4", k, got)
		}
	}
}

// TestWorkerWavesGroupByWholeAddress applies one fetch holding three puts on each of four
// records that share a key but not their namespace or dataset (and one more key): the
// records of one address go to successive waves, records of different addresses together,
// so the fetch forms exactly three waves and each record sees its puts in order.
func TestWorkerWavesGroupByWholeAddress(t *testing.T) {
	rec := &recording{Store: memstore.New(), seqs: map[store.Address][]int{}}
	r := newRig(t, rec, 1)
	addrs := []store.Address{
		key("k"),
		{Store: "m", Namespace: "ns", Dataset: "other", Key: store.StringKey("k")},
		{Store: "m", Namespace: "other", Dataset: "ds", Key: store.StringKey("k")},
		key("j"),
	}
	var ops []store.Op
	for seq := 1; seq <= 3; seq++ {
		for _, a := range addrs {
			ops = append(ops, store.Put(a, jsonDoc(t, counter{Seq: seq})))
		}
	}
	r.accept(t, ops...) // published before the worker starts: one fetch
	obs := &statsLog{}
	stop := r.worker(t, &worker.Options{Observer: obs})
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	stats := slices.Clone(obs.stats)
	obs.mu.Unlock()
	if len(stats) != 1 || stats[0].Records != len(ops) || stats[0].Waves != 3 {
		t.Fatalf("fetches %+v, want one of %d records in 3 waves", stats, len(ops))
	}
	for _, a := range addrs {
		if got := rec.seqs[a]; !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("%v: puts applied as %v, want 1 2 3", a, got)
		}
	}
}
