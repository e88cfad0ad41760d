package faultsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestFaultClusterNodeKill is issue 31's proof of a sink given every node of a three-node
// Elasticsearch cluster (escluster, `urls:`): one pipeline (PostgreSQL -> the cluster, its
// indices with one replica) runs under the suite's write load plus pgbench (a custom script
// upserting and deleting rows of the items table at a fixed rate), and in turn the first
// configured node, the node holding the items index's primary shard and the elected master
// are killed (kill -9). While each node is down documents must keep being written -- the
// pipeline's applied events grow by a few hundred and the node stays down at least
// nodeDownAtLeast -- and the pipeline's status must show its indices' health yellow (when the
// node held a copy of one of them); then the node is started again, the load stopped, and the
// index must equal the table row by row, with no document's version lower than before the
// kill. The longest pause of the applied events around each kill is measured and logged,
// never asserted. The cluster is put back to three nodes, at least yellow, whatever happened.
func TestFaultClusterNodeKill(t *testing.T) {
	srv := testenv.RequireFaults(t)
	urls := testenv.RequireCluster(t)
	if len(urls) != 3 {
		t.Fatalf("%s: want three nodes, got %d", testenv.ESClusterURLs, len(urls))
	}
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Fatal("the test needs pgbench on PATH (Debian: postgresql-client)")
	}
	cl := &cluster{t: t, srv: srv, urls: urls, hc: &http.Client{Timeout: 10 * time.Second}}
	cl.restore() // a previous run that died may have left a node down
	spec := caseSpec{source: "postgres", engine: estest.Elasticsearch, cluster: urls, seed: rand.Uint64N(1 << 40)}
	h := newHarness(t, srv, spec)
	t.Cleanup(cl.restore) // runs before the harness's clean-up: dropping needs the cluster
	h.run()
	pg := h.db.(*postgres)

	cases := []struct {
		name string
		pick func(ctx context.Context) (int, error)
	}{
		{"first configured node", func(context.Context) (int, error) { return 1, nil }},
		{"primary of the items index", func(ctx context.Context) (int, error) { return cl.primaryOf(ctx, h.indices[0]) }},
		{"elected master", cl.master},
	}
	for i, c := range cases {
		ok := t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			h.t = t // failures of the shared harness land in the subtest
			cl.t = t
			cl.killCase(h, pg, i, c.pick)
		})
		h.t, cl.t = t, t
		if !ok {
			break // the next case would start from an unknown state
		}
	}
	if s, stopped := h.rec.stopped(); stopped {
		t.Errorf("the pipeline stopped: %s", s)
	}
	if dl := h.deadLetters(); len(dl) > 0 {
		t.Errorf("%d dead letters: %s", len(dl), strings.Join(dl, "; "))
	}
}

// nodeDownAtLeast is how long a killed node stays down at least: the pipeline must write
// meanwhile, not only in the moment before the cluster noticed.
const nodeDownAtLeast = 20 * time.Second

// progressDuringOutage is how many more events the pipeline must have applied while the node
// is down (the load commits about 50 transactions a second).
const progressDuringOutage = 200

// outageDeadline bounds the wait for that progress (and for the yellow status).
const outageDeadline = 3 * time.Minute

