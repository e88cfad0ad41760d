package hasuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The MariaDB cases (doc.go, MariaDB): the pair of the PostgreSQL cases with a MariaDB
// source -- one table of mirrortest's (bigint key, text, integer, DECIMAL, BIGINT UNSIGNED
// above 2^63, boolean, JSON) under a write load -- and the state store in that MariaDB
// (state_store type mysql, a database of the case's own), each process reaching it directly.
// No server_id is configured: both processes register with the one derived from the pipeline's
// name, and a takeover relies on the server ending the older binlog dump of that id when the
// new active's registers. Each case ends as the PostgreSQL ones do: a marker row awaited, the
// index equal to the table row by row, no version going backwards or above the marker's, no
// dead letter, no process exiting on its own.

// mariaHarness is a MariaDB case: the PostgreSQL harness's processes, monitor, engine reader
// and version sampler (its pgDSN holds the MariaDB DSN: the processes' HT_SOURCE_DSN), with a
// table, load and comparison of MariaDB's.
type mariaHarness struct {
	*harness
	tb    *mirrortest.MySQL
	index string
	load  *mariaLoad
}

func newMariaHarness(t *testing.T, ttl time.Duration) *mariaHarness {
	t.Helper()
	dsn := testenv.Require(t, testenv.MySQLDSN)
	esURL := testenv.Require(t, testenv.ElasticsearchURL)
	cdcmirrorBinary(t)
	sfx := estest.RandomHex(t, 4)
	h := &mariaHarness{harness: &harness{t: t, opts: options{ttl: ttl}, sfx: sfx, name: "ht2-" + sfx, pgDSN: dsn, esURL: esURL,
		eng: newEngine(esURL), mon: &monitor{last: map[string]string{}}, vers: newVersions()}}
	node := estest.Connect(t, estest.Elasticsearch, esURL)
	node.EnforceAutoCreateRule(t)
	node.DeleteAtCleanup(t, "ht2-"+sfx+"-*")
	h.tb = mirrortest.NewMySQL(t, dsn, "ht2_ha_"+sfx)
	h.index = "ht2-" + sfx + "-" + h.tb.Name()
	database := "ht2_" + sfx
	t.Cleanup(func() {
		for _, p := range h.procs {
			p.kill()
		}
		if err := mariaExec(h.tb.DSN, "DROP DATABASE IF EXISTS "+database); err != nil {
			t.Errorf("dropping the store's database: %v", err)
		}
	})
	h.load = newMariaLoad(h.tb, rand.Uint64())
	if err := h.load.seedRows(seedRows); err != nil {
		t.Fatalf("seeding: %v", err)
	}

	dir := t.TempDir()
	h.cfgPath = filepath.Join(dir, "cdcmirror.yaml")
	cfg := fmt.Sprintf(`pipeline: %s
source:
  type: mysql
  dsn: "${HT_SOURCE_DSN}"
  tables: [%s]
  flavor: mariadb
sinks:
  - type: elasticsearch
    config:
      id: ht2
      url: "${HT_ES_URL}"
      index: "ht2-%s-{table}"
      auth: {type: none}
      mapping: {decimal: keyword, uint64: keyword}
      number_of_replicas: 0
state_store:
  type: mysql
  dsn: "${HT_STORE_DSN}"
  schema: %s
  lease_ttl: %s
  holder: "${HT_HOLDER}"
dlq: "${HT_DLQ}"
runner: {batch_max_events: 100, batch_max_wait: 200ms, lag_interval: 1s}
`, h.name, h.tb.Name(), sfx, database, h.ttl())
	if err := os.WriteFile(h.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		p := &proc{h: h.harness, name: name, addr: freeAddr(t), logPath: filepath.Join(dir, name+".log"),
			dlq: filepath.Join(dir, name+".dlq.jsonl"), storeDSN: dsn, hc: &http.Client{Timeout: 2 * time.Second}}
		h.procs = append(h.procs, p)
		t.Cleanup(p.kill)
	}
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("status changes seen:\n%s", h.mon.timeline())
			for _, p := range h.procs {
				t.Logf("log of %s:\n%s", p.name, tail(p.log(), 120))
			}
		}
	})
	return h
}

func (h *mariaHarness) stop() {
	h.load.stop()
	if h.stopBackground != nil {
		h.stopBackground()
		h.background.Wait()
		h.stopBackground = nil
	}
}

