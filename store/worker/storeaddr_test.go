package worker_test

import (
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
)

// sa returns a, an address in the adapter contract's vocabulary, as the store package's
// Address, for the tests that drive this adapter through a store.Service.
func sa(a driver.Address) store.Address {
	var k store.Key
	switch a.Key.Kind() {
	case driver.StringKey:
		k = store.StringKey(a.Key.StringValue())
	case driver.Int64Key:
		k = store.Int64Key(a.Key.Int64Value())
	case driver.BytesKey:
		k = store.BytesKey(a.Key.BytesValue())
	case driver.ObjectIDKey:
		k = store.ObjectIDKey(a.Key.ObjectIDValue())
	}
	return store.Address{Store: a.Store, Namespace: a.Namespace, Dataset: a.Dataset, Key: k}
}
