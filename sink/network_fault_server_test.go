package sink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// Networks that misbehave between the sink and the engine (issue 31, item 7): a real
// PostgreSQL pipeline (cdc.Runner with its default backoff) writes two tables through a
// faultproxy.TCPProxy into Elasticsearch, the sink on its default timeouts, while a writer
// keeps changing the tables. The cases: every connection reset every 2 s for 30 s (documents
// keep being written during the flapping), and a black hole of 20 s (writes resume soon after
// the network returns). Each ends with both indices equal to their tables row by row.

// netRig is one such pipeline.
type netRig struct {
	t      *testing.T
	node   *mirrortest.Node
	proxy  *faultproxy.TCPProxy
	tables []*mirrortest.Postgres
	index  []string
	k      *Sink
	obs    *netObserver
	reqs   *countingTransport
	done   <-chan error
	stop   func()

	nextID   atomic.Int64 // the writer's next new row
	writerMu sync.Mutex
}

// maxNetRows bounds the ids the writer uses (the comparison reads 1..maxNetRows).
const maxNetRows = 3000

// netTables is how many tables the pipeline captures: a claim's cost grew with it.
const netTables = 6

// netLatency is added each way to every chunk through the proxy: a cluster some way off
// (a 100ms round trip), where a claim's requests add up.
const netLatency = 50 * time.Millisecond

func newNetRig(t *testing.T) *netRig {
	testenv.RequireFaults(t)
	dsn := testenv.Require(t, testenv.PostgresDSN)
	url := testenv.Require(t, testenv.ElasticsearchURL)
	node := &mirrortest.Node{Node: estest.Connect(t, estest.Elasticsearch, url)}
	node.EnforceAutoCreateRule(t)
	sfx := estest.RandomHex(t, 4)
	prefix := "h5-net-" + sfx
	node.DeleteAtCleanup(t, prefix+"*")

	r := &netRig{t: t, node: node, obs: &netObserver{}}
	var names []string
	for i := range netTables {
		name := fmt.Sprintf("h5_net_%s_%d", sfx, i)
		tb := mirrortest.NewPostgres(t, dsn, name)
		tb.Exec(t, tb.Insert(1, 50)...)
		r.tables = append(r.tables, tb)
		names = append(names, name)
	}
	r.nextID.Store(51)
	src := pgSource(t, dsn, "h5_net_"+sfx, names...)

	proxyTarget := strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	p, err := faultproxy.NewTCP(strings.TrimSuffix(proxyTarget, "/"), faultproxy.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	r.proxy = p
	p.SetLatency(faultproxy.Both, netLatency)

	// The sink on its defaults (request_timeout 60s, connect_timeout 10s), its client counted.
	cfg := Config{ID: "h5-net", URL: "http://" + p.Addr(), Index: prefix + "-{table}", Auth: Auth{Type: AuthNone},
		Shards: 1, Replicas: estest.Ptr(0), Mapping: MappingConfig{Decimal: "keyword", Uint64: "keyword"}}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	client, err := newTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	r.reqs = &countingTransport{next: client}
	st := statestore.NewMemory()
	r.k, err = New(cfg, "h5-net", st, &Options{Transport: r.reqs, Observer: r.obs})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		idx, err := IndexName(cfg.Index, cdc.TableID{Database: "postgres", Schema: "public", Table: n})
		if err != nil {
			t.Fatal(err)
		}
		r.index = append(r.index, idx)
	}

	run, err := cdc.NewRunner("h5-net", src, r.k, st, &memDLQ{}, &cdc.RunnerOptions{BatchMaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run.Run(ctx) }()
	r.done = done
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(2 * time.Minute):
				t.Errorf("Run did not return within 2 minutes of its context ending")
			}
		})
	}
	t.Cleanup(r.stop)
	r.converged("the snapshot")
	return r
}

// ended reports the runner's end, if it ended.
func (r *netRig) ended() error {
	select {
	case err := <-r.done:
		if err == nil {
			err = errors.New("Run returned nil")
		}
		return err
	default:
		return nil
	}
}

// converged waits until both indices equal their tables.
func (r *netRig) converged(what string) {
	r.t.Helper()
	for i, tb := range r.tables {
		mirrortest.WaitFor(r.t, what+": "+tb.Name(), r.ended, r.node.Converged(r.t, r.index[i], tb, maxNetRows))
	}
}

// write commits one transaction of the load: a new row in one table, an update of an older
// row and now and then a delete in the other.
func (r *netRig) write(rnd *rand.Rand) {
	r.writerMu.Lock()
	defer r.writerMu.Unlock()
	id := r.nextID.Add(1) - 1
	if id > maxNetRows {
		return
	}
	n := int64(len(r.tables))
	a, b := r.tables[id%n], r.tables[(id+1)%n]
	old := 1 + rnd.Int64N(id-1)
	stmts := append(a.Insert(int(id), int(id)), fmt.Sprintf("UPDATE %s SET qty = qty + 1, name = name || '+' WHERE id = %d", b.Name(), old))
	if rnd.IntN(5) == 0 {
		stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE id = %d", b.Name(), 1+rnd.Int64N(id-1)))
	}
	r.tables[0].Exec(r.t, stmts...) // one transaction (both tables live in one database)
}

