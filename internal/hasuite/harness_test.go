package hasuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/sink"
)

// The pair of cdcmirror processes, their monitor, and a case's beginning and end (doc.go).

// Bounds; generous, since the tests share two cores with the servers.
const (
	seedRows        = 10
	startDeadline   = 3 * time.Minute // the first active's snapshot read
	settleDeadline  = 2 * time.Minute // one active, the other standby
	catchUpDeadline = 4 * time.Minute // the marker visible
	equalDeadline   = time.Minute
	markerBase      = 900_000_000
)

var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// cdcmirrorBinary builds examples/cdcmirror once per test run.
func cdcmirrorBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "hasuite-"); build.err != nil {
			return
		}
		build.bin = filepath.Join(build.dir, "cdcmirror")
		cmd := exec.Command("go", "build", "-o", build.bin, "./cdcmirror")
		cmd.Dir = filepath.Join(repoRoot, "examples")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("building cdcmirror: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

// pipeStatus is the part of /status's pipeline the suite reads.
type pipeStatus struct {
	Pipeline    string `json:"pipeline"`
	Healthy     bool   `json:"healthy"`
	Reason      string `json:"reason"`
	State       string `json:"state"`
	DeadLetters int64  `json:"dead_letters"`
	LastFailure string `json:"last_failure"`
	Leadership  *struct {
		Role                string  `json:"role"`
		Holder              string  `json:"holder"`
		Epoch               uint64  `json:"epoch"`
		Takeovers           int64   `json:"takeovers"`
		LastTakeoverSeconds float64 `json:"last_takeover_seconds"`
		StoreError          string  `json:"state_store_error"`
	} `json:"leadership"`
}

func (s pipeStatus) role() string {
	if s.Leadership == nil {
		return ""
	}
	return s.Leadership.Role
}

func (s pipeStatus) epoch() uint64 {
	if s.Leadership == nil {
		return 0
	}
	return s.Leadership.Epoch
}

func (s pipeStatus) holder() string {
	if s.Leadership == nil {
		return ""
	}
	return s.Leadership.Holder
}

func (s pipeStatus) storeErr() string {
	if s.Leadership == nil {
		return ""
	}
	return s.Leadership.StoreError
}

// proc is one cdcmirror process of the pair (started again after a kill or a stop).
type proc struct {
	h        *harness
	name     string // its holder
	addr     string // /status
	logPath  string // every run's stderr, appended
	dlq      string
	proxy    *faultproxy.TCPProxy // its path to the state store
	storeDSN string

	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{} // closed when the run ended
	expectExit bool
	unexpected []string
	hc         *http.Client
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (p *proc) start() {
	t := p.h.t
	t.Helper()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "=== hasuite: start %s ===\n", time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(cdcmirrorBinary(t), "run", "--config", p.h.cfgPath, "--metrics-addr", p.addr, "--progress", "never")
	cmd.Env = append(os.Environ(), "HT_HOLDER="+p.name, "HT_DLQ="+p.dlq, "HT_STORE_DSN="+p.storeDSN,
		"HT_SOURCE_DSN="+p.h.pgDSN, "HT_ES_URL="+p.h.esURL)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.expectExit = cmd, done, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		if !p.expectExit {
			p.unexpected = append(p.unexpected, fmt.Sprintf("%s exited on its own at %s: %v (%s)", p.name,
				time.Now().Format("15:04:05.000"), err, cmd.ProcessState))
		}
		p.mu.Unlock()
		close(done)
	}()
}

func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// signal sends sig to the running process; SIGKILL and SIGTERM make its exit expected.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		p.expectExit = true
	}
	_ = p.cmd.Process.Signal(sig)
}

// kill ends the process with SIGKILL and waits for it.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// term ends the process with SIGTERM (a clean stop: its lease released) and waits for it; a
// process still running after a minute is killed, and that fails the test.
func (p *proc) term() {
	if !p.running() {
		return
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.h.t.Errorf("%s did not stop within a minute of SIGTERM", p.name)
		p.kill()
	}
}

