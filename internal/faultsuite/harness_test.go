package faultsuite

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/sink"
)

// A case: two tables on one source, seeded (the snapshot), a pipeline into one engine --
// through a fault proxy on each of its connections when the case breaks the network --, the
// write load, the fault, the load again, then the comparison and the health assertions.

// caseSpec chooses a case's servers.
type caseSpec struct {
	// cluster: the nodes of a multi-node cluster of engine (node 1 first), all in the sink's
	// urls, its indices with one replica (multinode_test.go); not with proxied.
	cluster []string

	source  string // "postgres" or "mariadb"
	engine  string // estest.Elasticsearch or estest.OpenSearch
	proxied bool   // the pipeline reaches both servers through a faultproxy.TCPProxy
	seed    uint64 // the tables' suffix, the load's values
	// defaults: the runner's and the sink's default settings (thresholds, intervals, request
	// timeouts) instead of the suite's, as a user's pipeline has them.
	defaults bool
}

func (c caseSpec) String() string {
	return fmt.Sprintf("%s->%s seed=%d", c.source, c.engine, c.seed)
}

// Bounds of a case; generous, since fault tests share two cores with six servers.
const (
	seedRows      = 10 // per writer and table: what the snapshot reads
	loadAround    = 2 * time.Second
	startDeadline = 3 * time.Minute // the snapshot applied
	// catchUpDeadline bounds the recovery after the fault is healed and the load stopped:
	// the marker row's document arriving.
	catchUpDeadline = 4 * time.Minute
	// equalDeadline bounds the wait, after the marker arrived, for the index to equal the
	// source; everything before the marker is applied by then, so only a divergence lasts.
	equalDeadline   = time.Minute
	healthyDeadline = time.Minute
	stopDeadline    = time.Minute
)

// markerID is the items row the case writes last, once the load stopped.
const markerID = 900_000_001

type harness struct {
	t    *testing.T
	spec caseSpec
	srv  *testenv.Servers
	sfx  string
	db   sourceDB
	eng  *engine
	// srcProxy and engProxy sit between the pipeline and its servers (proxied cases only).
	srcProxy, engProxy *faultproxy.TCPProxy
	tables             []*tableDef
	indices            []string       // per table
	cfg                *mirror.Config // one pipeline
	pipe               *pipeline
	logs               *logBuffer
	rec                *recorder
	load               *load

	cancel context.CancelFunc
	done   chan struct{} // closed when the pipeline's run returned runErr
	runErr error

	marks        map[string]time.Time // fault, healed, caught up
	reconnectsAt int64                // Status.Reconnects when the fault began
	retriesAt    int64                // Status.Progress.Retries when the fault began
	began        time.Time
}

func engineURL(t testing.TB, name string) string {
	for _, e := range estest.Engines() {
		if e.Name == name {
			return testenv.Require(t, e.Env)
		}
	}
	t.Fatalf("unknown engine %q", name)
	return ""
}