// load writes a transaction every 50ms until the returned stop is called.
func (r *netRig) load() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rnd := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for ctx.Err() == nil {
			r.write(rnd)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// netObserver records when _bulk requests applied documents and when indices were claimed.
type netObserver struct {
	mu      sync.Mutex
	applied []time.Time // _bulk requests answered 200 with at least one document applied
	failed  int         // _bulk requests without an answer
	claims  []time.Time
}

func (o *netObserver) BulkDone(s BulkStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case s.Status == http.StatusOK && s.Applied+s.Superseded > 0:
		o.applied = append(o.applied, time.Now())
	case s.Status == 0:
		o.failed++
	}
}

func (o *netObserver) Claimed(string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.claims = append(o.claims, time.Now())
}

// between counts the times in [from, to).
func between(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, x := range ts {
		if !x.Before(from) && x.Before(to) {
			n++
		}
	}
	return n
}

// appliedBetween counts the _bulk requests that applied documents in [from, to).
func (o *netObserver) appliedBetween(from, to time.Time) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return between(o.applied, from, to)
}

// firstAppliedAfter is the first _bulk that applied documents at or after t (zero if none).
func (o *netObserver) firstAppliedAfter(t time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range o.applied {
		if !x.Before(t) {
			return x
		}
	}
	return time.Time{}
}

// countingTransport counts the requests sent to the cluster by kind ("GET /{index}",
// "POST /_aliases", ...), with whether an answer came.
type countingTransport struct {
	next esapi.Transport
	mu   sync.Mutex
	log  []reqRecord
}

type reqRecord struct {
	at       time.Time
	kind     string
	answered bool
}

func (c *countingTransport) Perform(req *http.Request) (*http.Response, error) {
	res, err := c.next.Perform(req)
	c.mu.Lock()
	c.log = append(c.log, reqRecord{at: time.Now(), kind: requestKind(req), answered: err == nil})
	c.mu.Unlock()
	return res, err
}

// requestKind names a request by method and path, index names replaced by {index}.
func requestKind(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	for i, p := range parts {
		if p != "" && !strings.HasPrefix(p, "_") {
			parts[i] = "{index}"
		}
	}
	return req.Method + " /" + strings.Join(parts, "/")
}

// summary counts the requests of [from, to) by kind, and how many got no answer.
func (c *countingTransport) summary(from, to time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, lost := map[string]int{}, map[string]int{}
	for _, r := range c.log {
		if r.at.Before(from) || !r.at.Before(to) {
			continue
		}
		n[r.kind]++
		if !r.answered {
			lost[r.kind]++
		}
	}
	var kinds []string
	for k := range n {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "\n  %-28s %4d (%d without an answer)", k, n[k], lost[k])
	}
	return b.String()
}

// TestFaultSinkConnectionFlapping: every connection between the sink and Elasticsearch is
// reset every 2 s for 30 s. Documents must keep being written during the flapping (a claim
// after every reconnect, before the next write, has to fit between two resets), and the
// indices equal their tables at the end.
func TestFaultSinkConnectionFlapping(t *testing.T) {
	r := newNetRig(t)
	stopLoad := r.load()
	defer stopLoad()
	time.Sleep(2 * time.Second) // load before the fault (shaping, not synchronisation)
	const period, window = 2 * time.Second, 30 * time.Second
	start := time.Now()
	r.proxy.SetResetEvery(period)
	time.Sleep(window) // the fault itself
	r.proxy.SetResetEvery(0)
	end := time.Now()
	time.Sleep(2 * time.Second)
	stopLoad()
	r.converged("after the flapping")

	firstReset := start.Add(period)
	mid := start.Add(window / 2)
	early, late := r.obs.appliedBetween(firstReset, mid), r.obs.appliedBetween(mid, end)
	r.obs.mu.Lock()
	claims, failed := between(r.obs.claims, start, end), r.obs.failed
	r.obs.mu.Unlock()
	t.Logf("flapping %v every %v: %d resets; _bulk applied %d + %d (first half, second half), %d _bulk without an answer, %d index claims; requests during the window:%s",
		window, period, r.proxy.Stats().Resets, early, late, failed, claims, r.reqs.summary(start, end))
	if early == 0 || late == 0 {
		t.Errorf("no documents written during the flapping (first half %d _bulk, second half %d)", early, late)
	}
}

// TestFaultSinkBlackhole: the path to Elasticsearch swallows every byte for 20 s, then works
// again (connections that lived through it are kept, as a real network keeps them). Writes
// must resume soon after the network returns; the measured time is logged.
func TestFaultSinkBlackhole(t *testing.T) {
	r := newNetRig(t)
	stopLoad := r.load()
	defer stopLoad()
	time.Sleep(2 * time.Second)
	r.proxy.SetBlackhole(faultproxy.Both)
	time.Sleep(20 * time.Second) // the fault itself
	r.proxy.SetBlackhole(faultproxy.None)
	healed := time.Now()
	const resumeBound = 30 * time.Second
	var resumed time.Time
	for time.Since(healed) < resumeBound && resumed.IsZero() {
		if err := r.ended(); err != nil {
			t.Fatalf("the pipeline stopped: %v", err)
		}
		resumed = r.obs.firstAppliedAfter(healed)
		time.Sleep(50 * time.Millisecond)
	}
	stopLoad()
	if resumed.IsZero() {
		t.Errorf("writes did not resume within %v of the network returning; requests since:%s", resumeBound, r.reqs.summary(healed, time.Now()))
	} else {
		t.Logf("writes resumed %v after the network returned; requests between:%s", resumed.Sub(healed).Round(time.Millisecond), r.reqs.summary(healed, resumed.Add(time.Millisecond)))
	}
	r.converged("after the black hole")
}
