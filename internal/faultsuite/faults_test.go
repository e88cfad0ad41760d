package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// fault is one thing that goes wrong. inject returns once the fault is over (the server is
// back, the network healed); the pipeline's recovery is what the case then waits for.
type fault struct {
	name    string
	proxied bool // the fault needs the pipeline's connections to run through the proxies
	inject  func(h *harness) error
	want    healthWant
}

// What the pipeline must report about a fault of its source and of its sink: a lost source
// is a stream reopened (the runner says reconnecting meanwhile); a lost engine is a batch
// pushed back (sink_unavailable at once for a lost or failing engine, backpressure beyond the
// suite's one-second threshold for throttling), a write left unanswered beyond the runner's
// UnansweredThreshold (sink_not_answering: a silent engine) or, for an
// error the sink does not call backpressure, a stream reopened.
var (
	sourceLost = healthWant{unhealthy: []string{cdc.HealthReconnecting}, reconnect: true}
	engineLost = healthWant{unhealthy: []string{cdc.HealthUnavailable, cdc.HealthNotAnswering, cdc.HealthBackpressure, cdc.HealthReconnecting}}
)

// control runs `testenv ARGS...` on the servers; its output comes back in the error.
func (h *harness) control(args ...string) error {
	out, err := h.srv.Output(args...)
	if err != nil {
		return fmt.Errorf("testenv %s: %v\n%s", strings.Join(args, " "), err, strings.TrimSpace(out))
	}
	return nil
}

// stopTimeout bounds a stop before testenv kills the server (and fails): a PostgreSQL fast
// shutdown must complete within seconds while a pipeline is connected (issue 14, item 3).
const stopTimeout = "30"

// restart restarts a server in a mode: postgres fast|immediate|smart, the others
// graceful|kill.
func restart(server, mode string) fault {
	w := sourceLost
	if server == "elasticsearch" || server == "opensearch" {
		w = engineLost
	}
	return fault{name: "restart " + server + " --mode " + mode, want: w, inject: func(h *harness) error {
		return h.control("restart", server, "--mode", mode, "--timeout", stopTimeout)
	}}
}

// outage stops a server for d, then starts it on its data.
func outage(server string, d time.Duration) fault {
	w := sourceLost
	if server == "elasticsearch" || server == "opensearch" {
		w = engineLost
	}
	return fault{name: fmt.Sprintf("outage %s %v", server, d), want: w, inject: func(h *harness) error {
		h.t.Cleanup(func() {
			// A case that failed during the outage leaves the server running for the next.
			if _, err := h.srv.Output("status", server); err == nil {
				return
			}
			if out, err := h.srv.Output("start", server); err != nil {
				h.t.Errorf("starting %s after a failed case: %v\n%s", server, err, out)
			}
		})
		// A stop that failed (killed after the timeout) still leaves the server down: the
		// outage goes on, and the failure is the case's.
		stopErr := h.control("stop", server, "--timeout", stopTimeout)
		time.Sleep(d) // the outage itself
		return errors.Join(stopErr, h.control("start", server))
	}}
}