// newHarness creates the tables, seeds them, builds the pipeline (not yet running) and
// registers the clean-up: pipeline stopped, slot and publication dropped, tables dropped,
// indices deleted.
func newHarness(t *testing.T, srv *testenv.Servers, spec caseSpec) *harness {
	t.Helper()
	h := &harness{t: t, spec: spec, srv: srv, db: newSourceDB(t, spec.source), logs: &logBuffer{},
		marks: map[string]time.Time{}, began: time.Now()}
	var engURL string
	if len(spec.cluster) > 0 {
		engURL = spec.cluster[0]
	} else {
		engURL = engineURL(t, spec.engine)
	}
	h.eng = newEngine(spec.engine, engURL)
	node := estest.Connect(t, spec.engine, engURL)
	node.EnforceAutoCreateRule(t)

	r := rand.New(rand.NewPCG(spec.seed, 0x5eed))
	var b [4]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	h.sfx = hex.EncodeToString(b[:])
	h.tables = tablesFor(h.sfx)
	prefix := "flt-" + h.sfx
	node.DeleteAtCleanup(t, prefix+"*")
	for _, tb := range h.tables {
		idx, err := sink.IndexName(prefix+"-{table}", cdc.TableID{Table: tb.name})
		if err != nil {
			t.Fatal(err)
		}
		h.indices = append(h.indices, idx)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := h.db.exec(ctx, h.db.dropTables(h.tables)...); err != nil {
			t.Errorf("dropping the tables: %v", err)
		}
	})
	if err := h.db.exec(ctx, h.db.createTables(h.tables)...); err != nil {
		t.Fatalf("%s: creating the tables: %v", spec, err)
	}
	h.load = newLoad(h.db, h.tables, spec.seed)
	if err := h.load.seed(ctx, seedRows); err != nil {
		t.Fatalf("%s: %v", spec, err)
	}

	srcAddr, sinkURL := h.db.addr(), engURL
	if spec.proxied {
		u, err := url.Parse(engURL)
		if err != nil {
			t.Fatal(err)
		}
		if h.srcProxy, err = faultproxy.NewTCP(h.db.addr(), faultproxy.TCPOptions{}); err != nil {
			t.Fatal(err)
		}
		if h.engProxy, err = faultproxy.NewTCP(u.Host, faultproxy.TCPOptions{}); err != nil {
			t.Fatal(err)
		}
		srcAddr = h.srcProxy.Addr()
		u.Host = h.engProxy.Addr()
		sinkURL = u.String()
	}

	dir := t.TempDir()
	name := "flt-" + h.sfx
	pc := mirror.PipelineConfig{
		Name:   name,
		Source: h.db.sourceConfig(h.sfx, h.tables, srcAddr),
		Sink: sink.Config{ID: "flt", URL: sinkURL, Index: prefix + "-{table}", Auth: sink.Auth{Type: sink.AuthNone},
			Shards: 1, Replicas: estest.Ptr(0),
			RequestTimeout: sink.Duration(10 * time.Second), ConnectTimeout: sink.Duration(5 * time.Second)},
		DLQ: filepath.Join(dir, "dlq.jsonl"),
		Runner: mirror.RunnerConfig{BatchMaxEvents: 100, BatchMaxWait: 200 * time.Millisecond,
			BackpressureThreshold: time.Second, LagThreshold: 5 * time.Second, LagInterval: time.Second},
	}
	if spec.defaults {
		pc.Runner = mirror.RunnerConfig{}
		pc.Sink.RequestTimeout, pc.Sink.ConnectTimeout = 0, 0
	}
	if len(spec.cluster) > 0 {
		pc.Sink.URL, pc.Sink.URLs, pc.Sink.Replicas = "", spec.cluster, estest.Ptr(1)
	}
	if spec.engine == estest.Elasticsearch {
		// The Elasticsearch test build has neither scaled_float nor unsigned_long.
		pc.Sink.Mapping = sink.MappingConfig{Decimal: "keyword", Uint64: "keyword"}
	}
	h.cfg = &mirror.Config{State: filepath.Join(dir, "state.db"), Pipelines: []mirror.PipelineConfig{pc}}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := openPipeline(h.cfg, log)
	if err != nil {
		t.Fatalf("%s: building the pipeline: %v", spec, err)
	}
	h.pipe = p
	t.Cleanup(h.finish)
	return h
}

// run starts the pipeline and the recorder and waits until the snapshot is applied.
func (h *harness) run() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		h.runErr = h.pipe.run(ctx)
	}()
	h.rec = startRecorder(h.pipe.status)
	want := int64(2 * seedRows * loadWriters)
	if err := h.waitFor(startDeadline, "the snapshot", func() (bool, error) {
		st := h.pipe.status()
		return st.State == "streaming" && st.Progress.Events >= want, nil
	}); err != nil {
		h.t.Fatalf("%s: %v", h.spec, err)
	}
}

