package luamerge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
)

// Hot-record workload: hotClients concurrent callers each run hotEach one-item merges, one after
// another, on ONE record through one coalescing Service with the default options.
const hotClients, hotEach = 200, 20

// BenchmarkHotRecord runs the hot-record workload on every backend and reports merges/s, the
// merges refused (any error), and the 50th/99th percentile latency of one merge. Each
// iteration uses a fresh record. Run with -benchtime 1x: one iteration is 4,000 merges.
func BenchmarkHotRecord(b *testing.B) {
	for _, be := range luaBackends {
		b.Run(be.name, func(b *testing.B) {
			a, ns, ds := be.adapter(b)
			e := newEngine(b, &Options{MaxInstructions: 100_000})
			s, err := store.New(map[string]store.Adapter{"main": a}, &store.Options{Merger: e})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close(context.Background()) })
			ctx := context.Background()
			var refused atomic.Int64
			var lat []time.Duration
			var latMu sync.Mutex
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				addr := store.Address{Store: "main", Namespace: ns, Dataset: ds, Key: store.StringKey(fmt.Sprintf("hot-%d-%d", time.Now().UnixNano(), i))}
				inc := store.Document{JSON: []byte(`{"by":1}`)}
				var wg sync.WaitGroup
				for range hotClients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						mine := make([]time.Duration, 0, hotEach)
						for range hotEach {
							t0 := time.Now()
							res, err := s.Do(ctx, []store.Op{store.Merge(addr, increment, inc)}, store.WaitApplied)
							mine = append(mine, time.Since(t0))
							if err == nil {
								err = res[0].Err
							}
							if err != nil {
								refused.Add(1)
							}
						}
						latMu.Lock()
						lat = append(lat, mine...)
						latMu.Unlock()
					}()
				}
				wg.Wait()
				b.StopTimer()
				res, err := s.Do(ctx, []store.Op{store.Read(addr)}, store.WaitApplied)
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
				var got struct{ N int64 }
				if err := json.Unmarshal(res[0].Doc.JSON, &got); err != nil {
					b.Fatal(err)
				}
				if want := int64(hotClients*hotEach) - refused.Load(); got.N != want && refused.Load() == 0 {
					b.Fatalf("counter %d, want %d: an update was lost", got.N, want)
				}
				b.StartTimer()
			}
			elapsed := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(b.N*hotClients*hotEach)/elapsed.Seconds(), "merges/s")
			b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
