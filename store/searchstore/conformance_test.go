package searchstore_test

import (
	"context"
	"testing"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store/searchstore"
	"github.com/tributary-dev/tributary/store/storetest"
)

func TestConformance(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			srv := newServer(t, testenv.Require(t, e.env))
			index := srv.createIndex(t, "conformance")
			s, err := searchstore.NewFromURLs([]string{srv.url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			storetest.Run(t, storetest.Harness{
				Adapter:    s,
				Namespace:  "conformance",
				Dataset:    index,
				Visible:    func(ctx context.Context) (int, error) { return srv.count(ctx, index) },
				PlainTimes: true,
			})
		})
	}
}