func (p *proc) status() (pipeStatus, error) {
	resp, err := p.hc.Get("http://" + p.addr + "/status")
	if err != nil {
		return pipeStatus{}, err
	}
	defer resp.Body.Close()
	var d struct {
		Pipelines []pipeStatus `json:"pipelines"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return pipeStatus{}, err
	}
	for _, s := range d.Pipelines {
		if s.Pipeline == p.h.name {
			return s, nil
		}
	}
	return pipeStatus{}, fmt.Errorf("/status of %s has no pipeline %s", p.name, p.h.name)
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// awaitStatus polls p's status every 50ms until cond says nothing is left to wait for ("")
// and returns how long that took; it fails the test after bound (its last answer), or when
// the process exited.
func (p *proc) awaitStatus(what string, bound time.Duration, cond func(pipeStatus) string) time.Duration {
	t := p.h.t
	t.Helper()
	began := time.Now()
	why := "no answer yet"
	for {
		if !p.running() {
			t.Fatalf("%s: %s exited (last: %s)", what, p.name, why)
		}
		if st, err := p.status(); err != nil {
			why = err.Error()
		} else if why = cond(st); why == "" {
			return time.Since(began)
		}
		if time.Since(began) > bound {
			t.Fatalf("%s: not within %s: %s", what, bound, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func roleIs(role string) func(pipeStatus) string {
	return func(s pipeStatus) string {
		if s.role() != role {
			return fmt.Sprintf("role %q (state %s)", s.role(), s.State)
		}
		return ""
	}
}

// activeAbove: active with a lease epoch above e (a takeover after e's term).
func activeAbove(e uint64) func(pipeStatus) string {
	return func(s pipeStatus) string {
		if s.role() != cdc.RoleActive || s.epoch() <= e {
			return fmt.Sprintf("role %q epoch %d", s.role(), s.epoch())
		}
		return ""
	}
}

// standbyOf: standby, naming holder as the active, reaching the store.
func standbyOf(holder string) func(pipeStatus) string {
	return func(s pipeStatus) string {
		if s.role() != cdc.RoleStandby || s.holder() != holder || s.storeErr() != "" {
			return fmt.Sprintf("role %q holder %q store error %q", s.role(), s.holder(), s.storeErr())
		}
		return ""
	}
}

// --- the monitor ---

// obs is one change of a process's status as the monitor saw it.
type obs struct {
	at   time.Time
	proc string
	st   pipeStatus
}

func (o obs) String() string {
	return fmt.Sprintf("%s %s: role=%q epoch=%d holder=%q state=%q healthy=%t store_err=%t",
		o.at.Format("15:04:05.000"), o.proc, o.st.role(), o.st.epoch(), o.st.holder(), o.st.State, o.st.Healthy, o.st.storeErr() != "")
}

type monitor struct {
	mu        sync.Mutex
	last      map[string]string
	changes   []obs
	conflicts []string
}

func (m *monitor) run(ctx context.Context, procs []*proc) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, p := range procs {
		// One poller per process: a paused one's timeouts must not delay the other's.
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				if p.running() {
					if st, err := p.status(); err == nil {
						m.note(p.name, st)
					} // else paused, starting or gone: nothing to record
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
}

// first returns when the monitor first saw proc satisfy cond at or after since.
func (m *monitor) first(proc string, since time.Time, cond func(pipeStatus) bool) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.changes {
		if o.proc == proc && !o.at.Before(since) && cond(o.st) {
			return o.at, true
		}
	}
	return time.Time{}, false
}

func (m *monitor) note(name string, st pipeStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := obs{at: time.Now(), proc: name, st: st}
	key := o.String()[len("15:04:05.000 "):]
	if m.last[name] != key {
		m.last[name] = key
		m.changes = append(m.changes, o)
	}
	if st.role() == cdc.RoleActive && len(m.conflicts) < 10 {
		for _, s := range []string{st.Reason, st.LastFailure} {
			if strings.Contains(s, esfence.Incident) {
				m.conflicts = append(m.conflicts, fmt.Sprintf("%s %s: %s", o.at.Format("15:04:05.000"), name, s))
			}
		}
	}
}

// kept checks that from since on, holder was always seen active with epoch, and no process
// reported a higher epoch ("" when so).
func (m *monitor) kept(holder string, epoch uint64, since time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.changes {
		if o.at.Before(since) {
			continue
		}
		if o.proc == holder && (o.st.role() != cdc.RoleActive || o.st.epoch() != epoch) {
			return fmt.Sprintf("the new active %s lost its term (epoch %d): %s", holder, epoch, o)
		}
		if o.st.epoch() > epoch {
			return fmt.Sprintf("an epoch above the new active's %d appeared: %s", epoch, o)
		}
	}
	return ""
}

func (m *monitor) timeline() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, o := range m.changes {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// --- the harness ---

type options struct {
	ttl   time.Duration // 0: 3s
	pgDSN string        // the source and store server; "" the shared one
	seed  uint64        // the load's values; 0: random
}

type harness struct {
	t       *testing.T
	opts    options
	sfx     string
	name    string // the pipeline
	pgDSN   string
	esURL   string
	cfgPath string
	tables  []*table
	eng     *engine
	load    *load
	procs   []*proc
	mon     *monitor
	vers    *versions
	markers int

	stopBackground context.CancelFunc
	background     sync.WaitGroup
}

func (h *harness) ttl() time.Duration {
	if h.opts.ttl == 0 {
		return 3 * time.Second
	}
	return h.opts.ttl
}

// newHarness creates the tables, seeds them and writes the pair's configuration; nothing
// runs yet. Everything it creates goes when the test ends.
func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	if o.pgDSN == "" {
		o.pgDSN = testenv.Require(t, testenv.PostgresDSN)
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	h := &harness{t: t, opts: o, pgDSN: o.pgDSN, esURL: testenv.Require(t, testenv.ElasticsearchURL), mon: &monitor{last: map[string]string{}},
		vers: newVersions()}
	cdcmirrorBinary(t)
	h.sfx = estest.RandomHex(t, 4)
	h.name = "ht1-" + h.sfx
	h.eng = newEngine(h.esURL)
	node := estest.Connect(t, estest.Elasticsearch, h.esURL)
	node.EnforceAutoCreateRule(t)
	node.DeleteAtCleanup(t, "ht1-"+h.sfx+"-*")
	h.tables = tablesFor(h.sfx)
	for _, tb := range h.tables {
		idx, err := sink.IndexName("ht1-"+h.sfx+"-{table}", cdc.TableID{Table: tb.name})
		if err != nil {
			t.Fatal(err)
		}
		tb.index = idx
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	slot := "ht1_" + h.sfx
	t.Cleanup(func() { h.dropAll(slot) })
	var stmts []string
	for _, tb := range h.tables {
		stmts = append(stmts, tb.createSQL()...)
	}
	if err := execSQL(ctx, h.pgDSN, stmts...); err != nil {
		t.Fatalf("creating the tables: %v", err)
	}
	h.load = newLoad(h.pgDSN, h.tables, o.seed)
	if err := h.load.seedRows(ctx, seedRows); err != nil {
		t.Fatalf("seeding: %v", err)
	}

	dir := t.TempDir()
	h.cfgPath = filepath.Join(dir, "cdcmirror.yaml")
	cfg := fmt.Sprintf(`pipeline: %s
source:
  type: postgres
  dsn: "${HT_SOURCE_DSN}"
  tables: [public.%s, public.%s]
  slot: %s
  publication: %s
sinks:
  - type: elasticsearch
    config:
      id: ht1
      url: "${HT_ES_URL}"
      index: "ht1-%s-{table}"
      auth: {type: none}
      mapping: {decimal: keyword, uint64: keyword}
      number_of_replicas: 0
state_store:
  type: postgres
  dsn: "${HT_STORE_DSN}"
  schema: %s
  lease_ttl: %s
  holder: "${HT_HOLDER}"
dlq: "${HT_DLQ}"
runner: {batch_max_events: 100, batch_max_wait: 200ms, lag_interval: 1s}
`, h.name, h.tables[0].name, h.tables[1].name, slot, slot, h.sfx, slot, h.ttl())
	if err := os.WriteFile(h.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(h.pgDSN)
	if err != nil || u.Host == "" {
		t.Fatalf("the PostgreSQL DSN must be a URL with a host (the store's proxy replaces it)")
	}
	for _, name := range []string{"a", "b"} {
		px, err := faultproxy.NewTCP(u.Host, faultproxy.TCPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = px.Close() })
		su := *u
		su.Host = px.Addr()
		p := &proc{h: h, name: name, addr: freeAddr(t), logPath: filepath.Join(dir, name+".log"), dlq: filepath.Join(dir, name+".dlq.jsonl"),
			proxy: px, storeDSN: su.String(), hc: &http.Client{Timeout: 2 * time.Second}}
		h.procs = append(h.procs, p)
		// Registered after the proxies and dropAll: runs before them.
		t.Cleanup(p.kill)
	}
	t.Cleanup(func() {
		h.stopAll()
		if t.Failed() {
			t.Logf("status changes seen:\n%s", h.mon.timeline())
			for _, p := range h.procs {
				t.Logf("log of %s:\n%s", p.name, tail(p.log(), 120))
			}
		}
	})
	return h
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// dropAll drops what the case created on the source server: the slot (its walsender ended
// first), the publication, the tables and the store's schema.
func (h *harness) dropAll(slot string) {
	for _, p := range h.procs {
		p.kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	for range 20 {
		err = execSQL(ctx, h.pgDSN,
			"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '"+slot+"' AND active_pid IS NOT NULL")
		if err == nil {
			err = execSQL(ctx, h.pgDSN, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"+slot+"'")
		}
		if err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		h.t.Errorf("dropping the slot %s: %v", slot, err)
	}
	stmts := []string{"DROP PUBLICATION IF EXISTS " + slot, "DROP SCHEMA IF EXISTS " + slot + " CASCADE"}
	for _, tb := range h.tables {
		stmts = append(stmts, "DROP TABLE IF EXISTS "+tb.name)
	}
	if err := execSQL(ctx, h.pgDSN, stmts...); err != nil {
		h.t.Errorf("dropping the case's objects: %v", err)
	}
}

func (h *harness) stopAll() {
	h.load.stop()
	if h.stopBackground != nil {
		h.stopBackground()
		h.background.Wait()
		h.stopBackground = nil
	}
}

// begin starts a, awaits it active (its snapshot read), starts b, awaits it standby, and
// starts the monitor, the version sampler and the load.
func (h *harness) begin() (active, standby *proc) {
	a, b := h.procs[0], h.procs[1]
	a.start()
	a.awaitStatus("a active", startDeadline, func(s pipeStatus) string {
		if s.role() != cdc.RoleActive || s.State != "streaming" {
			return fmt.Sprintf("role %q state %q", s.role(), s.State)
		}
		return ""
	})
	b.start()
	b.awaitStatus("b standby", settleDeadline, standbyOf(a.name))
	ctx, cancel := context.WithCancel(context.Background())
	h.stopBackground = cancel
	h.background.Go(func() { h.mon.run(ctx, h.procs) })
	h.background.Go(func() { h.vers.sample(ctx, h.eng, h.indices()) })
	h.load.start()
	return a, b
}

func (h *harness) indices() []string {
	var out []string
	for _, tb := range h.tables {
		out = append(out, tb.index)
	}
	return out
}

func (h *harness) other(p *proc) *proc {
	if p == h.procs[0] {
		return h.procs[1]
	}
	return h.procs[0]
}

// writeMarker writes a new items row and returns its _id.
func (h *harness) writeMarker() string {
	h.t.Helper()
	h.markers++
	id := fmt.Sprint(markerBase + h.markers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	for range 10 { // the store's server may be restarting (TestFaultHAStoreRestart)
		if err = execSQL(ctx, h.pgDSN, "INSERT INTO "+h.tables[0].name+" VALUES ("+id+", 1, 'marker', 1.50, true, 0.5, '2020-01-02 03:04:05.5')"); err == nil {
			return id
		}
		time.Sleep(time.Second)
	}
	h.t.Fatalf("writing the marker: %v", err)
	return ""
}

// awaitDoc polls the items index for _id every 50ms; it returns how long it took and the
// document's version.
func (h *harness) awaitDoc(id string, bound time.Duration) (time.Duration, int64) {
	h.t.Helper()
	began := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		found, v, err := h.eng.get(ctx, h.tables[0].index, id)
		cancel()
		if err == nil && found {
			return time.Since(began), v
		}
		if time.Since(began) > bound {
			h.t.Fatalf("marker %s not visible within %s (last error %v)", id, bound, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled awaits one active process and the other standby naming it, and returns the active.
func (h *harness) settled() *proc {
	h.t.Helper()
	deadline := time.Now().Add(settleDeadline)
	for {
		var sts []pipeStatus
		for _, p := range h.procs {
			if !p.running() {
				p.mu.Lock()
				why := strings.Join(p.unexpected, "; ")
				p.mu.Unlock()
				h.t.Fatalf("settling: %s is not running (%s)", p.name, why)
			}
			if st, err := p.status(); err == nil {
				sts = append(sts, st)
			}
		}
		if len(sts) == 2 {
			for i, p := range h.procs {
				o := sts[1-i]
				if sts[i].role() == cdc.RoleActive && sts[i].State == "streaming" && o.role() == cdc.RoleStandby &&
					o.holder() == p.name && o.epoch() == sts[i].epoch() && o.storeErr() == "" {
					return p
				}
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the pair did not settle within %s (one active, the other standby naming it):\n%s", settleDeadline, h.mon.timeline())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finish ends a case (doc.go, The end of a case).
func (h *harness) finish() {
	t := h.t
	t.Helper()
	h.settled()
	h.load.stop()
	commits, fails := h.load.counts()
	id := h.writeMarker()
	took, markerVersion := h.awaitDoc(id, catchUpDeadline)
	t.Logf("load: %d commits, %d failed; the final marker arrived in %s", commits, fails, took.Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), equalDeadline+time.Minute)
	defer cancel()
	deadline := time.Now().Add(equalDeadline)
	var diffs []string
	final := map[string]map[string]doc{}
	for {
		diffs = nil
		for _, tb := range h.tables {
			rows, err := readRows(ctx, h.pgDSN, tb)
			if err != nil {
				t.Fatalf("reading %s: %v", tb.name, err)
			}
			docs, err := h.eng.docs(ctx, tb.index, true, true)
			if err != nil {
				t.Fatalf("reading %s: %v", tb.index, err)
			}
			final[tb.index] = docs
			diffs = append(diffs, diffTable(tb, rows, docs)...)
		}
		if len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(diffs) > 0 {
		if len(diffs) > 30 {
			diffs = append(diffs[:30], fmt.Sprintf("... %d more", len(diffs)-30))
		}
		t.Errorf("the index differs from the source %s after the marker arrived:\n%s", equalDeadline, strings.Join(diffs, "\n"))
	}
	h.stopAll()
	for idx, docs := range final {
		h.vers.observe(idx, docs)
		for docID, d := range docs {
			if d.version > markerVersion {
				t.Errorf("%s _id=%q: version %d above the marker's %d, committed after every row", idx, docID, d.version, markerVersion)
			}
		}
	}
	back, samples := h.vers.regressions()
	if len(back) > 0 {
		t.Errorf("versions went backwards (%d samples):\n%s", samples, strings.Join(back, "\n"))
	}
	if samples < 4 {
		t.Errorf("only %d version samples", samples)
	}
	h.mon.mu.Lock()
	conflicts := h.mon.conflicts
	h.mon.mu.Unlock()
	if len(conflicts) > 0 {
		t.Errorf("an active process reported a fencing conflict:\n%s", strings.Join(conflicts, "\n"))
	}
	for _, p := range h.procs {
		p.mu.Lock()
		if len(p.unexpected) > 0 {
			t.Errorf("%s", strings.Join(p.unexpected, "; "))
		}
		p.mu.Unlock()
		if fi, err := os.Stat(p.dlq); err == nil && fi.Size() > 0 {
			t.Errorf("%s wrote dead letters (%d bytes in its file)", p.name, fi.Size())
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Error(err)
		}
	}
}
