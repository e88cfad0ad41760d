package sink

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// pipeBatches is how many batches of benchBatch rows one round of BenchmarkRunnerVsCeiling
// writes per contender: enough that a pipeline fills and stays full.
const pipeBatches = 16

// pipeRuns numbers the calls of runnerVsCeiling.
var pipeRuns atomic.Int64

// sliceSource is a cdc.Source whose one stream delivers a fixed run of events and then ends
// cleanly (the runner's Run then returns nil).
type sliceSource struct{ events []cdc.Event }

func (s sliceSource) Open(_ context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	if cp != nil {
		return nil, fmt.Errorf("sliceSource: opened at a checkpoint: each round starts afresh")
	}
	ch := make(chan cdc.Event, len(s.events))
	for _, e := range s.events {
		ch <- e
	}
	close(ch)
	return sliceStream{ch}, nil
}

type sliceStream struct{ ch chan cdc.Event }

func (s sliceStream) Events() <-chan cdc.Event                { return s.ch }
func (sliceStream) Err() error                                { return nil }
func (sliceStream) Ack(context.Context, cdc.Checkpoint) error { return nil }
func (sliceStream) Progress() cdc.SnapshotProgress            { return cdc.SnapshotProgress{} }
func (sliceStream) Close() error                              { return nil }

// pipeEvents is one round's events: n rows from id first on, each its own version (as a
// source's positions are), a transaction end every 100 events. op Insert is a snapshot's
// shape (new documents), Update a stream's (new versions of existing ones).
func pipeEvents(sch *cdc.TableSchema, op cdc.Op, first, n, version int64) []cdc.Event {
	out := make([]cdc.Event, n)
	for i := range out {
		id := first + int64(i)
		out[i] = ev(op, sch, version+int64(i), nil, []cdc.Value{id, "name " + strconv.FormatInt(id, 10), id % 1000, id%2 == 0,
			float64(id) * 1.25, "SKU-" + strconv.FormatInt(id, 36), "a short note about the order, quoted \"like this\"",
			cdc.EpochMicros(1_700_000_000_000_000 + id), "2026-11-30", id * 7})
		if i%100 == 99 {
			out[i].Checkpoint = cdc.Checkpoint("cp-" + strconv.FormatInt(version+int64(i), 10))
		}
	}
	return out
}

// BenchmarkRunnerVsCeiling measures whether pipelining brings the whole pipeline (cdc.Runner
// gathering batches of 1000 events and committing checkpoints in order, into the sink) to
// the rate this node accepts at all. Side by side in one run, against the same node and
// index, on the same rows:
//
//   - raw-cN: the sink's own pre-encoded _bulk bodies (one per batch of 1000) replayed by N
//     concurrent senders, N = 1, 2, 4, 8 -- the ceiling: only the HTTP exchange and the
//     cluster's work, at every client concurrency;
//   - runner-mM: a cdc.Runner with MaxInFlight M = 1, 2, 4 over a source that hands it the
//     events at once, writing through the sink.
//
// Two shapes: snapshot (inserts of new documents) and stream (new versions of existing ones).
// Each round runs every contender once, in a rotating order. It reports docs/s per contender
// and the ratios runner-best/raw-best (goal >= 0.9: the ceiling at any concurrency) and
// runner-m4/runner-m1 (what pipelining buys), as totals and as medians of per-round ratios.
func BenchmarkRunnerVsCeiling(b *testing.B) {
	engines(b, func(b *testing.B, s *server) {
		for _, shape := range []struct {
			name string
			op   cdc.Op
		}{{"snapshot", cdc.Insert}, {"stream", cdc.Update}} {
			b.Run(shape.name, func(b *testing.B) { runnerVsCeiling(b, s, shape.name, shape.op) })
		}
	})
}

