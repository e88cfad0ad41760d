package memstore_test

import (
	"context"
	"testing"

	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		s := memstore.New()
		storetest.Run(t, storetest.Harness{
			Adapter:   s,
			Namespace: "ns",
			Dataset:   "ds",
			Visible:   func(context.Context) (int, error) { return s.Count("ns", "ds"), nil },
		})
	})
}
