package sink

import (
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
)

// TestSinkDeleteVersionLostOnReopen pins what both engines really do when a shard's engine is
// recreated, as a node restart does: closing and opening the index makes the shard forget
// the versions of deleted documents even within index.gc_deletes (the default 24h here),
// because the tombstones live in the engine's in-memory version map. A stale replay then
// brings the row back; replaying the delete after it, as an in-order replay does, removes it
// again. "Deletes never resurrect" in doc.go states the resulting bound. Should an engine
// start keeping tombstones across a reopen, this test fails and the documentation can be
// tightened.
func TestSinkDeleteVersionLostOnReopen(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		sch := ordersSchema("orders")
		k := s.sink(t, s.config("reopen"), nil, nil)
		idx := indexOf(t, k, "orders")
		write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "one", 1))})
		write(t, k, []cdc.Event{ev(cdc.Delete, sch, 3, row(1, "one", 1), nil)})
		stale := []cdc.Event{ev(cdc.Update, sch, 2, nil, row(1, "stale", 2))}

		// Before: the tombstone refuses the stale replay.
		write(t, k, stale)
		if docs, _ := s.docs(t, idx, []string{"1"}); docs["1"] != nil {
			t.Fatal("a stale replay resurrected a deleted row before any reopen")
		}

		s.OK(t, esapi.IndicesCloseRequest{Index: []string{idx}})
		s.OK(t, esapi.IndicesOpenRequest{Index: []string{idx}, WaitForActiveShards: "all"})
		s.OK(t, esapi.ClusterHealthRequest{Index: []string{idx}, WaitForStatus: "green", Timeout: 30 * time.Second})

		write(t, k, stale)
		docs, vers := s.docs(t, idx, []string{"1"})
		if docs["1"] == nil {
			t.Fatal("the stale replay stayed deleted across the reopen: the engine kept the delete's version; " +
				"update \"Deletes never resurrect\" in doc.go")
		}
		if vers["1"] != 2 {
			t.Fatalf("resurrected at version %d, want 2", vers["1"])
		}
		// The delete replayed after it (an in-order replay carries it) wins again.
		write(t, k, []cdc.Event{ev(cdc.Delete, sch, 3, row(1, "one", 1), nil)})
		if docs, _ := s.docs(t, idx, []string{"1"}); docs["1"] != nil {
			t.Fatal("the replayed delete did not remove the resurrected row")
		}
	})
}