// begin is harness.begin with the MariaDB load.
func (h *mariaHarness) begin() (active, standby *proc) {
	a, b := h.procs[0], h.procs[1]
	a.start()
	a.awaitStatus("a active", startDeadline, func(s pipeStatus) string {
		if s.role() != "active" || s.State != "streaming" {
			return fmt.Sprintf("role %q state %q", s.role(), s.State)
		}
		return ""
	})
	b.start()
	b.awaitStatus("b standby", settleDeadline, standbyOf(a.name))
	ctx, cancel := context.WithCancel(context.Background())
	h.stopBackground = cancel
	h.background.Go(func() { h.mon.run(ctx, h.procs) })
	h.background.Go(func() { h.vers.sample(ctx, h.eng, []string{h.index}) })
	h.load.start()
	return a, b
}

// mariaMarkerBase numbers the marker rows: below the writers' ids, and small enough for the
// table's INT qty (three times the id).
const mariaMarkerBase = 500_000

// writeMarker writes a new row and returns its _id.
func (h *mariaHarness) writeMarker() string {
	h.t.Helper()
	h.markers++
	id := mariaMarkerBase + h.markers
	if err := mariaExec(h.tb.DSN, h.tb.Insert(id, id)...); err != nil {
		h.t.Fatalf("writing the marker: %v", err)
	}
	return fmt.Sprint(id)
}

func (h *mariaHarness) awaitDoc(id string, bound time.Duration) (time.Duration, int64) {
	h.t.Helper()
	began := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		found, v, err := h.eng.get(ctx, h.index, id)
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

// takeover is harness.takeover with the MariaDB marker.
func (h *mariaHarness) takeover(c string, next *proc, epoch uint64, began time.Time) pipeStatus {
	h.t.Helper()
	id := h.writeMarker()
	next.awaitStatus(next.name+" takes over", settleDeadline, activeAbove(epoch))
	active := time.Since(began)
	h.awaitDoc(id, catchUpDeadline)
	marker := time.Since(began)
	st, err := next.status()
	if err != nil {
		h.t.Fatal(err)
	}
	if !strings.Contains(next.log(), "taking over: every index of the pipeline fenced") {
		h.t.Errorf("%s is active without having logged the fence-out of the indices", next.name)
	}
	logTakeover(h.t, c, h.ttl(), active, marker, st)
	return st
}

// finish is harness.finish for the MariaDB table (doc.go, The end of a case).
func (h *mariaHarness) finish() {
	t := h.t
	t.Helper()
	h.settled()
	h.load.stop()
	commits, fails := h.load.counts()
	id := h.writeMarker()
	took, markerVersion := h.awaitDoc(id, catchUpDeadline)
	t.Logf("load: %d commits, %d failed; the final marker arrived in %s", commits, fails, took.Round(time.Millisecond))

	deadline := time.Now().Add(equalDeadline)
	var diff string
	var final map[string]doc
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		docs, err := h.eng.docs(ctx, h.index, true, true)
		cancel()
		if err != nil {
			t.Fatalf("reading %s: %v", h.index, err)
		}
		final = docs
		if diff = mariaDiff(h.tb.Rows(t), docs); diff == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if diff != "" {
		t.Errorf("the index differs from the table %s after the marker arrived: %s", equalDeadline, diff)
	}
	h.stop()
	h.vers.observe(h.index, final)
	for docID, d := range final {
		if d.version > markerVersion {
			t.Errorf("_id=%q: version %d above the marker's %d, committed after every row", docID, d.version, markerVersion)
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
		}
	}
}

// mariaDiff compares the table's rows with the documents (mirrortest.Diff: name, qty, price
// and views exact), or "".
func mariaDiff(rows map[int64]mirrortest.Row, docs map[string]doc) string {
	byID := make(map[int64]map[string]any, len(docs))
	for id, d := range docs {
		var n int64
		if _, err := fmt.Sscan(id, &n); err != nil || fmt.Sprint(n) != id {
			return fmt.Sprintf("document _id %q is not a row's key", id)
		}
		m := map[string]any{}
		for k, raw := range d.source {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber() // views above 2^63 exact
			var v any
			if err := dec.Decode(&v); err != nil {
				return fmt.Sprintf("document %s: %s: %v", id, k, err)
			}
			m[k] = v
		}
		byID[n] = m
	}
	return mirrortest.Diff(rows, byID)
}

func mariaExec(d testenv.MySQL, stmts ...string) error {
	c, err := client.ConnectWithContext(context.Background(), d.Addr, d.User, d.Password, d.DB, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return mariaTxn(c, stmts)
}

func mariaTxn(c *client.Conn, stmts []string) error {
	if _, err := c.Execute("BEGIN"); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := c.Execute(s); err != nil {
			_, _ = c.Execute("ROLLBACK")
			return err
		}
	}
	_, err := c.Execute("COMMIT")
	return err
}

// --- the MariaDB writers ---

// mariaLoad is three writers, each owning the ids from (w+1)*1e6, committing every 100ms a
// transaction of one to three statements: inserts, updates of name, qty, price and views,
// deletes.
type mariaLoad struct {
	tb *mirrortest.MySQL

	mu      sync.Mutex
	commits int
	fails   int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	ws      []*mariaWriter
}

type mariaWriter struct {
	r    *rand.Rand
	next int
	live []int
}

func newMariaLoad(tb *mirrortest.MySQL, seed uint64) *mariaLoad {
	l := &mariaLoad{tb: tb}
	for i := range writers {
		l.ws = append(l.ws, &mariaWriter{r: rand.New(rand.NewPCG(seed, uint64(i))), next: (i + 1) * 1_000_000})
	}
	return l
}

func (l *mariaLoad) seedRows(n int) error {
	var stmts []string
	for _, w := range l.ws {
		stmts = append(stmts, l.tb.Insert(w.next, w.next+n-1)...)
		for range n {
			w.live = append(w.live, w.next)
			w.next++
		}
	}
	return mariaExec(l.tb.DSN, stmts...)
}

func (l *mariaLoad) start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for _, w := range l.ws {
		l.wg.Go(func() { l.run(ctx, w) })
	}
}

