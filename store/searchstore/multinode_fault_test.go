package searchstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store/driver"
)

// TestFaultClusterNodeKill is issue 31's proof of NewFromURLs on a three-node Elasticsearch
// cluster (escluster): a Store given every node's URL runs a loop of puts and gets (two
// workers, each put then reading back a record acknowledged before) on an index of one shard
// and one replica, and the node holding the primary is killed (kill -9); then, the index
// green again, the first URL's node. Calls go on
// succeeding while the node is down (a few hundred, the node down at least 15s); a call may
// fail only when it was in flight at the kill -- or began within staleGrace after it, on a
// pooled connection to the dead node the client had not yet seen closed -- and then only
// retryable (KindUnavailable, or KindOutcomeUnknown for a put: the store's rules; a request
// that reached the dead node's socket is never sent again, not even a read); after the node
// is back, every
// acknowledged put reads back as written. The cluster is put back to three nodes, at least
// yellow, whatever happened.
func TestFaultClusterNodeKill(t *testing.T) {
	srv := testenv.RequireFaults(t)
	urls := testenv.RequireCluster(t)
	cl := &storeCluster{t: t, srv: srv, urls: urls, hc: &http.Client{Timeout: 10 * time.Second}}
	cl.restore()
	t.Cleanup(cl.restore)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	index := fmt.Sprintf("h7-store-%d", time.Now().UnixNano())
	if st, body := cl.do(ctx, http.MethodPut, "/"+index, `{"settings":{"number_of_shards":1,"number_of_replicas":1}}`); st != http.StatusOK {
		t.Fatalf("creating %s: status %d %s", index, st, body)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl.do(ctx, http.MethodDelete, "/"+index, "")
	})
	if st, body := cl.do(ctx, http.MethodGet, "/_cluster/health/"+index+"?wait_for_status=green&timeout=60s", ""); st != http.StatusOK {
		t.Fatalf("%s not green: status %d %s", index, st, body)
	}

	s, err := NewFromURLs(urls, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	cases := []struct {
		name string
		pick func(ctx context.Context) (int, error)
	}{
		{"primary", func(ctx context.Context) (int, error) { return cl.primaryOf(ctx, index) }},
		{"first_configured_node", func(context.Context) (int, error) { return 1, nil }},
	}
	for _, c := range cases {
		if !t.Run(c.name, func(t *testing.T) {
			cl.t = t
			killUnderPutsAndGets(ctx, t, cl, s, index, c.name, c.pick)
		}) {
			break
		}
	}
	cl.t = t
}