// terminateWalsender ends the PostgreSQL walsender serving the pipeline's slot
// (pg_terminate_backend), once.
func terminateWalsender() fault {
	return fault{name: "pg_terminate_backend(walsender)", want: healthWant{reconnect: true}, inject: func(h *harness) error {
		pg, ok := h.db.(*postgres)
		if !ok {
			return errors.New("terminate walsender: not a PostgreSQL case")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return h.waitFor(30*time.Second, "a walsender to terminate", func() (bool, error) {
			return pg.terminateWalsender(ctx, h.cfg.Pipelines[0].Source.Slot)
		})
	}}
}

// proxyOf is the proxy between the pipeline and its source ("source") or engine ("engine").
func (h *harness) proxyOf(target string) *faultproxy.TCPProxy {
	if target == "source" {
		return h.srcProxy
	}
	return h.engProxy
}

// partition black-holes the path to target in both directions for d. Bytes a black-hole
// swallows are lost, which TCP never does; so when it heals, the connections that lived
// through it are reset -- what a partition long enough for the peers' timeouts leaves.
// Before that the pipeline must have noticed on its own.
func partition(target string, d time.Duration) fault {
	w := healthWant{unhealthy: []string{cdc.HealthReconnecting, cdc.HealthLagging}, reconnect: true, during: true}
	if target == "engine" {
		w = engineLost
		w.during = true
	}
	return fault{name: fmt.Sprintf("partition %s %v", target, d), proxied: true, want: w, inject: func(h *harness) error {
		p := h.proxyOf(target)
		p.SetBlackhole(faultproxy.Both)
		time.Sleep(d) // the partition itself
		p.ResetAll()
		p.SetBlackhole(faultproxy.None)
		return nil
	}}
}

// resets aborts every connection to target with a TCP RST, then resets every new one for d.
// A lost source connection is always a reopened stream, but a reconnection that succeeds at
// once is too quick for a 100ms poll to be sure to see it; the sink's backpressure is
// reported only beyond the one-second threshold. So short windows demand less.
func resets(target string, d time.Duration) fault {
	w := sourceLost
	switch {
	case target == "engine" && d >= 3*time.Second:
		w = engineLost
		w.ifMet = true
	case target == "engine":
		w = healthWant{}
	case d < time.Second:
		w = healthWant{reconnect: true}
	}
	return fault{name: fmt.Sprintf("resets %s %v", target, d), proxied: true, want: w, inject: func(h *harness) error {
		p := h.proxyOf(target)
		p.ResetAll()
		if err := p.SetAcceptFault(faultproxy.AcceptReset); err != nil {
			return err
		}
		time.Sleep(d) // connections keep being reset
		p.ResetAll()
		return p.SetAcceptFault(faultproxy.AcceptForward)
	}}
}

// runFault runs one case: the pipeline under load, the fault, convergence and health.
func runFault(t *testing.T, srv *testenv.Servers, spec caseSpec, f fault) {
	spec.proxied = spec.proxied || f.proxied
	if spec.seed == 0 {
		spec.seed = rand.Uint64N(1 << 40)
	}
	h := newHarness(t, srv, spec)
	h.run()
	var ferr error
	h.withLoad(func() { ferr = f.inject(h) })
	res := h.verify(f.want)
	if ferr != nil {
		res.problems = append([]string{"the fault: " + ferr.Error()}, res.problems...)
	}
	h.report(f.name, res)
}

const (
	es  = estest.Elasticsearch
	ops = estest.OpenSearch
)

func TestFaultPostgresFastRestart(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: es}, restart("postgres", "fast"))
}

func TestFaultPostgresImmediateRestart(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: ops}, restart("postgres", "immediate"))
}

func TestFaultPostgresTerminateWalsender(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: es}, terminateWalsender())
}

// TestFaultPostgresOutage: the source is down for a minute (issue 14: "a 60 s source outage").
func TestFaultPostgresOutage(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: ops}, outage("postgres", time.Minute))
}

func TestFaultMariaDBRestart(t *testing.T) {
	srv := testenv.RequireFaults(t)
	t.Run("graceful", func(t *testing.T) {
		runFault(t, srv, caseSpec{source: "mariadb", engine: es}, restart("mariadb", "graceful"))
	})
	t.Run("kill", func(t *testing.T) {
		runFault(t, srv, caseSpec{source: "mariadb", engine: ops}, restart("mariadb", "kill"))
	})
}

func TestFaultElasticsearchRestart(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: es}, restart("elasticsearch", "graceful"))
}

func TestFaultOpenSearchRestart(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: ops}, restart("opensearch", "graceful"))
}

// partitionFor is long enough for the runner's lag measurement (its own connection, through
// the same proxy) to time out and report the lag beyond the suite's five-second threshold.
const partitionFor = 15 * time.Second

// TestFaultPartition black-holes the network between the pipeline and each server in turn.
func TestFaultPartition(t *testing.T) {
	srv := testenv.RequireFaults(t)
	for _, c := range []struct {
		name, target string
		spec         caseSpec
	}{
		{"postgres", "source", caseSpec{source: "postgres", engine: es}},
		{"mariadb", "source", caseSpec{source: "mariadb", engine: ops}},
		{"elasticsearch", "engine", caseSpec{source: "postgres", engine: es}},
		{"opensearch", "engine", caseSpec{source: "mariadb", engine: ops}},
	} {
		t.Run(c.name, func(t *testing.T) { runFault(t, srv, c.spec, partition(c.target, partitionFor)) })
	}
}

// TestFaultConnectionResets resets the connections between the pipeline and each server in
// turn, and every new one for three seconds.
func TestFaultConnectionResets(t *testing.T) {
	srv := testenv.RequireFaults(t)
	for _, c := range []struct {
		name, target string
		spec         caseSpec
	}{
		{"postgres", "source", caseSpec{source: "postgres", engine: ops}},
		{"mariadb", "source", caseSpec{source: "mariadb", engine: es}},
		{"elasticsearch", "engine", caseSpec{source: "mariadb", engine: es}},
		{"opensearch", "engine", caseSpec{source: "postgres", engine: ops}},
	} {
		t.Run(c.name, func(t *testing.T) { runFault(t, srv, c.spec, resets(c.target, 3*time.Second)) })
	}
}
