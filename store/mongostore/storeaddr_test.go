package mongostore_test

import "github.com/tributary-dev/tributary/store/storetest"

// sa converts an adapter-contract address to store's, for the tests that drive this package
// through a store.Service.
var sa = storetest.StoreAddress
