package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/worker"
)

// mortal is a consumer in a process that can die: once dead, it finishes and commits nothing,
// as a killed process would not.
type mortal struct {
	queue.Consumer
	dead atomic.Bool
}

func (m *mortal) Finish(msgs ...queue.Message) {
	if !m.dead.Load() {
		m.Consumer.Finish(msgs...)
	}
}

func (m *mortal) Commit(ctx context.Context) error {
	if m.dead.Load() {
		return errors.New("the process is dead")
	}
	return m.Consumer.Commit(ctx)
}

// crashing kills its worker's process at its n-th Apply call: before applying, or after
// applying and before the worker could finish anything.
type crashing struct {
	worker.Applier
	n          int
	afterApply bool
	kill       func()
}

func (c *crashing) ApplyInOrder(ctx context.Context, recs []store.QueuedOp) ([]store.Result, error) {
	c.n--
	if c.n == 0 && !c.afterApply {
		c.kill()
		return nil, context.Canceled
	}
	res, err := c.Applier.ApplyInOrder(ctx, recs)
	if c.n == 0 {
		c.kill()
	}
	return res, err
}

// TestWorkerCrashRestartLosesNothing publishes accepted writes while worker after worker is
// killed at a random point of its fetch (before an Apply, right after one, at a random moment
// during one, or before its commit), without committing what it had not committed -- or has
// its ctx cancelled, so that it commits what it finished -- and a new worker of the group
// takes over. At the end every accepted mutation has been applied at
// least once: every put reached the adapter and each record holds its last put; every merge's operation id is in its record's
// set of applied ids (the program adds ids to a set, so the set is exact even when a merge
// ran twice) and the merge counter, which counts applications, is at least the number of
// merges. Nothing is dead-lettered.
func TestWorkerCrashRestartLosesNothing(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	rec := &recording{Store: memstore.New(), seqs: map[store.Address][]int{}}
	r := newRig(t, rec, 4)

	const putKeys, mergeKeys, rounds = 30, 6, 40
	lastPut := map[string]int{}
	puts := map[string][]int{}
	mergeOps := map[string]map[string]bool{}
	seq := 0
	crashes := 0
	for round := range rounds + 10 {
		if round < rounds {
			var ops []store.Op
			for range 5 + rng.IntN(30) {
				seq++
				if rng.IntN(3) == 0 {
					k := fmt.Sprint("c", rng.IntN(mergeKeys))
					id := fmt.Sprint("op", seq)
					if mergeOps[k] == nil {
						mergeOps[k] = map[string]bool{}
					}
					mergeOps[k][id] = true
					ops = append(ops, store.Merge(key(k), progAdd, jsonDoc(t, counter{N: 1, Ops: map[string]bool{id: true}})))
				} else {
					k := fmt.Sprint("p", rng.IntN(putKeys))
					lastPut[k] = seq
					puts[k] = append(puts[k], seq)
					ops = append(ops, store.Put(key(k), jsonDoc(t, counter{Seq: seq})))
				}
			}
			r.accept(t, ops...)
		}

		c, err := r.b.Consumer(topic, group)
		if err != nil {
			t.Fatal(err)
		}
		dlq, _ := r.b.Publisher(dlqTopic)
		m := &mortal{Consumer: c}
		ctx, cancel := context.WithCancel(context.Background())
		kill := func() { m.dead.Store(true); cancel() }
		var applier worker.Applier = r.svc
		crash := round < rounds || rng.IntN(2) == 0 // the last rounds let the backlog drain
		var timer *time.Timer
		if crash {
			crashes++
			die := kill
			switch rng.IntN(4) {
			case 0:
				applier = &crashing{Applier: r.svc, n: 1 + rng.IntN(4), afterApply: rng.IntN(2) == 0, kill: kill}
			case 1: // only the timer below: a kill at a random moment
			case 2:
				m.dead.Store(true) // applies, but dies before its first commit
			case 3:
				die = cancel // not a crash but a hard stop: Run commits what it finished
			}
			// Every crashing worker dies by this timer at the latest.
			timer = time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, die)
		}
		w, err := worker.New("m", m, applier, dlq, &worker.Options{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		var runErr error
		go func() {
			defer wg.Done()
			runErr = w.Run(ctx)
		}()
		if !crash {
			r.waitCommitted(t)
			if err := w.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if timer != nil {
			timer.Stop()
		}
		cancel()
		if !crash && runErr != nil {
			t.Fatalf("round %d: Run: %v", round, runErr) // a killed worker's error is moot
		}
		_ = c.Close() // no commit: a dead process commits nothing more
	}
	// A last, well-behaved worker drains whatever the crashes left.
	stop := r.worker(t, nil)
	r.waitCommitted(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d crashes, %d messages", crashes, len(r.b.Messages(topic)))

	for k, want := range lastPut {
		var c counter
		if err := json.Unmarshal(r.read(t, key(k)).Doc.JSON, &c); err != nil || c.Seq != want {
			t.Errorf("%s holds put %d (%v), want the last one accepted, %d", k, c.Seq, err, want)
		}
		applied := map[int]bool{}
		rec.mu.Lock()
		for _, s := range rec.seqs[key(k)] {
			applied[s] = true
		}
		rec.mu.Unlock()
		for _, s := range puts[k] {
			if !applied[s] {
				t.Errorf("%s: put %d was accepted and never applied", k, s)
			}
		}
	}
	duplicates := 0
	for k, ids := range mergeOps {
		var c counter
		if err := json.Unmarshal(r.read(t, key(k)).Doc.JSON, &c); err != nil {
			t.Fatal(err)
		}
		for id := range ids {
			if !c.Ops[id] {
				t.Errorf("%s: merge %s was accepted and never applied", k, id)
			}
		}
		if len(c.Ops) != len(ids) || c.N < len(ids) {
			t.Errorf("%s: %d ids applied and counter %d, want %d ids and a counter of at least %d", k, len(c.Ops), c.N, len(ids), len(ids))
		}
		duplicates += c.N - len(ids)
	}
	t.Logf("%d merges applied more than once", duplicates)
	if n := len(r.b.Messages(dlqTopic)); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}
