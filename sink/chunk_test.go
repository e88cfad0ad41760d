package sink

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// A batch larger than batch.max_docs or batch.max_bytes goes out as several requests, each
// within the bounds (a single larger action alone), and every row arrives exactly once.
func TestBatchSplitsWithinBounds(t *testing.T) {
	for _, c := range []struct {
		name  string
		batch Batch
	}{{"max_docs", Batch{MaxDocs: 7}}, {"max_bytes", Batch{MaxBytes: 1024}}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCluster(t)
			rec := &recorder{}
			k := fakeSink(t, f, Config{Batch: c.batch, Concurrency: 3}, nil, Options{Observer: rec})
			sch := ordersSchema("orders")
			var batch []cdc.Event
			for i := int64(1); i <= 50; i++ {
				name := strings.Repeat("x", int(i*7%90)) // documents of different sizes
				batch = append(batch, ev(cdc.Insert, sch, i, nil, row(i, name, i)))
			}
			if dead, err := k.Write(context.Background(), batch); err != nil || len(dead) != 0 {
				t.Fatalf("%v, dead %v", err, dead)
			}
			if len(rec.bulks) < 2 {
				t.Fatalf("%d requests, want a split", len(rec.bulks))
			}
			total := 0
			for _, b := range rec.bulks {
				total += b.Actions
				if b.Applied != b.Actions {
					t.Fatalf("request %+v not fully applied", b)
				}
				if c.batch.MaxDocs > 0 && b.Actions > c.batch.MaxDocs {
					t.Fatalf("%d actions in one request, max_docs %d", b.Actions, c.batch.MaxDocs)
				}
				if c.batch.MaxBytes > 0 && b.Bytes > c.batch.MaxBytes && b.Actions > 1 {
					t.Fatalf("%d bytes in a request of %d actions, max_bytes %d", b.Bytes, b.Actions, c.batch.MaxBytes)
				}
			}
			ix := f.Index(indexOf(t, k, "orders"))
			if total != 50 || len(ix.Docs) != 50 {
				t.Fatalf("%d actions sent, %d documents, want 50", total, len(ix.Docs))
			}
			for i := int64(1); i <= 50; i++ {
				if d := ix.Docs[strconv.FormatInt(i, 10)]; d.Version != i {
					t.Fatalf("row %d at version %d", i, d.Version)
				}
			}
		})
	}
}