// killUnderPutsAndGets kills the node pick names under the loop of puts and gets, starts it
// again, and checks the calls and the acknowledged puts.
func killUnderPutsAndGets(ctx context.Context, t *testing.T, cl *storeCluster, s *Store, index, what string, pick func(context.Context) (int, error)) {
	srv := cl.srv
	// Both copies started before the kill: a node lost while the other copy still recovers
	// would make the index red, which no client can write through.
	if st, body := cl.do(ctx, http.MethodGet, "/_cluster/health/"+index+"?wait_for_status=green&timeout=180s", ""); st != http.StatusOK {
		t.Fatalf("%s not green before the kill: status %d %s", index, st, body)
	}
	loop := &putGetLoop{s: s, index: index, prefix: what}
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	loop.start(lctx, 2)
	time.Sleep(3 * time.Second) // load shaping, not synchronization

	node, err := pick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killAt := time.Now()
	if out, err := srv.Output("stop", "escluster", "--node", strconv.Itoa(node), "--mode", "kill"); err != nil {
		t.Fatalf("killing node %d: %v\n%s", node, err, out)
	}
	killed := time.Now()
	okAtKill := loop.ok.Load()
	end := time.Now().Add(3 * time.Minute)
	for time.Since(killed) < 15*time.Second || loop.ok.Load() < okAtKill+200 {
		if time.Now().After(end) {
			t.Errorf("node %d down for 3m: %d calls succeeded since the kill, want 200", node, loop.ok.Load()-okAtKill)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	during := loop.ok.Load() - okAtKill
	down := time.Since(killed)
	restarting := time.Now()
	if out, err := srv.Output("start", "escluster", "--node", strconv.Itoa(node)); err != nil {
		t.Fatalf("starting node %d: %v\n%s", node, err, out)
	}
	back := time.Since(restarting)
	time.Sleep(3 * time.Second)
	lcancel()
	loop.wait()

	// Failures: only calls in flight at the kill (or sent on a connection it left stale), only
	// retryable kinds.
	var allowed int
	var kinds []string
	for _, f := range loop.failures() {
		inFlight := f.began.Before(killed.Add(staleGrace)) && f.ended.After(killAt)
		k := driver.KindOf(f.err)
		retryable := k == driver.KindUnavailable || (f.put && k == driver.KindOutcomeUnknown)
		if !inFlight || !retryable {
			t.Errorf("%s began %.1fs after the kill, ended %.1fs after it: %v (kind %v)",
				f.op(), f.began.Sub(killAt).Seconds(), f.ended.Sub(killAt).Seconds(), f.err, k)
			continue
		}
		allowed++
		kinds = append(kinds, fmt.Sprintf("%s %v, began %+.1fs from the kill", f.op(), k, f.began.Sub(killAt).Seconds()))
	}
	pause := loop.longestPause(killAt.Add(-time.Second), restarting)

	// Every acknowledged put reads back as written.
	acked := loop.ackedKeys()
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	for i := 0; i < len(acked); i += 100 {
		var addrs []driver.Address
		for _, k := range acked[i:min(i+100, len(acked))] {
			addrs = append(addrs, addrOf(index, k))
		}
		rr, err := s.Read(rctx, addrs)
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		for j, r := range rr {
			key := acked[i+j]
			if r.Err != nil || !r.Found || !bytes.Equal(r.Doc.JSON, docOf(key)) {
				t.Errorf("acknowledged put %s: found %v, %s, %v", key, r.Found, r.Doc.JSON, r.Err)
			}
		}
	}
	t.Logf("kill -9 of node %d (%s): %d calls succeeded while it was down (%.0fs), longest pause between successes %.1fs; "+
		"%d calls in all, %d failed (in flight at the kill or within %v after it on a stale connection, retryable: %s); %d acknowledged puts read back; node back %.0fs after its start",
		node, what, during, down.Seconds(), pause.Seconds(), loop.calls.Load(), allowed, staleGrace, strings.Join(kinds, ", "), len(acked), back.Seconds())
}

// staleGrace is how long after the kill a call may still fail on a pooled connection to the
// dead node: the kernel closed its sockets, but the client's transport sees the close only
// when its reader runs (on a loaded machine, a fraction of a second), and a request written to
// such a connection meanwhile is reset.
const staleGrace = 3 * time.Second

func docOf(key string) []byte { return []byte(`{"k":"` + key + `","v":1}`) }

// putGetLoop: workers each putting a fresh key, then reading back a key acknowledged before.
type putGetLoop struct {
	s      *Store
	index  string
	prefix string // of the keys: one per loop
	wg     sync.WaitGroup
	next   atomic.Int64
	ok     atomic.Int64
	calls  atomic.Int64

	mu    sync.Mutex
	acked []string
	fails []callFailure
	okAt  []time.Time
}

type callFailure struct {
	put          bool
	key          string
	began, ended time.Time
	err          error
}

func (f callFailure) op() string {
	if f.put {
		return "put " + f.key
	}
	return "get " + f.key
}

func (l *putGetLoop) start(ctx context.Context, workers int) {
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				key := fmt.Sprintf("%s-w%d-%d", l.prefix, w, l.next.Add(1))
				l.call(ctx, true, key)
				if k := l.pick(n); k != "" && ctx.Err() == nil {
					l.call(ctx, false, k)
				}
			}
		}()
	}
}

// pick is an acknowledged key (the n-th from the end, wrapping).
func (l *putGetLoop) pick(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acked) == 0 {
		return ""
	}
	return l.acked[len(l.acked)-1-n%len(l.acked)]
}