func (l *mariaLoad) stop() {
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
		l.cancel = nil
	}
}

func (l *mariaLoad) counts() (commits, fails int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commits, l.fails
}

func (l *mariaLoad) run(ctx context.Context, w *mariaWriter) {
	var conn *client.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if conn == nil {
			d := l.tb.DSN
			c, err := client.ConnectWithContext(ctx, d.Addr, d.User, d.Password, d.DB, 5*time.Second)
			if err != nil {
				l.note(false)
				continue
			}
			conn = c
		}
		stmts, commit := w.change(l.tb)
		err := mariaTxn(conn, stmts)
		if err == nil {
			commit()
		} else {
			_ = conn.Close()
			conn = nil
		}
		l.note(err == nil)
	}
}

func (l *mariaLoad) note(ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.commits++
	} else {
		l.fails++
	}
}

// change draws a transaction, and what to note once it commits.
func (w *mariaWriter) change(tb *mirrortest.MySQL) ([]string, func()) {
	var stmts []string
	added, removed := []int{}, map[int]bool{}
	for range 1 + w.r.IntN(3) {
		switch op := w.r.IntN(10); {
		case op < 4 || len(w.live) < 3:
			id := w.next
			w.next++
			stmts = append(stmts, tb.Insert(id, id)...)
			added = append(added, id)
		case op < 8:
			id := w.live[w.r.IntN(len(w.live))]
			stmts = append(stmts, fmt.Sprintf("UPDATE %s SET name = 'item %d v%d', qty = qty + %d, price = %d.%02d, views = %d WHERE id = %d",
				tb.Name(), id, w.r.IntN(1000), 1+w.r.IntN(9), w.r.IntN(100000), w.r.IntN(100), mirrortest.ViewsOf(w.r.IntN(1<<20)), id))
		default:
			i := w.r.IntN(len(w.live))
			id := w.live[i]
			if removed[id] {
				continue
			}
			removed[id] = true
			stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE id = %d", tb.Name(), id))
		}
	}
	return stmts, func() {
		live := w.live[:0]
		for _, id := range w.live {
			if !removed[id] {
				live = append(live, id)
			}
		}
		w.live = append(live, added...)
	}
}

// --- the cases ---

