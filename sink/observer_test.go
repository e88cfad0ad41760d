package sink

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu     sync.Mutex
	bulks  []BulkStats
	claims []string
}

func (r *recorder) BulkDone(s BulkStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bulks = append(r.bulks, s)
}

func (r *recorder) Claimed(index string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claims = append(r.claims, index)
}

// The observer hears one BulkStats per _bulk request -- the split requests of a batch, the
// retry of per-item 429s, a whole-request failure and a lost connection each count as one --
// with the per-item outcomes the answer gave, and one Claimed per claim, including the claim
// again after a lost connection.
func TestObserverCountsEachRequest(t *testing.T) {
	f := newFakeCluster(t)
	rec := &recorder{}
	cfg := Config{Concurrency: 1, Batch: Batch{MaxDocs: 4}}
	k := fakeSink(t, f, cfg, nil, Options{Observer: rec})
	sch := ordersSchema("orders")
	ctx := context.Background()

	// Write 1: six rows in requests of 4 and 2; in the first, item 1 is a mapping error
	// and item 2 a per-item 429 that succeeds on its retry.
	f.FailItems(func(call, i int) int {
		switch {
		case call == 1 && i == 1:
			return http.StatusBadRequest
		case call == 1 && i == 2:
			return http.StatusTooManyRequests
		}
		return 0
	})
	batch := fakeEvents(sch, 1, 6)
	dead, err := k.Write(ctx, batch)
	if err != nil || len(dead) != 1 || dead[0].Index != 1 {
		t.Fatalf("write 1: %v, dead %v", err, dead)
	}
	// Write 2: the same batch replayed; the row dead-lettered before now goes in, the rest
	// are superseded.
	f.FailItems(nil)
	if dead, err := k.Write(ctx, batch); err != nil || len(dead) != 0 {
		t.Fatalf("write 2: %v, dead %v", err, dead)
	}
	// Write 3: 503 for the whole request, then a lost connection: backpressure both times.
	f.failWhole("_bulk", func(call int) int {
		switch call {
		case 6:
			return http.StatusServiceUnavailable
		case 7:
			return -1
		}
		return 0
	})
	for range 2 {
		if _, err := k.Write(ctx, fakeEvents(sch, 7, 1)); !errors.As(err, new(*cdc.BackpressureError)) {
			t.Fatalf("want backpressure, got %v", err)
		}
	}
	// Write 4 claims again (the connection was lost) and succeeds.
	if _, err := k.Write(ctx, fakeEvents(sch, 7, 1)); err != nil {
		t.Fatal(err)
	}

	want := []BulkStats{
		{Actions: 4, Status: 200, Applied: 2, DeadLettered: 1, Retried: 1},
		{Actions: 1, Status: 200, Applied: 1},
		{Actions: 2, Status: 200, Applied: 2},
		{Actions: 4, Status: 200, Applied: 1, Superseded: 3},
		{Actions: 2, Status: 200, Superseded: 2},
		{Actions: 1, Status: 503},
		{Actions: 1, Status: 0},
		{Actions: 1, Status: 200, Applied: 1},
	}
	if len(rec.bulks) != len(want) || len(f.bodies()) != len(want) {
		t.Fatalf("%d BulkDone calls for %d requests, want %d: %+v", len(rec.bulks), len(f.bodies()), len(want), rec.bulks)
	}
	for i, got := range rec.bulks {
		w := want[i]
		w.Bytes = f.bodies()[i]
		w.Duration = got.Duration // time is not asserted
		if got != w {
			t.Errorf("request %d: %+v, want %+v", i+1, got, w)
		}
	}
	idx := indexOf(t, k, "orders")
	if len(rec.claims) != 2 || rec.claims[0] != idx || rec.claims[1] != idx {
		t.Fatalf("Claimed %v, want %s twice (first use, and after the lost connection)", rec.claims, idx)
	}
}
