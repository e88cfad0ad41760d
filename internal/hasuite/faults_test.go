package hasuite

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The fault cases (doc.go, The faults).

// loadAround is the load before and after a fault.
const loadAround = 2 * time.Second

// logTakeover logs a takeover's times in the one format the lead collects.
func logTakeover(t *testing.T, c string, ttl time.Duration, active time.Duration, marker time.Duration, st pipeStatus) {
	t.Helper()
	reported := 0.0
	if st.Leadership != nil {
		reported = st.Leadership.LastTakeoverSeconds * 1000
	}
	t.Logf("takeover case=%s ttl=%s ms=%d marker_ms=%d reported_ms=%.0f", c, ttl, active.Milliseconds(), marker.Milliseconds(), reported)
}

// takeover awaits next active above epoch and a marker written at once visible, both timed
// from began.
func (h *harness) takeover(c string, next *proc, epoch uint64, began time.Time) pipeStatus {
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

func epochOf(t *testing.T, p *proc) uint64 {
	t.Helper()
	st, err := p.status()
	if err != nil {
		t.Fatal(err)
	}
	return st.epoch()
}

func TestFaultHAKill(t *testing.T) {
	testenv.RequireFaults(t)
	for _, ttl := range []time.Duration{3 * time.Second, 6 * time.Second} {
		t.Run("ttl="+ttl.String(), func(t *testing.T) {
			h := newHarness(t, options{ttl: ttl})
			a, b := h.begin()
			time.Sleep(loadAround)
			epoch := epochOf(t, a)
			began := time.Now()
			a.kill()
			h.takeover("kill", b, epoch, began)
			a.start()
			a.awaitStatus("the killed process back as standby", settleDeadline, standbyOf(b.name))
			time.Sleep(loadAround)
			h.finish()
		})
	}
}

func TestFaultHAGracefulStop(t *testing.T) {
	testenv.RequireFaults(t)
	h := newHarness(t, options{})
	a, b := h.begin()
	time.Sleep(loadAround)
	epoch := epochOf(t, a)
	began := time.Now()
	a.term()
	if !strings.Contains(a.log(), "lease released") {
		t.Error("the stopped active did not log its lease released")
	}
	h.takeover("term", b, epoch, began)
	a.start()
	a.awaitStatus("the stopped process back as standby", settleDeadline, standbyOf(b.name))
	time.Sleep(loadAround)
	h.finish()
}

func TestFaultHAStopCont(t *testing.T) {
	testenv.RequireFaults(t)
	h := newHarness(t, options{})
	a, b := h.begin()
	time.Sleep(loadAround)
	epoch := epochOf(t, a)
	began := time.Now()
	a.signal(syscall.SIGSTOP)
	st := h.takeover("stop", b, epoch, began)
	newEpoch := st.epoch()
	tookOver := time.Now()
	time.Sleep(time.Until(began.Add(3 * h.ttl())))
	a.signal(syscall.SIGCONT)
	resumed := time.Now()
	d := a.awaitStatus("the resumed process standby", 15*time.Second, standbyOf(b.name))
	t.Logf("the resumed process said standby %s after SIGCONT", d.Round(time.Millisecond))
	if log := a.log(); !strings.Contains(log, "stepped down") {
		t.Error("the resumed process did not log its step down")
	} else {
		t.Logf("the resumed process's step down: %s", firstLine(log, "stepped down"))
	}
	time.Sleep(loadAround)
	h.finish()
	if why := h.mon.kept(b.name, newEpoch, tookOver); why != "" {
		t.Errorf("after SIGCONT at %s: %s", resumed.Format("15:04:05.000"), why)
	}
}

// grepLines returns the lines of log holding any of substrs.
func grepLines(log string, substrs ...string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		for _, s := range substrs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

func firstLine(log, substr string) string {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			return sc.Text()
		}
	}
	return ""
}