func (cl *cluster) killCase(h *harness, pg *postgres, i int, pick func(context.Context) (int, error)) {
	t := cl.t
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	began := time.Now()
	samp := startEventSampler(h.pipe.status)
	defer samp.stop()

	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	h.load.stop = make(chan struct{}) // the writers go on from where the last case left them
	h.load.start(lctx)
	pgb := startPgbench(lctx, t, pg.dsn, h.tables[0].name)
	stopLoad := func() {
		h.load.Stop()
		pgb.stop()
	}
	defer stopLoad()
	time.Sleep(3 * time.Second) // load shaping, not synchronization

	// Every copy started before the kill: a node lost while the other copy of a shard still
	// recovers (after the previous case) would make the index red, which no client writes through.
	if err := cl.waitGreen(ctx, h.indices); err != nil {
		t.Fatal(err)
	}
	node, err := pick(ctx)
	if err != nil {
		t.Fatalf("choosing the node: %v", err)
	}
	held, err := cl.holdsCopy(ctx, node, h.indices)
	if err != nil {
		t.Fatalf("reading the shards: %v", err)
	}
	before, err := cl.versions(ctx, h.indices)
	if err != nil {
		t.Fatalf("reading the versions before the kill: %v", err)
	}
	st := h.pipe.status()
	h.reconnectsAt, h.retriesAt = st.Reconnects, st.Progress.Retries
	atKill := st.Progress.Events
	h.mark("fault")
	killed := time.Now()
	if err := h.control("stop", "escluster", "--node", strconv.Itoa(node), "--mode", "kill"); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d killed (held a copy of the pipeline's indices: %v)", node, held)

	// Progress while the node is down; the status shows the indices' health degraded.
	sawDegraded := ""
	end := time.Now().Add(outageDeadline)
	for {
		s := h.pipe.status()
		if c := s.Cluster.Status; c == "yellow" || c == "red" {
			if sawDegraded == "" {
				t.Logf("status shows the indices %s %.1fs after the kill: %v", c, time.Since(killed).Seconds(), s.Cluster.Indices)
			}
			sawDegraded = c
		}
		progressed := s.Progress.Events >= atKill+progressDuringOutage
		if progressed && time.Since(killed) >= nodeDownAtLeast && (sawDegraded != "" || !held) {
			break
		}
		if time.Now().After(end) {
			t.Errorf("node %d down for %v: %d events applied since the kill (want %d), status showed the indices %q (held a copy: %v); health %s",
				node, outageDeadline, s.Progress.Events-atKill, progressDuringOutage, s.Cluster.Status, held, s.Health.Reason)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	during := h.pipe.status().Progress.Events - atKill
	restarting := time.Now()
	if err := h.control("start", "escluster", "--node", strconv.Itoa(node)); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	h.mark("healed")
	time.Sleep(loadAround)
	stopLoad()
	pause, first := samp.longestPause(killed.Add(-time.Second), restarting)

	diffs, err := h.convergeTo(markerID + 1 + int64(i))
	switch {
	case err != nil:
		t.Errorf("no convergence: %v", err)
	case len(diffs) > 0:
		if len(diffs) > 30 {
			diffs = append(diffs[:30], fmt.Sprintf("... and %d more", len(diffs)-30))
		}
		t.Errorf("the index differs from the table:\n  %s", strings.Join(diffs, "\n  "))
	}
	if err == nil {
		after, err := cl.versions(ctx, h.indices)
		if err != nil {
			t.Errorf("reading the versions after: %v", err)
		}
		for key, v := range before {
			if w, ok := after[key]; ok && w < v {
				t.Errorf("%s: version %d before the kill, %d after", key, v, w)
			}
		}
		if probs := h.checkHealth(healthWant{}); len(probs) > 0 {
			t.Errorf("health: %s", strings.Join(probs, "; "))
		}
	}
	t.Logf("kill -9 of node %d: longest pause of the applied events %.1fs (first event after the kill %.1fs later); "+
		"%d events while it was down (%.0fs), the node back %.0fs after its start; case %.0fs; health:%s",
		node, pause.Seconds(), first.Seconds(), during, restarting.Sub(killed).Seconds(), back.Sub(restarting).Seconds(),
		time.Since(began).Seconds(), h.rec.transitions(h.marks))
	if t.Failed() {
		t.Logf("pipeline log:%s", h.logs)
	}
}

// convergeTo is converge with a marker row of its own (one per case of a pipeline that lives
// through several): the marker's document arriving, then the index equal to the table.
func (h *harness) convergeTo(marker int64) ([]string, error) {
	return h.convergeOn(marker, uint64(marker))
}

// cluster is the test's view of escluster: which node is which, read from any node that answers.
type cluster struct {
	t    *testing.T
	srv  *testenv.Servers
	urls []string
	hc   *http.Client
}

// get reads path from the first node that answers with 200.
func (cl *cluster) get(ctx context.Context, path string, v any) error {
	var last error
	for _, u := range cl.urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(u, "/")+path, nil)
		if err != nil {
			return err
		}
		resp, err := cl.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		dec := json.NewDecoder(resp.Body)
		st := resp.StatusCode
		if st == http.StatusOK {
			err = dec.Decode(v)
		}
		resp.Body.Close()
		if st != http.StatusOK {
			last = fmt.Errorf("GET %s: status %d", path, st)
			continue
		}
		return err
	}
	return last
}

// nodeNumbers maps the cluster's node names to their numbers (the position of their http
// address in urls, plus one).
func (cl *cluster) nodeNumbers(ctx context.Context) (map[string]int, error) {
	var ans struct {
		Nodes map[string]struct {
			Name string
			HTTP struct {
				PublishAddress string `json:"publish_address"`
			}
		}
	}
	if err := cl.get(ctx, "/_nodes/http", &ans); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, n := range ans.Nodes {
		for i, u := range cl.urls {
			pu, err := url.Parse(u)
			if err == nil && strings.HasSuffix(n.HTTP.PublishAddress, ":"+pu.Port()) {
				out[n.Name] = i + 1
			}
		}
	}
	return out, nil
}

func (cl *cluster) numberOf(ctx context.Context, name string) (int, error) {
	nums, err := cl.nodeNumbers(ctx)
	if err != nil {
		return 0, err
	}
	n, ok := nums[name]
	if !ok {
		return 0, fmt.Errorf("node %q is none of %v", name, cl.urls)
	}
	return n, nil
}

func (cl *cluster) master(ctx context.Context) (int, error) {
	var ans []struct{ Node string }
	if err := cl.get(ctx, "/_cat/master?format=json", &ans); err != nil {
		return 0, err
	}
	if len(ans) != 1 {
		return 0, fmt.Errorf("_cat/master: %d answers", len(ans))
	}
	return cl.numberOf(ctx, ans[0].Node)
}

type shardCopy struct {
	Index, Shard, Prirep, State, Node string
}

func (cl *cluster) shards(ctx context.Context, indices []string) ([]shardCopy, error) {
	var ans []shardCopy
	err := cl.get(ctx, "/_cat/shards/"+strings.Join(indices, ",")+"?format=json&h=index,shard,prirep,state,node", &ans)
	return ans, err
}

// primaryOf is the node holding index's primary shard (started).
func (cl *cluster) primaryOf(ctx context.Context, index string) (int, error) {
	sh, err := cl.shards(ctx, []string{index})
	if err != nil {
		return 0, err
	}
	for _, s := range sh {
		if s.Prirep == "p" && s.State == "STARTED" {
			return cl.numberOf(ctx, s.Node)
		}
	}
	return 0, fmt.Errorf("%s: no started primary in %v", index, sh)
}

// holdsCopy reports whether node holds a copy of a shard of indices.
func (cl *cluster) holdsCopy(ctx context.Context, node int, indices []string) (bool, error) {
	sh, err := cl.shards(ctx, indices)
	if err != nil {
		return false, err
	}
	nums, err := cl.nodeNumbers(ctx)
	if err != nil {
		return false, err
	}
	for _, s := range sh {
		if nums[s.Node] == node {
			return true, nil
		}
	}
	return false, nil
}

// versions reads every document's version of indices ("index/_id" -> _version).
func (cl *cluster) versions(ctx context.Context, indices []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, idx := range indices {
		var ans struct {
			Hits struct {
				Hits []struct {
					ID      string `json:"_id"`
					Version int64  `json:"_version"`
				}
			}
		}
		if err := cl.get(ctx, "/"+idx+"/_search?version=true&_source=false&size="+strconv.Itoa(maxDocs), &ans); err != nil {
			return nil, err
		}
		for _, hit := range ans.Hits.Hits {
			out[idx+"/"+hit.ID] = hit.Version
		}
	}
	return out, nil
}

// waitGreen waits (bounded by three minutes) for indices to be green.
func (cl *cluster) waitGreen(ctx context.Context, indices []string) error {
	var ans struct{ Status string }
	end := time.Now().Add(3 * time.Minute)
	for {
		err := cl.get(ctx, "/_cluster/health/"+strings.Join(indices, ",")+"?wait_for_status=green&timeout=20s", &ans)
		if err == nil && ans.Status == "green" {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("the indices are not green within 3m before the kill: %q (%v)", ans.Status, err)
		}
		time.Sleep(time.Second)
	}
}

// restore starts every node that does not answer and waits for three nodes, at least yellow.
func (cl *cluster) restore() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for i, u := range cl.urls {
		if cl.answers(ctx, u) {
			continue
		}
		if out, err := cl.srv.Output("start", "escluster", "--node", strconv.Itoa(i+1)); err != nil {
			cl.t.Errorf("restoring the cluster: testenv start escluster --node %d: %v\n%s", i+1, err, out)
		}
	}
	var ans struct {
		Status        string
		NumberOfNodes int `json:"number_of_nodes"`
	}
	end := time.Now().Add(5 * time.Minute)
	for {
		err := cl.get(ctx, "/_cluster/health?wait_for_nodes=3&wait_for_status=yellow&timeout=20s", &ans)
		if err == nil && ans.NumberOfNodes == 3 && (ans.Status == "green" || ans.Status == "yellow") {
			return
		}
		if time.Now().After(end) {
			cl.t.Errorf("restoring the cluster: %d nodes, %q (%v)", ans.NumberOfNodes, ans.Status, err)
			return
		}
		time.Sleep(time.Second)
	}
}