// waitFor polls ok every 200ms until it holds, the deadline passes or the pipeline stops.
func (h *harness) waitFor(deadline time.Duration, what string, ok func() (bool, error)) error {
	end := time.Now().Add(deadline)
	var last error
	for {
		done, err := ok()
		if done {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-h.done:
			return fmt.Errorf("waiting for %s: the pipeline stopped: %v", what, h.runErr)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(end) {
			if last != nil {
				return fmt.Errorf("%s did not happen within %v (last error: %v)", what, deadline, last)
			}
			return fmt.Errorf("%s did not happen within %v", what, deadline)
		}
	}
}

// mark notes a moment of the case (for the health assertions and the report).
func (h *harness) mark(name string) { h.marks[name] = time.Now() }

// withLoad runs the load around fault: loadAround before it, during it, loadAround after.
func (h *harness) withLoad(fault func()) {
	h.withLoadSteps([]step{{gap: loadAround}}, func(int) { fault() })
}

// withLoadSteps runs the load, and after each step's gap its fault (inject(i) returns when
// fault i is over), then loadAround more; the load is stopped when it returns.
func (h *harness) withLoadSteps(steps []step, inject func(i int)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.load.start(ctx)
	defer h.load.Stop()
	for i, s := range steps {
		time.Sleep(s.gap) // load shaping, not synchronization
		if i == 0 {
			st := h.pipe.status()
			h.reconnectsAt, h.retriesAt = st.Reconnects, st.Progress.Retries
			h.mark("fault")
		}
		inject(i)
	}
	h.mark("healed")
	time.Sleep(loadAround)
}

// converge writes the marker row, waits for its document (everything committed before it is
// then applied), then for the index to equal the source row by row. It returns the
// differences that remain at the deadline; err when the pipeline never caught up.
func (h *harness) converge() (diffs []string, err error) { return h.convergeOn(markerID, 1) }

// convergeOn is converge with the marker row's id and the random stream of its values.
func (h *harness) convergeOn(marker int64, stream uint64) (diffs []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpDeadline+equalDeadline+time.Minute)
	defer cancel()
	vals := []value{{s: fmt.Sprint(marker)}}
	r := rand.New(rand.NewPCG(h.spec.seed, stream))
	for _, c := range h.tables[0].cols[1:] {
		vals = append(vals, genValue(r, c))
	}
	if err := h.db.exec(ctx, h.db.upsert(h.tables[0], vals)); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoMarker, err)
	}
	if err := h.waitFor(catchUpDeadline, "the marker row's document", func() (bool, error) {
		return h.eng.exists(ctx, h.indices[0], fmt.Sprint(marker))
	}); err != nil {
		return nil, err
	}
	h.mark("caught up")
	end := time.Now().Add(equalDeadline)
	for {
		diffs, err = h.diff(ctx)
		if err == nil && len(diffs) == 0 {
			return nil, nil
		}
		if time.Now().After(end) {
			if err != nil {
				return nil, fmt.Errorf("comparing: %w", err)
			}
			return diffs, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (h *harness) diff(ctx context.Context) ([]string, error) {
	var out []string
	for i, t := range h.tables {
		rows, err := h.db.readRows(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("reading %s back: %w", t.name, err)
		}
		docs, err := h.eng.docs(ctx, h.indices[i])
		if err != nil {
			return nil, err
		}
		out = append(out, diffTable(h.db.name(), t, rows, docs)...)
	}
	return out, nil
}

// exists reports whether index holds a document with _id id.
func (e *engine) exists(ctx context.Context, index, id string) (bool, error) {
	b, st, err := e.do(ctx, http.MethodGet, "/"+index+"/_doc/"+url.PathEscape(id)+"?_source=false", nil)
	if err != nil || st == http.StatusNotFound {
		return false, err
	}
	var ans struct{ Found bool }
	if err := json.Unmarshal(b, &ans); err != nil {
		return false, fmt.Errorf("get %s/%s: status %d", index, id, st)
	}
	return ans.Found, nil
}

// healthWant is what a fault must have made the pipeline report.
type healthWant struct {
	// unhealthy: one of these reason classes between the fault and catching up (none: the
	// fault is too short for a 100ms poll to be sure to see it).
	unhealthy []string
	// during: the report must come while the fault lasts (before it healed), not only after.
	during bool
	// reconnect: the stream was reopened (Status.Reconnects grew).
	reconnect bool
	// ifMet: unhealthy is demanded only when the pipeline met the fault (a batch pushed back
	// or the stream reopened after it began): a short window of resets may fall between two
	// requests, and then there is nothing to report.
	ifMet bool
}

// checkHealth asserts the transitions: the expected report during the fault, never stopped,
// healthy and streaming at the end. It returns the problems found.
func (h *harness) checkHealth(w healthWant) []string {
	var out []string
	if s, ok := h.rec.stopped(); ok {
		out = append(out, "the pipeline stopped: "+s.String())
	}
	until, what := h.marks["caught up"], "between the fault and catching up"
	if w.during {
		until, what = h.marks["healed"], "while the fault lasted"
	}
	st := h.pipe.status()
	met := st.Progress.Retries > h.retriesAt || st.Reconnects > h.reconnectsAt
	if len(w.unhealthy) > 0 && (met || !w.ifMet) && !h.rec.sawUnhealthy(h.marks["fault"], until, w.unhealthy...) {
		out = append(out, fmt.Sprintf("never reported unhealthy (%s) %s", strings.Join(w.unhealthy, " or "), what))
	}
	if w.reconnect {
		if n := h.pipe.status().Reconnects; n <= h.reconnectsAt {
			out = append(out, fmt.Sprintf("the stream was not reopened (Status.Reconnects %d, %d at the fault)", n, h.reconnectsAt))
		}
	}
	if err := h.waitFor(healthyDeadline, "healthy and streaming at the end", func() (bool, error) {
		st := h.pipe.status()
		return st.Health.Healthy && st.State == "streaming", nil
	}); err != nil {
		out = append(out, fmt.Sprintf("%v: %s", err, h.pipe.status().Health.Reason))
	}
	return out
}

// deadLetters lists the dead letters' reasons: the suite's values are all mirrorable, so any
// is a failure.
func (h *harness) deadLetters() []string {
	f, err := os.Open(h.cfg.Pipelines[0].DLQ)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	lines, _, err := cdc.ReadDeadLetters(f)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, l := range lines {
		out = append(out, l.Reason)
	}
	return out
}

// errNoMarker: the marker row could not be written (a server the case left down): the case
// failed, but nothing says the index diverged.
var errNoMarker = errors.New("writing the marker row")

// result is a case's outcome.
type result struct {
	diverged bool     // the index did not equal the source at the end
	problems []string // every failure, divergence included
	seconds  float64
}

// verify ends a case: the load is stopped by now; convergence, health and dead letters.
func (h *harness) verify(w healthWant) result {
	var res result
	diffs, err := h.converge()
	switch {
	case errors.Is(err, errNoMarker):
		res.problems = append(res.problems, err.Error())
	case err != nil:
		res.diverged = true
		res.problems = append(res.problems, "no convergence: "+err.Error())
	case len(diffs) > 0:
		res.diverged = true
		const shown = 30
		for i, d := range diffs {
			if i == shown {
				res.problems = append(res.problems, fmt.Sprintf("... and %d more differences", len(diffs)-shown))
				break
			}
			res.problems = append(res.problems, d)
		}
	}
	if err == nil {
		res.problems = append(res.problems, h.checkHealth(w)...)
	}
	if dl := h.deadLetters(); len(dl) > 0 {
		res.problems = append(res.problems, fmt.Sprintf("%d dead letters: %s", len(dl), strings.Join(slices.Compact(dl), "; ")))
	}
	h.rec.Stop()
	res.seconds = time.Since(h.began).Seconds()
	return res
}

// report logs the case's figures and transitions, and fails the test with its problems (with
// the pipeline's log).
func (h *harness) report(name string, res result) {
	st := h.pipe.status()
	h.t.Logf("%s %s: %.1fs, %d events in %d batches, %d reconnects, %d backpressure retries; load %d commits, %d failed; health:%s",
		name, h.spec, res.seconds, st.Progress.Events, st.Progress.Batches, st.Reconnects, st.Progress.Retries,
		h.load.commits.Load(), h.load.failures.Load(), h.rec.transitions(h.marks))
	if len(res.problems) > 0 {
		h.t.Errorf("%s %s:\n  %s\npipeline log:%s", name, h.spec, strings.Join(res.problems, "\n  "), h.logs)
	}
}

// finish stops the pipeline (bounded: a Run that does not return is a failure) and drops
// what it left: slot and publication, indices, state; the proxies close last.
func (h *harness) finish() {
	for _, p := range []*faultproxy.TCPProxy{h.srcProxy, h.engProxy} {
		if p != nil {
			_ = p.Heal() // a case that failed during a fault
		}
	}
	if !h.stopRun() {
		return // its files and connections stay: closing them under a running pipeline proves nothing
	}
	if h.pipe != nil {
		h.pipe.close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.pipe.drop(ctx); err != nil {
			h.t.Errorf("%s: dropping the pipeline (mirror.Drop): %v", h.spec, err)
		}
		h.pipe = nil
	}
	for _, p := range []*faultproxy.TCPProxy{h.srcProxy, h.engProxy} {
		if p != nil {
			_ = p.Close()
		}
	}
	h.srcProxy, h.engProxy = nil, nil
}

// stopRun stops the load, the recorder and the pipeline's run; it reports whether Run
// returned within stopDeadline.
func (h *harness) stopRun() bool {
	if h.load != nil {
		h.load.Stop()
	}
	if h.rec != nil {
		h.rec.Stop()
	}
	if h.cancel == nil {
		return true
	}
	h.cancel()
	select {
	case <-h.done:
		if h.runErr != nil {
			h.t.Errorf("%s: the pipeline stopped: %v", h.spec, h.runErr)
		}
	case <-time.After(stopDeadline):
		h.t.Errorf("%s: the pipeline's Run did not return within %v of its context ending; log:%s", h.spec, stopDeadline, h.logs)
		return false
	}
	h.cancel = nil
	return true
}
