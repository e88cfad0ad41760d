package memstore

import (
	"context"
	"testing"

	"github.com/tributary-dev/tributary/store"
)

// NewService is the one-line test fake: a *store.Service over a fresh memory store for each
// of names ("main" when none is given), with opts (nil: the defaults), closed when tb's test
// ends. It fails the test at once if the Service cannot be built. The stores have the default
// Options: they refuse what any real backend refuses (Strictest); for another profile build
// the Service over NewWithOptions.
//
//	svc := memstore.NewService(t, nil)
//	res, err := svc.Put(ctx, store.Address{Store: "main", Namespace: "ns", Dataset: "ds", Key: store.StringKey("k")}, doc)
func NewService(tb testing.TB, opts *store.Options, names ...string) *store.Service {
	tb.Helper()
	if len(names) == 0 {
		names = []string{"main"}
	}
	adapters := make(map[string]store.Adapter, len(names))
	for _, n := range names {
		adapters[n] = New()
	}
	svc, err := store.New(adapters, opts)
	if err != nil {
		tb.Fatalf("memstore.NewService: %v", err)
	}
	tb.Cleanup(func() {
		if err := svc.Close(context.Background()); err != nil {
			tb.Errorf("memstore.NewService: closing: %v", err)
		}
	})
	return svc
}
