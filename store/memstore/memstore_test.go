package memstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/storetest"
)

// TestConformance runs the suite on the default Store and on one like each backend: each
// refuses exactly what its backend refuses (the Refusals behaviour, which the adapters run on
// their real servers too).
func TestConformance(t *testing.T) {
	for _, like := range []memstore.Backend{memstore.Strictest, memstore.MongoDB, memstore.FerretDB, memstore.Search, memstore.Lenient} {
		name := "memory"
		if like != memstore.Strictest {
			name += "-" + like.String()
		}
		t.Run(name, func(t *testing.T) {
			s := memstore.NewWithOptions(&memstore.Options{Like: like})
			storetest.Run(t, storetest.Harness{
				Adapter:   s,
				Namespace: "ns",
				Dataset:   "ds",
				Visible:   func(context.Context) (int, error) { return s.Count("ns", "ds"), nil },
			})
		})
	}
}

// TestFakeRefusesNanosecondDateTime: the case. The default fake refuses, as MongoDB
// does, a marked date-time finer than a millisecond, naming the field by its JSON Pointer and
// not its value; one told to behave like Search (or Lenient) keeps it.
func TestFakeRefusesNanosecondDateTime(t *testing.T) {
	ctx := context.Background()
	a := store.Address{Store: "main", Namespace: "ns", Dataset: "ds", Key: store.StringKey("k")}
	doc := store.Document{JSON: []byte(`{"when":{"at":"2026-11-30T04:05:06.123456789Z"}}`), Times: []string{"/when/at"}}
	_, err := memstore.NewService(t, nil).Put(ctx, a, doc)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), `"/when/at"`) || strings.Contains(err.Error(), "123456789") {
		t.Fatalf("nanosecond date-time on the default fake: %v, want ErrInvalid naming /when/at without the value", err)
	}
	for _, like := range []memstore.Backend{memstore.Search, memstore.Lenient} {
		svc, err := store.New(map[string]store.Adapter{"main": memstore.NewWithOptions(&memstore.Options{Like: like})}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := svc.Put(ctx, a, doc); err != nil || res.Outcome != store.Created {
			t.Errorf("%v: %+v %v, want Created", like, res, err)
		}
		_ = svc.Close(ctx)
	}
	// Options set one limit on their own.
	svc, _ := store.New(map[string]store.Adapter{"main": memstore.NewWithOptions(&memstore.Options{Like: memstore.Lenient, TimePrecision: time.Second})}, nil)
	defer svc.Close(ctx)
	if _, err := svc.Put(ctx, a, store.Document{JSON: []byte(`{"at":"2026-11-30T04:05:06.5Z"}`), Times: []string{"/at"}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a half second on a store of whole seconds: %v, want ErrInvalid", err)
	}
}

// TestOptionsOnTheirOwn: KeyKinds and MaxDocumentBytes restrict a Store whatever its profile;
// a negative value lifts the profile's limit.
func TestOptionsOnTheirOwn(t *testing.T) {
	ctx := context.Background()
	svc, err := store.New(map[string]store.Adapter{"main": memstore.NewWithOptions(&memstore.Options{
		Like: memstore.Lenient, KeyKinds: []store.KeyKind{store.KindStringKey}, MaxDocumentBytes: 16})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	at := func(k store.Key) store.Address {
		return store.Address{Store: "main", Namespace: "ns", Dataset: "ds", Key: k}
	}
	small := store.Document{JSON: []byte(`{"a":1}`)}
	var re *store.RequestError
	if _, err := svc.Put(ctx, at(store.Int64Key(1)), small); !errors.As(err, &re) || !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an int64 key on a store of string keys: %v, want a RequestError of ErrInvalid", err)
	}
	if res, err := svc.Put(ctx, at(store.StringKey("k")), small); err != nil || res.Outcome != store.Created {
		t.Errorf("a string key: %+v %v", res, err)
	}
	if _, err := svc.Put(ctx, at(store.StringKey("k")), store.Document{JSON: []byte(`{"a":"0123456789"}`)}); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("17 bytes on a store of 16: %v, want ErrTooLarge", err)
	}
	lifted, _ := store.New(map[string]store.Adapter{"main": memstore.NewWithOptions(&memstore.Options{TimePrecision: -1})}, nil)
	defer lifted.Close(ctx)
	ns := store.Document{JSON: []byte(`{"at":"2026-11-30T04:05:06.123456789Z"}`), Times: []string{"/at"}}
	if res, err := lifted.Put(ctx, at(store.StringKey("k")), ns); err != nil || res.Outcome != store.Created {
		t.Errorf("a nanosecond date-time with TimePrecision -1: %+v %v, want Created", res, err)
	}
}
