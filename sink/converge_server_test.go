package sink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// convergeRuns is how many randomized runs each engine gets (at least 200 in CI).
const convergeRuns = 200

// TestSinkConvergeRandomized drives random histories of a small key space through the sink
// with batches replayed, reordered and duplicated, and "crashes" (a new sink session on the same
// state store, which claims the index again, replaying batches already acknowledged but not
// checkpointed). Every run must end with the index equal to the model, row by row. All runs
// share one index, each with its own keys, so a run costs a few small _bulk requests and one
// real-time _mget.
func TestSinkConvergeRandomized(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		st := statestore.NewMemory()
		cfg := s.config("conv")
		// Small requests, two at a time: batches above three actions take the split path.
		cfg.Batch.MaxDocs, cfg.Concurrency = 3, 2
		k := s.sink(t, cfg, st, nil)
		idx := indexOf(t, k, "orders")
		sch := ordersSchema("orders")
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 7))
		var crashes, deliveries int
		for run := 0; run < convergeRuns; run++ {
			base := int64(run) * 100
			model := map[int64][]cdc.Value{}
			var events []cdc.Event
			version := int64(1)
			// A source history: inserts, updates (some changing the key), deletes.
			for i, n := 0, 5+r.IntN(25); i < n; i++ {
				key := base + int64(r.IntN(6))
				version += 1 + int64(r.IntN(3))
				cur, exists := model[key]
				switch {
				case !exists:
					nr := row(key, "r"+strconv.Itoa(i), int64(i))
					model[key] = nr
					op := cdc.Insert
					if r.IntN(4) == 0 {
						op = cdc.Read
					}
					events = append(events, ev(op, sch, version, nil, nr))
				case r.IntN(3) == 0:
					delete(model, key)
					events = append(events, ev(cdc.Delete, sch, version, cur, nil))
				default:
					nk := key
					if r.IntN(4) == 0 {
						if c := base + int64(r.IntN(6)); model[c] == nil {
							nk = c
						}
					}
					nr := row(nk, "u"+strconv.Itoa(i), int64(i))
					delete(model, key)
					model[nk] = nr
					var before []cdc.Value
					if nk != key || r.IntN(2) == 0 {
						before = cur
					}
					events = append(events, ev(cdc.Update, sch, version, before, nr))
				}
			}
			var batches [][]cdc.Event
			for len(events) > 0 {
				n := min(1+r.IntN(5), len(events))
				batches = append(batches, events[:n])
				events = events[n:]
			}
			// A delivery schedule: every batch at least once, plus duplicates and replays,
			// in a shuffled order.
			var order []int
			for i := range batches {
				order = append(order, i)
				for r.IntN(3) == 0 {
					order = append(order, r.IntN(i+1))
				}
			}
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for pos, b := range order {
				if r.IntN(25) == 0 {
					// A crash between ack and checkpoint: a new session claims the index
					// again and replays what was applied since the last checkpoint.
					crashes++
					k = s.sink(t, cfg, st, nil)
					for _, again := range order[max(0, pos-3):pos] {
						writeConverge(t, k, batches[again])
						deliveries++
					}
				}
				writeConverge(t, k, batches[b])
				deliveries++
			}
			ids := make([]string, 6)
			for i := range ids {
				ids[i] = strconv.FormatInt(base+int64(i), 10)
			}
			docs, _ := s.docs(t, idx, ids)
			for i := int64(0); i < 6; i++ {
				want, got := model[base+i], docs[strconv.FormatInt(base+i, 10)]
				if (want == nil) != (got == nil) {
					t.Fatalf("run %d (seed %d): key %d: model %v, index %v", run, seed, base+i, want, got)
				}
				if want != nil && (got["name"] != want[1] || fmt.Sprint(got["qty"]) != fmt.Sprint(want[2]) || got["ok"] != want[3]) {
					t.Fatalf("run %d (seed %d): key %d: model %v, index %v", run, seed, base+i, want, got)
				}
			}
		}
		t.Logf("%d runs, %d deliveries, %d crashes", convergeRuns, deliveries, crashes)
	})
}

func writeConverge(t *testing.T, k *Sink, batch []cdc.Event) {
	t.Helper()
	dead, err := k.Write(context.Background(), batch)
	var bp *cdc.BackpressureError
	if errors.As(err, &bp) {
		// The runner would offer the same batch again.
		dead, err = k.Write(context.Background(), batch)
	}
	if err != nil || len(dead) != 0 {
		t.Fatalf("Write: %v, dead letters %v", err, dead)
	}
}
