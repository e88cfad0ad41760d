package cdc_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// versionedSink is a ConcurrentSink applying writes with external-version rules to an
// in-memory index whose deletes leave no tombstone at all (index.gc_deletes of zero: the
// worst case), so a delete overtaken by an older write of the same document lets that write
// bring the row back. Each Write waits until the test answers it, in an order the test picks.
type versionedSink struct {
	mu       sync.Mutex
	docs     map[int64]doc
	pending  []*call
	maxAtSea int
	answered map[int]bool // transactions of batches the sink answered with success
	orderErr error
}

type doc struct {
	version int64
	name    string
}

type call struct {
	batch []cdc.Event
	reply chan error // nil: apply; otherwise the error to answer with
}

func (s *versionedSink) ConcurrentWrites() bool                 { return true }
func (s *versionedSink) IdentityColumns(*cdc.TableSchema) []int { return nil }
func (s *versionedSink) atSea() int                             { s.mu.Lock(); defer s.mu.Unlock(); return len(s.pending) }
func (s *versionedSink) answeredTx(tx int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered[tx]
}
func (s *versionedSink) state() map[int64]doc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyDocs(s.docs)
}
func copyDocs(m map[int64]doc) map[int64]doc {
	out := make(map[int64]doc, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
func (s *versionedSink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	c := &call{batch: batch, reply: make(chan error, 1)}
	s.mu.Lock()
	s.pending = append(s.pending, c)
	s.maxAtSea = max(s.maxAtSea, len(s.pending))
	s.mu.Unlock()
	var err error
	select {
	case err = <-c.reply:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range batch {
		v := ev.Position.Version()
		switch ev.Op {
		case cdc.Delete:
			s.remove(ev.Before[0].(int64), v)
		case cdc.Insert, cdc.Update:
			id := ev.After[0].(int64)
			if ev.Before != nil && ev.Before[0].(int64) != id {
				s.remove(ev.Before[0].(int64), v)
			}
			if d, ok := s.docs[id]; !ok || d.version < v {
				s.docs[id] = doc{v, ev.After[1].(string)}
			}
		}
		s.answered[ev.Position.(pos).tx] = true
	}
	return nil, nil
}

func (s *versionedSink) remove(id, v int64) {
	if d, ok := s.docs[id]; ok && d.version < v {
		delete(s.docs, id) // no tombstone
	}
}

// answer answers one pending Write picked at random: success, or now and then backpressure.
func (s *versionedSink) answer(rng *rand.Rand) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return false
	}
	i := rng.IntN(len(s.pending))
	c := s.pending[i]
	s.pending = append(s.pending[:i], s.pending[i+1:]...)
	var err error
	if rng.IntN(5) == 0 {
		err = &cdc.BackpressureError{Err: errors.New("429")}
	}
	c.reply <- err
	return true
}

// checkingStore saves checkpoints and checks, at each save, that it moves forward and that
// every transaction up to it was answered by the sink.
type checkingStore struct {
	*statestore.Memory
	sink  *versionedSink
	t     *testing.T
	mu    sync.Mutex
	last  int
	saves int
}

func (c *checkingStore) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	tx, _ := strconv.Atoi(string(cp))
	c.mu.Lock()
	if tx <= c.last {
		c.t.Errorf("checkpoint %d saved after %d", tx, c.last)
	}
	c.last = tx
	c.saves++
	c.mu.Unlock()
	for i := 1; i <= tx; i++ {
		if !c.sink.answeredTx(i) {
			c.t.Errorf("checkpoint %d saved before the sink answered transaction %d", tx, i)
			break
		}
	}
	return c.Memory.SaveCheckpoint(ctx, pipeline, cp)
}

// randomChanges is a stream of one-change transactions over a few keys: inserts, updates,
// updates that change the key, deletes. It returns the events and the table they leave.
func randomChanges(rng *rand.Rand, n int) ([]cdc.Event, map[int64]doc) {
	table := map[int64]doc{}
	var evs []cdc.Event
	for tx := 1; len(evs) < n; tx++ {
		id := int64(rng.IntN(8))
		name := "v" + strconv.Itoa(tx)
		p := pos{tx, 0}
		ev := cdc.Event{Table: table0, Schema: schema, Position: p, TxID: strconv.Itoa(tx), Checkpoint: cdc.Checkpoint(strconv.Itoa(tx))}
		_, exists := table[id]
		switch {
		case !exists:
			ev.Op, ev.After = cdc.Insert, []cdc.Value{id, name}
			table[id] = doc{p.Version(), name}
		case rng.IntN(3) == 0:
			ev.Op, ev.Before = cdc.Delete, []cdc.Value{id, nil}
			delete(table, id)
		case rng.IntN(3) == 0:
			to := int64(8 + rng.IntN(4))
			if _, taken := table[to]; taken {
				to = id
			}
			ev.Op, ev.Before, ev.After = cdc.Update, []cdc.Value{id, nil}, []cdc.Value{to, name}
			delete(table, id)
			table[to] = doc{p.Version(), name}
		default:
			ev.Op, ev.Before, ev.After = cdc.Update, []cdc.Value{id, "old"}, []cdc.Value{id, name}
			table[id] = doc{p.Version(), name}
		}
		evs = append(evs, ev)
	}
	return evs, table
}