func TestFaultHAStorePartition(t *testing.T) {
	testenv.RequireFaults(t)
	h := newHarness(t, options{})
	a, b := h.begin()
	time.Sleep(loadAround)
	epoch := epochOf(t, a)
	began := time.Now()
	a.proxy.SetBlackhole(faultproxy.Both)
	st := h.takeover("partition", b, epoch, began)
	a.awaitStatus("the cut-off active standby", 3*h.ttl()+10*time.Second, func(s pipeStatus) string {
		if s.role() != cdc.RoleStandby || s.storeErr() == "" {
			return fmt.Sprintf("role %q store error %t", s.role(), s.storeErr() != "")
		}
		return ""
	})
	since := func(proc, role string) string {
		at, ok := h.mon.first(proc, began, func(s pipeStatus) bool { return s.role() == role })
		if !ok {
			return "not yet"
		}
		return at.Sub(began).Round(time.Millisecond).String() + " after the cut"
	}
	t.Logf("seen by the monitor (100ms polls): the cut-off active standby %s, the other active %s",
		since(a.name, cdc.RoleStandby), since(b.name, cdc.RoleActive))
	tookOver := time.Now()
	time.Sleep(time.Until(began.Add(3 * h.ttl())))
	if err := a.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	a.proxy.ResetAll()
	a.awaitStatus("the healed process standby", settleDeadline, standbyOf(b.name))
	t.Logf("the cut-off process's lease and fence lines:\n%s", grepLines(a.log(), "renewing", "stepped down", "pipeline stopped", "sink_destination_conflict"))
	time.Sleep(loadAround)
	h.finish()
	if why := h.mon.kept(b.name, st.epoch(), tookOver); why != "" {
		t.Errorf("after the partition: %s", why)
	}
}

func TestFaultHAStoreRestart(t *testing.T) {
	testenv.RequireFaults(t)
	pg := privatePostgres(t)
	for _, c := range []struct {
		name  string
		fault func(h *harness)
	}{
		{"fast_restart", func(*harness) { pg.run("restart", "postgres", "--mode", "fast") }},
		// Down for two TTLs: both processes lose the store, the active's lease runs out.
		{"outage", func(h *harness) {
			pg.run("stop", "postgres", "--mode", "fast")
			time.Sleep(2 * h.ttl())
			pg.run("start", "postgres")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, options{pgDSN: pg.dsn})
			a, _ := h.begin()
			time.Sleep(loadAround)
			epoch := epochOf(t, a)
			began := time.Now()
			c.fault(h)
			t.Logf("the store's server back after %s", time.Since(began).Round(time.Millisecond))
			// Both ride through: a row written after the restart arrives, and the pair settles.
			id := h.writeMarker()
			took, _ := h.awaitDoc(id, catchUpDeadline)
			active := h.settled()
			st, err := active.status()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("case=%s: a row written once the server was back arrived %s later; settled %s after the fault began: %s active, lease epoch %d (before: %d)",
				c.name, took.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), active.name, st.epoch(), epoch)
			time.Sleep(loadAround)
			h.finish()
		})
	}
}

// privatePG is a PostgreSQL of the test's own, run by scripts/testenv under a private
// TRIBUTARY_TESTENV_HOME on a free port (as scripts/bench-peers does); it goes when the test
// ends.
type privatePG struct {
	t    *testing.T
	env  []string
	home string
	dsn  string
}

func privatePostgres(t *testing.T) *privatePG {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	// Not t.TempDir: the server runs as the postgres user, which must reach its data.
	home, err := os.MkdirTemp("", "ht1-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &privatePG{t: t, home: home}
	p.env = append(os.Environ(), "TRIBUTARY_TESTENV_HOME="+p.home, "TRIBUTARY_PG_PORT="+port)
	t.Cleanup(func() { p.output("down", "postgres") })
	p.run("up", "postgres")
	b, err := os.ReadFile(filepath.Join(p.home, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "export "+testenv.PostgresDSN+"="); ok {
			p.dsn = strings.Trim(v, "'")
		}
	}
	if p.dsn == "" {
		t.Fatalf("the private PostgreSQL's env file has no %s", testenv.PostgresDSN)
	}
	return p
}

func (p *privatePG) output(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "scripts", "testenv", "testenv"), args...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (p *privatePG) run(args ...string) {
	p.t.Helper()
	if out, err := p.output(args...); err != nil {
		p.t.Fatalf("testenv %s (private home): %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestFaultHAStoreSlow(t *testing.T) {
	testenv.RequireFaults(t)
	h := newHarness(t, options{})
	a, b := h.begin()
	time.Sleep(loadAround)
	epoch := epochOf(t, a)
	began := time.Now()
	// Every exchange with the store takes 4s: no renewal completes within the lease, while
	// checkpoints still get through, slowly.
	a.proxy.SetLatency(faultproxy.Both, 2*time.Second)
	st := h.takeover("slow", b, epoch, began)
	tookOver := time.Now()
	time.Sleep(time.Until(began.Add(3 * h.ttl())))
	if err := a.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	a.awaitStatus("the slowed process standby", settleDeadline, standbyOf(b.name))
	t.Logf("the slowed process's lease and fence lines:\n%s", grepLines(a.log(), "renewing", "stepped down", "pipeline stopped", "sink_destination_conflict"))
	time.Sleep(loadAround)
	h.finish()
	if why := h.mon.kept(b.name, st.epoch(), tookOver); why != "" {
		t.Errorf("after the slow store: %s", why)
	}
}
