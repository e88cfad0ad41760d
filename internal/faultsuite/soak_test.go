package faultsuite

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// Environment variables of the soak.
const (
	// envSchedules is the number of randomized fault schedules TestFaultSoak runs; unset, it
	// is skipped (`make soak` sets it).
	envSchedules = "TRIBUTARY_SOAK_SCHEDULES"
	// envSoakSeed is the first schedule's seed (default random); schedule i runs seed+i.
	envSoakSeed = "TRIBUTARY_SOAK_SEED"
)

// schedule is one soak run: a source, an engine and a few faults, each after a gap of load.
type schedule struct {
	seed  uint64
	spec  caseSpec
	steps []step
}

type step struct {
	gap time.Duration // load before the fault
	f   fault
}

func (s schedule) String() string {
	parts := make([]string, len(s.steps))
	for i, st := range s.steps {
		parts[i] = fmt.Sprintf("+%.1fs %s", st.gap.Seconds(), st.f.name)
	}
	return fmt.Sprintf("%s->%s: %s", s.spec.source, s.spec.engine, strings.Join(parts, ", "))
}

// newSchedule draws a schedule from its seed: the source and engine, one to three faults of
// the kinds that apply (engine restarts, the slow ones, less often), their modes, lengths and
// the gaps between them.
func newSchedule(seed uint64) schedule {
	r := rand.New(rand.NewPCG(seed, 0x50a1c))
	s := schedule{seed: seed, spec: caseSpec{source: pick(r, "postgres", "mariadb"), engine: pick(r, es, ops), proxied: true, seed: seed}}
	secs := func(lo, hi int) time.Duration {
		return time.Duration(lo*10+r.IntN((hi-lo)*10+1)) * 100 * time.Millisecond
	}
	for range 1 + r.IntN(3) {
		var f fault
		switch k := r.IntN(20); {
		case k < 4:
			if s.spec.source == "postgres" {
				f = restart("postgres", pick(r, "fast", "immediate"))
			} else {
				f = restart("mariadb", pick(r, "graceful", "kill"))
			}
		case k < 6 && s.spec.source == "postgres":
			f = terminateWalsender()
		case k < 8:
			f = outage(s.spec.source, secs(1, 20))
		case k < 11:
			f = partition(pick(r, "source", "engine"), secs(2, 20))
		case k < 14:
			f = resets(pick(r, "source", "engine"), secs(0, 4))
		case k < 16:
			f = restart(s.spec.engine, pick(r, "graceful", "kill"))
		default:
			f = resets("source", 0)
		}
		s.steps = append(s.steps, step{gap: secs(0, 4), f: f})
	}
	return s
}

func pick[T any](r *rand.Rand, v ...T) T { return v[r.IntN(len(v))] }

// want is what the schedule must have made the pipeline report: the union of its faults'
// expectations, except for partitions, whose report depends on their length (the lag
// measurement needs more than its timeout): they only demand the reopened stream.
func (s schedule) want() healthWant {
	var w healthWant
	for _, st := range s.steps {
		fw := st.f.want
		if fw.during {
			fw = healthWant{reconnect: fw.reconnect}
		}
		for _, c := range fw.unhealthy {
			if !slices.Contains(w.unhealthy, c) {
				w.unhealthy = append(w.unhealthy, c)
			}
		}
		w.reconnect = w.reconnect || fw.reconnect
	}
	return w
}

// run runs the schedule as a case and returns its result.
func (s schedule) run(t *testing.T, srv *testenv.Servers) result {
	h := newHarness(t, srv, s.spec)
	h.run()
	var errs []string
	h.withLoadSteps(s.steps, func(i int) {
		if err := s.steps[i].f.inject(h); err != nil {
			errs = append(errs, fmt.Sprintf("fault %d (%s): %v", i+1, s.steps[i].f.name, err))
		}
	})
	res := h.verify(s.want())
	res.problems = append(errs, res.problems...)
	h.report(s.String(), res)
	return res
}

// TestFaultSoak runs TRIBUTARY_SOAK_SCHEDULES randomized fault schedules, each ending with the
// row-by-row comparison, and prints how many ran, how many diverged and how long one took.
// It keeps going after a failed schedule and fails at the end if any did.
func TestFaultSoak(t *testing.T) {
	srv := testenv.RequireFaults(t)
	v := os.Getenv(envSchedules)
	if v == "" {
		t.Skipf("soak skipped: %s is unset (`make soak` runs it)", envSchedules)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive number", envSchedules, v)
	}
	seed := rand.Uint64N(1 << 40)
	if v := os.Getenv(envSoakSeed); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q is not a number", envSoakSeed, v)
		}
	}
	t.Logf("soak: %d schedules from seed %d", n, seed)
	var diverged, failed []uint64
	var total float64
	for i := range n {
		s := newSchedule(seed + uint64(i))
		var res result
		ok := t.Run(fmt.Sprintf("seed=%d", s.seed), func(t *testing.T) {
			t.Logf("schedule %d/%d: %s", i+1, n, s)
			res = s.run(t, srv)
		})
		total += res.seconds
		switch {
		case res.diverged:
			diverged = append(diverged, s.seed)
		case !ok:
			failed = append(failed, s.seed)
		}
	}
	t.Logf("soak: %d schedules, %d diverged, mean schedule %.1f s", n, len(diverged), total/float64(n))
	for _, sd := range diverged {
		t.Errorf("soak: schedule seed=%d diverged: %s (repeat: make soak SOAK_SEED=%d SOAK_SCHEDULES=1)", sd, newSchedule(sd), sd)
	}
	for _, sd := range failed {
		t.Errorf("soak: schedule seed=%d failed other checks: %s (repeat: make soak SOAK_SEED=%d SOAK_SCHEDULES=1)", sd, newSchedule(sd), sd)
	}
}