var table0 = table

// TestRunnerPipelinedBatchesConverge runs random changes through a runner with several
// batches at the sink at once, answered in random order with random backpressure, into an
// index that keeps no tombstones: the index must end equal to the table, the checkpoint must
// only move forward and never past a batch the sink has not answered, and batches must
// really have been at the sink together.
func TestRunnerPipelinedBatchesConverge(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run("seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				evs, want := randomChanges(rng, 300)
				sink := &versionedSink{docs: map[int64]doc{}, answered: map[int]bool{}}
				store := &checkingStore{Memory: statestore.NewMemory(), sink: sink, t: t}
				src := &fakeSource{}
				r, err := cdc.NewRunner("pipe", src, sink, store, &memDLQ{}, &cdc.RunnerOptions{BatchMaxEvents: 1 + rng.IntN(6), BatchMaxWait: time.Hour, MaxInFlight: 4,
					BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond, Rand: rand.New(rand.NewPCG(seed, 8))})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- r.Run(t.Context()) }()
				synctest.Wait()
				st := src.stream(0)
				go func() {
					st.send(evs...)
					st.end(nil)
				}()
				for {
					synctest.Wait()
					select {
					case err := <-done:
						if err != nil {
							t.Fatal(err)
						}
					default:
						if !sink.answer(rng) {
							time.Sleep(20 * time.Millisecond) // virtual: a backoff elapses
						}
						continue
					}
					break
				}
				got := sink.state()
				for id, d := range want {
					if g, ok := got[id]; !ok || g.name != d.name {
						t.Errorf("document %d: got %+v (present %v), want %+v", id, g, ok, d)
					}
				}
				for id := range got {
					if _, ok := want[id]; !ok {
						t.Errorf("document %d is in the index, not in the table", id)
					}
				}
				if sink.maxAtSea < 2 {
					t.Errorf("at most %d batches at the sink at once: not pipelined", sink.maxAtSea)
				}
				if last, _ := strconv.Atoi(string(evs[len(evs)-1].Checkpoint)); store.last != last {
					t.Errorf("last checkpoint %d, want %d", store.last, last)
				}
			})
		})
	}
}

// concurrentFakeSink is a fakeSink the runner may write several batches to at once.
type concurrentFakeSink struct{ fakeSink }

func (*concurrentFakeSink) ConcurrentWrites() bool                 { return true }
func (*concurrentFakeSink) IdentityColumns(*cdc.TableSchema) []int { return nil }

// A batch the sink is slow to answer holds one slot only: the batches after it that landed
// wait for it to be committed without keeping new batches from the sink, up to MaxInFlight
// of them; the checkpoint waits for the slow batch.
func TestRunnerSlowBatchHoldsOneSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		sink := &concurrentFakeSink{fakeSink{respond: func(_ int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			if string(batch[0].Checkpoint) == "1" {
				<-release
			}
			return nil, nil
		}}}
		src, mem := &fakeSource{}, statestore.NewMemory()
		r, err := cdc.NewRunner("pipe", src, sink, mem, &memDLQ{}, &cdc.RunnerOptions{MaxInFlight: 2, BatchMaxEvents: 1, BatchMaxWait: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		defer func() { // a failed check leaves nothing blocked in the bubble
			cancel()
			select {
			case <-release:
			default:
				close(release)
			}
		}()
		synctest.Wait()
		st := src.stream(0)
		go func() {
			for tx := 1; tx <= 8; tx++ {
				if !st.send(txEvents(tx, 1)...) {
					return
				}
			}
		}()
		synctest.Wait()
		// Batch 1 at the sink, 2..4 answered, 5 waits: one slot is free, but 2*MaxInFlight
		// batches are uncommitted.
		if n := len(sink.calls()); n != 4 {
			t.Fatalf("%d batches written while the first was unanswered, want 4", n)
		}
		cp, err := mem.LoadCheckpoint(ctx, "pipe")
		if err != nil || cp != nil {
			t.Fatalf("checkpoint %q (%v) before the first batch was answered", cp, err)
		}
		close(release)
		synctest.Wait()
		if n := len(sink.calls()); n != 8 {
			t.Fatalf("%d batches written, want 8", n)
		}
		if cp, err := mem.LoadCheckpoint(ctx, "pipe"); err != nil || string(cp) != "8" {
			t.Fatalf("checkpoint %q (%v), want 8", cp, err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want the context's end", err)
		}
	})
}