func runnerVsCeiling(b *testing.B, s *server, name string, op cdc.Op) {
	// The framework calls a benchmark more than once (b.N = 1 first): each call's sink owns
	// an index of its own.
	cfg := s.config("p" + name[:2] + strconv.FormatInt(pipeRuns.Add(1), 10))
	k := s.sink(b, cfg, statestore.NewMemory(), nil)
	sch := benchSchema()
	sch.ID.Table = "pipe"
	write(b, k, pipeEvents(sch, cdc.Insert, 0, 1, 1)) // creates and claims the index
	ctx := context.Background()
	const n = pipeBatches * benchBatch
	version := int64(10)
	nextID := int64(0)
	// rows gives the contender about to run its events: a snapshot's are new documents, a
	// stream's rewrite the first n documents with higher versions.
	rows := func() []cdc.Event {
		first := int64(0)
		if op == cdc.Insert {
			first = nextID
			nextID += n
		}
		evs := pipeEvents(sch, op, first, n, version)
		version += n
		return evs
	}
	if op == cdc.Update { // the documents a stream rewrites exist
		for i := 0; i < pipeBatches; i++ {
			write(b, k, pipeEvents(sch, cdc.Insert, int64(i*benchBatch), benchBatch, 5))
		}
	}

	raw := func(senders int) func() func() {
		return func() func() {
			evs := rows()
			var bodies [][]byte
			for i := 0; i < len(evs); i += benchBatch {
				acts, _, err := k.plan(evs[i:i+benchBatch], nil)
				if err != nil {
					b.Fatal(err)
				}
				chunks, _, _ := k.encode(acts, nil)
				for _, c := range chunks {
					bodies = append(bodies, append([]byte(nil), c.body...))
				}
				k.recycle(acts, chunks)
			}
			return func() {
				work := make(chan []byte, len(bodies))
				for _, body := range bodies {
					work <- body
				}
				close(work)
				var wg sync.WaitGroup
				for range senders {
					wg.Go(func() {
						for body := range work {
							ans, err := k.bulk(ctx, body)
							if err != nil || ans.Status != 200 {
								b.Errorf("raw: %v %v", err, ans.Status)
								return
							}
							if errs, _ := answerHasErrors(ans.Body); errs {
								b.Error("raw: item errors")
								return
							}
							ans.Release()
						}
					})
				}
				wg.Wait()
				if b.Failed() {
					b.FailNow()
				}
			}
		}
	}
	runner := func(inFlight int) func() func() {
		return func() func() {
			evs := rows()
			dlq := &memDLQ{}
			r, err := cdc.NewRunner("bench-"+name, sliceSource{evs}, k, statestore.NewMemory(), dlq, &cdc.RunnerOptions{MaxInFlight: inFlight, BatchMaxEvents: benchBatch, BatchMaxWait: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			return func() {
				if err := r.Run(ctx); err != nil {
					b.Fatal(err)
				}
				if p := r.Progress(); p.Events != int64(len(evs)) || len(dlq.recs) > 0 {
					b.Fatalf("runner: %+v, %d dead letters", p, len(dlq.recs))
				}
			}
		}
	}
	var cs []*contender
	for _, c := range []int{1, 2, 4, 8} {
		cs = append(cs, &contender{name: "raw-c" + strconv.Itoa(c), prep: raw(c)})
	}
	for _, m := range []int{1, 2, 4} {
		cs = append(cs, &contender{name: "runner-m" + strconv.Itoa(m), prep: runner(m)})
	}
	rotate(b, cs, nil)
	docs := float64(b.N * n)
	byName := map[string]*contender{}
	best := func(prefix string) *contender {
		var top *contender
		for _, c := range cs {
			if strings.HasPrefix(c.name, prefix) && (top == nil || c.took < top.took) {
				top = c
			}
		}
		return top
	}
	for _, c := range cs {
		byName[c.name] = c
		b.ReportMetric(docs/c.took.Seconds(), c.name+"-docs/s")
	}
	rawBest, runBest := best("raw-"), best("runner-")
	reportRatio(b, rawBest, runBest, "runner/ceiling")
	reportRatio(b, byName["runner-m1"], byName["runner-m4"], "m4/m1")
	b.Logf("%s: ceiling %s, best runner %s", name, rawBest.name, runBest.name)
}
