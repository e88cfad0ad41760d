package searchstore_test

import (
	"context"
	"testing"

	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/searchstore"
	"github.com/tributary-dev/tributary/store/storetest"
)

func TestConformance(t *testing.T) {
	eachEngine(t, func(t *testing.T, srv *server) {
		index := srv.createIndex(t, "conformance")
		s, err := searchstore.NewFromURLs([]string{srv.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		storetest.Run(t, storetest.Harness{
			Adapter:    s,
			Namespace:  "conformance",
			Dataset:    index,
			Visible:    func(ctx context.Context) (int, error) { return srv.Count(ctx, index) },
			PlainTimes: true,
			Refuses:    memstore.Search,
		})
	})
}