func (cl *cluster) answers(ctx context.Context, u string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	resp, err := cl.hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// eventSampler samples the pipeline's applied events every 100ms, to measure pauses.
type eventSampler struct {
	mu      sync.Mutex
	at      []time.Time
	events  []int64
	done    chan struct{}
	stopped sync.WaitGroup
}

func startEventSampler(status func() cdc.Status) *eventSampler {
	s := &eventSampler{done: make(chan struct{})}
	s.stopped.Add(1)
	go func() {
		defer s.stopped.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			n := status().Progress.Events
			s.mu.Lock()
			s.at, s.events = append(s.at, time.Now()), append(s.events, n)
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *eventSampler) stop() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.stopped.Wait()
}

// longestPause is the longest time between two increases of the applied events within
// [from, to] (an increase at from's side counts from from), and the time from from to the first increase.
func (s *eventSampler) longestPause(from, to time.Time) (longest, first time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := from
	firstSeen := false
	for i := 1; i < len(s.at); i++ {
		if s.at[i].Before(from) || s.at[i].After(to) || s.events[i] == s.events[i-1] {
			continue
		}
		if d := s.at[i].Sub(last); d > longest {
			longest = d
		}
		if !firstSeen {
			first, firstSeen = s.at[i].Sub(from), true
		}
		last = s.at[i]
	}
	if d := to.Sub(last); d > longest {
		longest = d
	}
	return longest, first
}

// pgbench runs pgbench with a script of upserts and deletes of rows of the items table (ids
// from pgbenchBase, out of the writers' ranges) at a fixed rate until stopped.
type pgbench struct {
	cmd  *exec.Cmd
	out  *logBuffer
	once sync.Once
}

const (
	pgbenchBase = 500_000_000
	pgbenchRate = "20" // transactions per second, over two clients
)

func startPgbench(ctx context.Context, t *testing.T, dsn, table string) *pgbench {
	t.Helper()
	q := `"` + strings.ReplaceAll(table, `"`, `""`) + `"`
	script := fmt.Sprintf(`\set id random(1, 300)
\set n random(-1000000, 1000000)
\set op random(1, 10)
\if :op = 1
DELETE FROM %[1]s WHERE id = %[2]d + :id;
\else
INSERT INTO %[1]s (id, n, label, flag) VALUES (%[2]d + :id, :n, 'pgbench', :op > 5)
  ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n, label = EXCLUDED.label, flag = EXCLUDED.flag;
\endif
`, q, pgbenchBase)
	f := filepath.Join(t.TempDir(), "load.sql")
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &pgbench{out: &logBuffer{}}
	p.cmd = exec.CommandContext(ctx, "pgbench", "-n", "-f", f, "-c", "2", "-R", pgbenchRate, "-T", "3600", dsn)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting pgbench: %v", err)
	}
	return p
}

// stop ends pgbench (its transactions in flight commit or not: the comparison reads the table).
func (p *pgbench) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
}