func (l *putGetLoop) call(ctx context.Context, put bool, key string) {
	a := addrOf(l.index, key)
	began := time.Now()
	var err error
	if put {
		var res []driver.WriteResult
		res, err = l.s.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: a, Doc: driver.Document{JSON: docOf(key)}}}, driver.WriteOptions{})
		if err == nil {
			err = res[0].Err
		}
	} else {
		var rr []driver.ReadResult
		rr, err = l.s.Read(ctx, []driver.Address{a})
		if err == nil {
			err = rr[0].Err
			if err == nil && (!rr[0].Found || !bytes.Equal(rr[0].Doc.JSON, docOf(key))) {
				err = fmt.Errorf("acknowledged record read back as found=%v %s", rr[0].Found, rr[0].Doc.JSON)
			}
		}
	}
	if ctx.Err() != nil {
		return // the loop's end, not the cluster's doing
	}
	l.calls.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.fails = append(l.fails, callFailure{put: put, key: key, began: began, ended: time.Now(), err: err})
		return
	}
	l.ok.Add(1)
	l.okAt = append(l.okAt, time.Now())
	if put {
		l.acked = append(l.acked, key)
	}
}

func (l *putGetLoop) wait() { l.wg.Wait() }

func (l *putGetLoop) failures() []callFailure {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]callFailure(nil), l.fails...)
}

func (l *putGetLoop) ackedKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...)
}

// longestPause is the longest time without a successful call within [from, to].
func (l *putGetLoop) longestPause(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, longest := from, time.Duration(0)
	for _, at := range l.okAt {
		if at.Before(from) || at.After(to) {
			continue
		}
		longest = max(longest, at.Sub(last))
		last = at
	}
	return max(longest, to.Sub(last))
}

// storeCluster is the test's view of escluster, read from any node that answers.
type storeCluster struct {
	t    *testing.T
	srv  *testenv.Servers
	urls []string
	hc   *http.Client
}

// do sends a request to the first node that answers.
func (cl *storeCluster) do(ctx context.Context, method, path, body string) (int, string) {
	last := "no node answered"
	for _, u := range cl.urls {
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(u, "/")+path, strings.NewReader(body))
		if err != nil {
			return 0, err.Error()
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.hc.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, b.String()
	}
	return 0, last
}

func (cl *storeCluster) primaryOf(ctx context.Context, index string) (int, error) {
	st, body := cl.do(ctx, http.MethodGet, "/_cat/shards/"+index+"?format=json&h=prirep,state,node", "")
	if st != http.StatusOK {
		return 0, fmt.Errorf("_cat/shards: status %d %s", st, body)
	}
	var shards []struct{ Prirep, State, Node string }
	if err := json.Unmarshal([]byte(body), &shards); err != nil {
		return 0, err
	}
	st, body = cl.do(ctx, http.MethodGet, "/_nodes/http", "")
	if st != http.StatusOK {
		return 0, fmt.Errorf("_nodes/http: status %d", st)
	}
	var nodes struct {
		Nodes map[string]struct {
			Name string
			HTTP struct {
				PublishAddress string `json:"publish_address"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &nodes); err != nil {
		return 0, err
	}
	for _, s := range shards {
		if s.Prirep != "p" || s.State != "STARTED" {
			continue
		}
		for _, n := range nodes.Nodes {
			if n.Name != s.Node {
				continue
			}
			for i, u := range cl.urls {
				if pu, err := url.Parse(u); err == nil && strings.HasSuffix(n.HTTP.PublishAddress, ":"+pu.Port()) {
					return i + 1, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("%s: no started primary on a known node (%s)", index, body)
}

// restore starts every node that does not answer and waits for three nodes, at least yellow.
func (cl *storeCluster) restore() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for i, u := range cl.urls {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
		resp, err := cl.hc.Do(req)
		rcancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				continue
			}
		}
		if out, err := cl.srv.Output("start", "escluster", "--node", strconv.Itoa(i+1)); err != nil {
			cl.t.Errorf("restoring the cluster: testenv start escluster --node %d: %v\n%s", i+1, err, out)
		}
	}
	end := time.Now().Add(5 * time.Minute)
	for {
		st, body := cl.do(ctx, http.MethodGet, "/_cluster/health?wait_for_nodes=3&wait_for_status=yellow&timeout=20s", "")
		if st == http.StatusOK {
			return
		}
		if time.Now().After(end) {
			cl.t.Errorf("restoring the cluster: status %d %s", st, body)
			return
		}
		time.Sleep(time.Second)
	}
}
