package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// slowAdapter adds a fixed round trip to every call, as a networked backend would; without it
// the benchmark would measure only the coalescer's own overhead against an in-process map.
type slowAdapter struct {
	driver.Store
	rtt time.Duration
}

func (s slowAdapter) Read(ctx context.Context, a []driver.Address) ([]driver.ReadResult, error) {
	time.Sleep(s.rtt)
	return s.Store.Read(ctx, a)
}

func (s slowAdapter) Write(ctx context.Context, w []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	time.Sleep(s.rtt)
	return s.Store.Write(ctx, w, o)
}

// BenchmarkCoalescing compares 128 goroutines making one-operation calls (coalesced by the
// Service) with the same operations sent as explicit 128-operation batches. ns/op is per
// operation in both, so the ratio batches/single is the coalescer's efficiency (goal >= 0.8).
// `make bench` prints the ratio.
func BenchmarkCoalescing(b *testing.B) {
	const workers = 128
	doc := store.Document{JSON: []byte(`{"name":"bench","n":1}`)}
	for _, rtt := range []time.Duration{0, 500 * time.Microsecond} {
		newService := func(b *testing.B) *store.Service {
			s, err := store.New(map[string]store.Adapter{"m": slowAdapter{memstore.New(), rtt}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close(context.Background()) })
			return s
		}
		key := func(i int) store.Address { return addr("m", fmt.Sprint("k", i%4096)) }
		b.Run(fmt.Sprintf("rtt=%v/single-calls", rtt), func(b *testing.B) {
			s := newService(b)
			ctx := context.Background()
			var wg sync.WaitGroup
			per := (b.N + workers - 1) / workers
			b.ResetTimer()
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range per {
						res, err := s.Do(ctx, []store.Op{store.Put(key(w*per+i), doc)}, store.WaitApplied)
						if err != nil || res[0].Err != nil {
							b.Error(err, res[0].Err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
		b.Run(fmt.Sprintf("rtt=%v/explicit-batches", rtt), func(b *testing.B) {
			s := newService(b)
			ctx := context.Background()
			ops := make([]store.Op, workers)
			b.ResetTimer()
			for done := 0; done < b.N; done += workers {
				for i := range ops {
					ops[i] = store.Put(key(done+i), doc)
				}
				res, err := s.Do(ctx, ops, store.WaitApplied)
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
			}
		})
	}
}
