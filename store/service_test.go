package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// blocking holds every call until release is closed.
type blocking struct {
	driver.Store
	release chan struct{}
	entered chan struct{}
}

func (b *blocking) Read(ctx context.Context, a []driver.Address) ([]driver.ReadResult, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.Store.Read(ctx, a)
}

func addr(st, k string) store.Address {
	return store.Address{Store: st, Namespace: "ns", Dataset: "ds", Key: store.StringKey(k)}
}

func TestSlowStoreDoesNotBlockAnother(t *testing.T) {
	slow := &blocking{Store: memstore.New(), release: make(chan struct{}), entered: make(chan struct{}, 1)}
	s, err := store.New(map[string]store.Adapter{"slow": slow, "fast": memstore.New()}, &store.Options{
		Coalesce: store.CoalesceOptions{MaxInFlight: 1, QueueLimit: 1, MaxBatch: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// One call occupies the slow store's only batch slot; the next fills the collector's next
	// one-operation batch, the one after it the one-place queue. Every further call finds the
	// queue full and fails at once with a retryable error, while those three wait.
	go func() { _, _ = s.Do(ctx, []store.Op{store.Read(addr("slow", "a"))}, store.WaitApplied) }()
	<-slow.entered
	const waiting = 6
	results := make(chan store.Result, waiting)
	for i := range waiting {
		go func() {
			res, err := s.Do(ctx, []store.Op{store.Read(addr("slow", string(rune('b'+i))))}, store.WaitApplied)
			if err != nil {
				res = []store.Result{{Err: err}}
			}
			results <- res[0]
		}()
	}
	if first := <-results; !errors.Is(first.Err, store.ErrUnavailable) {
		t.Fatalf("first answer from a blocked store: %+v, want ErrUnavailable", first)
	}
	// The other store works meanwhile, as single calls and in a batch with the blocked store's
	// results still pending elsewhere.
	res, err := s.Do(ctx, []store.Op{store.Put(addr("fast", "x"), store.Document{JSON: []byte(`{"a":1}`)})}, store.WaitApplied)
	if err != nil || res[0].Outcome != store.Created {
		t.Fatalf("fast store while the slow one is blocked: %v %+v", err, res)
	}
	close(slow.release)
	for range waiting - 1 {
		if r := <-results; r.Err != nil && !errors.Is(r.Err, store.ErrUnavailable) {
			t.Fatalf("a call waiting on the released store: %v", r.Err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do(ctx, []store.Op{store.Read(addr("fast", "x"))}, store.WaitApplied); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
}

// flaky reports its first failures writes unavailable, without applying them.
type flaky struct {
	driver.Store
	failures atomic.Int32
	calls    atomic.Int32
}

func (f *flaky) Write(ctx context.Context, w []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	f.calls.Add(1)
	if f.failures.Add(-1) >= 0 {
		return nil, driver.NewError(driver.KindUnavailable, "try again", nil)
	}
	return f.Store.Write(ctx, w, o)
}

func TestUnavailableWritesAreRetriedThenReported(t *testing.T) {
	for _, tc := range []struct {
		failures int32
		want     error
	}{{2, nil}, {3, store.ErrUnavailable}} {
		f := &flaky{Store: memstore.New()}
		f.failures.Store(tc.failures)
		s, err := store.New(map[string]store.Adapter{"m": f}, &store.Options{RetryAttempts: 3, BackoffBase: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Do(context.Background(), []store.Op{store.Put(addr("m", "k"), store.Document{JSON: []byte(`{}`)})}, store.WaitApplied)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == nil && res[0].Outcome != store.Created {
			t.Fatalf("after %d unavailable answers: %+v, want created on the retry", tc.failures, res[0])
		}
		if tc.want != nil && !errors.Is(res[0].Err, tc.want) {
			t.Fatalf("after %d unavailable answers: %v, want %v", tc.failures, res[0].Err, tc.want)
		}
		if got := f.calls.Load(); got != 3 {
			t.Fatalf("%d write calls, want 3", got)
		}
	}
}

func TestContextErrorsComeBackUnwrapped(t *testing.T) {
	s, err := store.New(map[string]store.Adapter{"m": memstore.New()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Do(ctx, []store.Op{store.Read(addr("m", "k"))}, store.WaitApplied); err != context.Canceled {
		t.Fatalf("Do with a canceled context: %v, want context.Canceled itself", err)
	}
}
