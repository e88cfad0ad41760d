package sink

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/statestore"
)

// orderedCheckpoints is a checkpoint store that records every checkpoint saved.
type orderedCheckpoints struct {
	*statestore.Memory
	mu    sync.Mutex
	saved []string
}

func (c *orderedCheckpoints) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	c.mu.Lock()
	c.saved = append(c.saved, string(cp))
	c.mu.Unlock()
	return c.Memory.SaveCheckpoint(ctx, pipeline, cp)
}

// concurrentBulks passes requests on and keeps the largest number of _bulk requests it had in
// flight at once.
type concurrentBulks struct {
	next     esapi.Transport
	now, max atomic.Int64
}

func (c *concurrentBulks) Perform(r *http.Request) (*http.Response, error) {
	if !isBulk(r) {
		return c.next.Perform(r)
	}
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
	}
	return c.next.Perform(r)
}

// TestSinkPipelinedBackpressureConverges runs a cdc.Runner with four batches in flight into the
// real node through a proxy that answers some _bulk requests with 429 while the batches after
// them may be at the node (how many are at once is logged): every fourth request is refused unapplied (Respond), every seventh is
// applied and then refused (ForwardThenRespond: the node indexed it, the sink is told it did
// not). Inserts, updates (some moving a row to a new key) and deletes of 120 rows, in batches of
// 40. The index must end equal to the model of the source row by row (present exactly the
// live rows, each with its last values), the checkpoints must have been saved in source order,
// the last one the stream's last, and batches must have been offered again.
func TestSinkPipelinedBackpressureConverges(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		p, err := faultproxy.NewHTTP(s.URL, faultproxy.HTTPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var bulks atomic.Int64
		// Match runs once per request that reaches the rule: count the _bulk requests there.
		refuse := func(every int64) func(*http.Request) bool {
			return func(r *http.Request) bool { return isBulk(r) && bulks.Load()%every == every-1 }
		}
		if _, err := p.AddRule(faultproxy.Rule{Name: "count", Match: func(r *http.Request) bool {
			if isBulk(r) {
				bulks.Add(1)
			}
			return false
		}}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []faultproxy.Rule{
			{Name: "refused", Match: refuse(4), Action: faultproxy.Respond, Response: faultproxy.TooManyRequests(0)},
			{Name: "applied-then-refused", Match: refuse(7), Action: faultproxy.ForwardThenRespond, Response: faultproxy.TooManyRequests(0)},
		} {
			if _, err := p.AddRule(r); err != nil {
				t.Fatal(err)
			}
		}
		cfg := s.config("fl")
		cfg.URL = p.URL()
		tp := &concurrentBulks{next: estest.Connect(t, s.Engine, p.URL()).Transport}
		k := s.sink(t, cfg, statestore.NewMemory(), tp)
		sch := ordersSchema("flight")
		write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1_000_000, "warm", 0))}) // creates the index
		idx := indexOf(t, k, "flight")

		// The source: a random history, with a model of what the table holds after it.
		rng := rand.New(rand.NewPCG(16, 4))
		const ids = 120
		live := map[int64][]cdc.Value{}
		var evs []cdc.Event
		version := int64(10)
		add := func(e cdc.Event) {
			version++
			e.Position = pos(version)
			if len(evs)%5 == 4 {
				e.Checkpoint = cdc.Checkpoint(strconv.FormatInt(version, 10))
			}
			evs = append(evs, e)
		}
		for len(evs) < 1200 {
			id := int64(rng.IntN(ids))
			old, exists := live[id]
			switch n := rng.IntN(10); {
			case !exists:
				r := row(id, "v"+strconv.Itoa(len(evs)), int64(len(evs)))
				add(ev(cdc.Insert, sch, 0, nil, r))
				live[id] = r
			case n < 5:
				r := row(id, "v"+strconv.Itoa(len(evs)), int64(len(evs)))
				add(ev(cdc.Update, sch, 0, old, r))
				live[id] = r
			case n < 7:
				to := int64(ids + rng.IntN(ids)) // a key change, into a key that may be in use
				if _, taken := live[to]; taken {
					continue
				}
				r := row(to, "moved"+strconv.Itoa(len(evs)), int64(len(evs)))
				add(ev(cdc.Update, sch, 0, old, r))
				delete(live, id)
				live[to] = r
			default:
				add(ev(cdc.Delete, sch, 0, old, nil))
				delete(live, id)
			}
		}
		evs[len(evs)-1].Checkpoint = cdc.Checkpoint(strconv.FormatInt(version, 10))

		cps := &orderedCheckpoints{Memory: statestore.NewMemory()}
		dlq := &memDLQ{}
		r, err := cdc.NewRunner("flight", sliceSource{evs}, k, cps, dlq, &cdc.RunnerOptions{MaxInFlight: 4,
			BatchMaxEvents: 40, BatchMaxWait: time.Minute, BackoffMin: time.Millisecond, BackoffMax: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		prog := r.Progress()
		if prog.Events != int64(len(evs)) || len(dlq.recs) != 0 {
			t.Fatalf("progress %+v, %d dead letters", prog, len(dlq.recs))
		}
		if prog.Retries == 0 {
			t.Fatalf("no batch was offered again: the proxy refused nothing (%d _bulk requests)", bulks.Load())
		}
		last := int64(0)
		for _, c := range cps.saved {
			v, _ := strconv.ParseInt(c, 10, 64)
			if v <= last {
				t.Fatalf("checkpoint %s saved after %d: %v", c, last, cps.saved)
			}
			last = v
		}
		if last != version {
			t.Fatalf("last checkpoint saved %d, want the stream's last %d", last, version)
		}
		// How many were at the node at once depends on the scheduler: logged, not asserted.
		t.Logf("%d _bulk requests (at most %d at once), %d batches offered again, %d checkpoints",
			bulks.Load(), tp.max.Load(), prog.Retries, len(cps.saved))

		// Row by row: every key ever used, present exactly when live, with its last values.
		var keys []string
		for id := int64(0); id < 2*ids; id++ {
			keys = append(keys, strconv.FormatInt(id, 10))
		}
		docs, err := s.Mget(t, idx, keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			id := int64(i)
			want, ok := live[id]
			if d.Found != ok {
				t.Errorf("id %d: in the index %v, in the source %v", id, d.Found, ok)
				continue
			}
			if !ok {
				continue
			}
			m, err := d.Object()
			if err != nil {
				t.Fatal(err)
			}
			if m["name"] != want[1] || m["qty"].(interface{ String() string }).String() != strconv.FormatInt(want[2].(int64), 10) ||
				m["ok"] != want[3] {
				t.Errorf("id %d: index %s, source %v", id, bytes.TrimSpace(d.Source), want)
			}
		}
	})
}
