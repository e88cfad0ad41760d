package hasuite

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/faultproxy"
)

// The soak (doc.go, The soak).

const (
	// envSchedules is the number of schedules TestSoakHA runs; unset, it is skipped (`make
	// soak-ha` sets it).
	envSchedules = "TRIBUTARY_HA_SOAK_SCHEDULES"
	// envSeed is the first schedule's seed (default random); schedule i runs seed+i.
	envSeed = "TRIBUTARY_HA_SOAK_SEED"
)

// soakTTL is every schedule's lease TTL.
const soakTTL = 3 * time.Second

type haStep struct {
	kind string        // kill, stop, partition, slow, term
	gap  time.Duration // load before the fault
	hold time.Duration // stop, partition and slow: how long
}

type schedule struct {
	seed  uint64
	steps []haStep
}

func (s schedule) String() string {
	parts := make([]string, len(s.steps))
	for i, st := range s.steps {
		parts[i] = fmt.Sprintf("+%.1fs %s", st.gap.Seconds(), st.kind)
		if st.kind == "stop" || st.kind == "partition" || st.kind == "slow" {
			parts[i] += fmt.Sprintf(" %.1fs", st.hold.Seconds())
		}
	}
	return strings.Join(parts, ", ")
}

// newSchedule draws one to three faults of the active from seed.
func newSchedule(seed uint64) schedule {
	r := rand.New(rand.NewPCG(seed, 0x4a50a))
	s := schedule{seed: seed}
	for range 1 + r.IntN(3) {
		kinds := []string{"kill", "stop", "partition", "slow", "term"}
		s.steps = append(s.steps, haStep{kind: kinds[r.IntN(len(kinds))],
			gap:  time.Second + time.Duration(r.IntN(31))*100*time.Millisecond,
			hold: soakTTL/2 + time.Duration(r.Int64N(int64(5*soakTTL/2))).Round(100*time.Millisecond)})
	}
	return s
}

func TestSoakHA(t *testing.T) {
	v := os.Getenv(envSchedules)
	if v == "" {
		t.Skipf("soak skipped: %s is unset (`make soak-ha` sets it)", envSchedules)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", envSchedules, v)
	}
	seed := rand.Uint64() >> 1
	if s := os.Getenv(envSeed); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envSeed, s, err)
		}
	}
	t.Logf("soak-ha: %d schedules from seed %d", n, seed)
	began := time.Now()
	var failed []string
	for i := range n {
		s := newSchedule(seed + uint64(i))
		ok := t.Run(fmt.Sprintf("seed=%d", s.seed), func(t *testing.T) {
			t.Logf("schedule seed=%d: %s", s.seed, s)
			runSchedule(t, s)
		})
		if !ok {
			failed = append(failed, fmt.Sprintf("seed=%d: %s", s.seed, s))
		}
	}
	t.Logf("soak-ha: %d schedules, %d failed, mean schedule %.1f s", n, len(failed), time.Since(began).Seconds()/float64(n))
	if len(failed) > 0 {
		t.Errorf("failed schedules (repeat one: make soak-ha SOAK_HA_SEED=<seed> SOAK_HA_SCHEDULES=1):\n%s", strings.Join(failed, "\n"))
	}
}

func runSchedule(t *testing.T, s schedule) {
	h := newHarness(t, options{ttl: soakTTL, seed: s.seed})
	active, _ := h.begin()
	for i, st := range s.steps {
		time.Sleep(st.gap)
		epoch := epochOf(t, active)
		other := h.other(active)
		began := time.Now()
		switch st.kind {
		case "kill":
			active.kill()
			h.takeover("soak-kill", other, epoch, began)
			active.start()
		case "term":
			active.term()
			h.takeover("soak-term", other, epoch, began)
			active.start()
		case "stop":
			active.signal(syscall.SIGSTOP)
			time.Sleep(st.hold)
			active.signal(syscall.SIGCONT)
		case "partition", "slow":
			if st.kind == "slow" {
				active.proxy.SetLatency(faultproxy.Both, 2*time.Second)
			} else {
				active.proxy.SetBlackhole(faultproxy.Both)
			}
			time.Sleep(st.hold)
			if err := active.proxy.Heal(); err != nil {
				t.Fatal(err)
			}
			if st.kind == "partition" {
				active.proxy.ResetAll()
			}
		}
		next := h.settled()
		took := "no takeover"
		if at, ok := h.mon.first(next.name, began, func(p pipeStatus) bool { return p.role() == cdc.RoleActive && p.epoch() > epoch }); ok {
			took = fmt.Sprintf("takeover after %s", at.Sub(began).Round(time.Millisecond))
		}
		t.Logf("step %d (%s): settled after %s, %s active (%s)", i+1, st.kind, time.Since(began).Round(time.Millisecond), next.name, took)
		active = next
	}
	h.finish()
}
