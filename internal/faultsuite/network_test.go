package faultsuite

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// Networks that misbehave between the pipeline and its engine (issue 31, item 7): a flapping
// network that resets every connection every 2s for 30s, during which documents must keep
// being written, and a black hole of 20s after which writes must resume soon (the measured
// time is logged; the bound is generous).

const (
	flapEvery  = 2 * time.Second
	flapFor    = 30 * time.Second
	holeFor    = 20 * time.Second
	resumeWait = 30 * time.Second
)

// batches is the pipeline's count of acknowledged batches.
func (h *harness) batches() int64 { return h.pipe.status().Progress.Batches }

// flapLatency is added each way on the engine's path while it flaps: a cluster some way off
// (a 100ms round trip), so that resets meet requests in flight and claims cost round trips.
const flapLatency = 50 * time.Millisecond

// flapping resets every connection to the engine every flapEvery for flapFor, and demands
// batches acknowledged in each half of the window after the first reset: the pipeline keeps
// writing while the network flaps (progress, not a rate).
func flapping() fault {
	w := engineLost
	w.ifMet = true
	return fault{name: fmt.Sprintf("engine connections reset every %v for %v", flapEvery, flapFor), proxied: true, want: w,
		inject: func(h *harness) error {
			p := h.engProxy
			p.SetLatency(faultproxy.Both, flapLatency)
			defer p.SetLatency(faultproxy.Both, 0)
			p.SetResetEvery(flapEvery)
			defer p.SetResetEvery(0)
			time.Sleep(flapEvery) // the first reset (shaping: the counts below are the assertion)
			first := h.batches()
			time.Sleep((flapFor - flapEvery) / 2)
			mid := h.batches()
			time.Sleep((flapFor - flapEvery) / 2)
			last := h.batches()
			st := h.pipe.status()
			h.t.Logf("batches acknowledged while flapping: %d in the first half, %d in the second (%d connections reset; %d backpressure retries since the fault)",
				mid-first, last-mid, p.Stats().Resets, st.Progress.Retries-h.retriesAt)
			if mid == first || last == mid {
				return fmt.Errorf("no batch acknowledged in a half of the flapping (%d, then %d)", mid-first, last-mid)
			}
			return nil
		}}
}

// blackholeResume swallows everything between the pipeline and the engine for holeFor, then
// lets it through again -- the connections that lived through it are kept, as a network that
// returns keeps them -- and demands a batch acknowledged within resumeWait of the return.
func blackholeResume() fault {
	w := healthWant{unhealthy: []string{cdc.HealthUnavailable, cdc.HealthNotAnswering, cdc.HealthBackpressure, cdc.HealthReconnecting}, during: true}
	return fault{name: fmt.Sprintf("engine black hole %v, then back", holeFor), proxied: true, want: w,
		inject: func(h *harness) error {
			p := h.engProxy
			p.SetBlackhole(faultproxy.Both)
			time.Sleep(holeFor) // the fault itself
			before := h.batches()
			p.SetBlackhole(faultproxy.None)
			back := time.Now()
			for h.batches() == before {
				if time.Since(back) > resumeWait {
					return fmt.Errorf("no batch acknowledged within %v of the network returning", resumeWait)
				}
				time.Sleep(50 * time.Millisecond)
			}
			h.t.Logf("writes resumed %v after the network returned", time.Since(back).Round(10*time.Millisecond))
			return nil
		}}
}

// TestFaultEngineFlapping: the path to Elasticsearch (100ms round trip) resets every
// connection every 2s for 30s; the pipeline keeps writing and the index equals the source at
// the end.
func TestFaultEngineFlapping(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: es}, flapping())
}

// TestFaultEngineBlackholeResume: the path to OpenSearch is a black hole for 20s, then works
// again; writes resume within seconds.
func TestFaultEngineBlackholeResume(t *testing.T) {
	runFault(t, testenv.RequireFaults(t), caseSpec{source: "postgres", engine: ops}, blackholeResume())
}