// TestFaultHAMariaDBKill: kill -9 of the active; the standby takes over (its binlog dump of
// the same server_id replacing the dead one's, which the server may still hold), the killed
// process comes back as standby.
func TestFaultHAMariaDBKill(t *testing.T) {
	testenv.RequireFaults(t)
	h := newMariaHarness(t, 3*time.Second)
	a, b := h.begin()
	time.Sleep(loadAround)
	epoch := epochOf(t, a)
	began := time.Now()
	a.kill()
	h.takeover("mariadb-kill", b, epoch, began)
	a.start()
	a.awaitStatus("the killed process back as standby", settleDeadline, standbyOf(b.name))
	time.Sleep(loadAround)
	h.finish()
}

// TestFaultHAMariaDBStopCont: SIGSTOP of the active for three TTLs, its binlog connection
// open; the standby takes over, registering the same server_id, and the server ends the
// paused process's dump: the test sees it leave the server's processlist (the dumps whose
// client port is one of the paused process's sockets). After SIGCONT that process must step
// down to standby -- not stop, not fight -- while the new active keeps its role and epoch.
func TestFaultHAMariaDBStopCont(t *testing.T) {
	testenv.RequireFaults(t)
	h := newMariaHarness(t, 3*time.Second)
	a, b := h.begin()
	time.Sleep(loadAround)
	epoch := epochOf(t, a)
	if n := h.dumps(a); n != 1 {
		t.Fatalf("the server shows %d binlog dumps of the active's connections, want 1", n)
	}
	began := time.Now()
	a.signal(syscall.SIGSTOP)
	st := h.takeover("mariadb-stop", b, epoch, began)
	newEpoch := st.epoch()
	tookOver := time.Now()
	// The paused process's dump must be gone from the server once the new active's registered
	// with the same server_id (the paused process cannot close it).
	for h.dumps(a) != 0 {
		if time.Since(tookOver) > 3*h.ttl() {
			t.Fatalf("the paused process's binlog dump is still on the server %s after the new active's took over "+
				"(the server did not end the older dump of the server_id)", time.Since(tookOver).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the server ended the paused process's binlog dump (%s after the takeover was seen); the new active has %d",
		time.Since(tookOver).Round(time.Millisecond), h.dumps(b))
	time.Sleep(time.Until(began.Add(3 * h.ttl())))
	a.signal(syscall.SIGCONT)
	d := a.awaitStatus("the resumed process standby", 15*time.Second, standbyOf(b.name))
	t.Logf("the resumed process said standby %s after SIGCONT", d.Round(time.Millisecond))
	log := a.log()
	if !strings.Contains(log, "stepped down") {
		t.Error("the resumed process did not log its step down")
	} else {
		t.Logf("the resumed process's step down: %s", firstLine(log, "stepped down"))
	}
	// What the server did with the paused process's dump when the new active's registered:
	// mysqlcdc names a displaced reader's error (MariaDB's 4052) by the server id.
	if l := firstLine(log, "another replica registered"); l != "" {
		t.Logf("the paused process's binlog dump was displaced: %s", l)
	} else {
		t.Logf("the paused process logged no displaced binlog dump")
	}
	time.Sleep(loadAround)
	h.finish()
	if why := h.mon.kept(b.name, newEpoch, tookOver); why != "" {
		t.Errorf("after SIGCONT: %s", why)
	}
}

// dumps counts the binlog dump threads on the server whose client is one of p's TCP
// connections (processlist Host 127.0.0.1:<port>, matched against p's sockets in /proc).
func (h *mariaHarness) dumps(p *proc) int {
	h.t.Helper()
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	ports := socketPorts(h.t, pid)
	c, err := client.ConnectWithContext(context.Background(), h.tb.DSN.Addr, h.tb.DSN.User, h.tb.DSN.Password, "", 10*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Execute("SELECT HOST FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'")
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Close()
	n := 0
	for i := range res.RowNumber() {
		host, _ := res.GetString(i, 0)
		if _, port, ok := strings.Cut(host, ":"); ok && ports[port] {
			n++
		}
	}
	return n
}

// socketPorts returns the local ports of pid's TCP sockets (IPv4 and IPv6), from its file
// descriptors' socket inodes and the kernel's socket tables.
func socketPorts(t *testing.T, pid int) map[string]bool {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	ports := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			var port int
			if _, err := fmt.Sscanf(hexPort, "%X", &port); err == nil {
				ports[fmt.Sprint(port)] = true
			}
		}
	}
	return ports
}
