package sink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TestReclaimRoundOnFake: after a lost connection the next Write claims every index of the
// session in one round -- the cluster's identity, the auto-create setting, one GET of every
// index, one _aliases request -- whatever the number of tables, then writes.
func TestReclaimRoundOnFake(t *testing.T) {
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{}, nil, Options{})
	ctx := context.Background()
	var schemas []*cdc.TableSchema
	for _, n := range []string{"orders", "items", "users", "carts", "notes"} {
		sch := ordersSchema(n)
		schemas = append(schemas, sch)
		if _, err := k.Write(ctx, fakeEvents(sch, 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	f.failWhole("_bulk", func(call int) int {
		if call == len(schemas)+1 {
			return -1
		}
		return 0
	})
	if _, err := k.Write(ctx, fakeEvents(schemas[0], 2, 1)); !errors.As(err, new(*cdc.BackpressureError)) {
		t.Fatalf("the lost connection: %v, want backpressure", err)
	}
	before := len(f.requestLines())
	if _, err := k.Write(ctx, fakeEvents(schemas[0], 2, 1)); err != nil {
		t.Fatal(err)
	}
	got := f.requestLines()[before:]
	var kinds []string
	for _, l := range got {
		method, path, _ := strings.Cut(l, " ")
		switch {
		case strings.Contains(path, ","):
			kinds = append(kinds, method+" /<indices>")
		case strings.HasPrefix(path, "/_"):
			kinds = append(kinds, method+" "+path)
		default:
			kinds = append(kinds, method+" /<index>/"+path[strings.LastIndexByte(path, '/')+1:])
		}
	}
	slices.Sort(kinds[:3]) // the round's reads go out together
	want := []string{"GET /<indices>", "GET /_cluster/settings", "GET /_cluster/state/metadata", "POST /_aliases", "POST /_bulk"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("requests after the lost connection:\n %v\nwant\n %v\n(%v)", kinds, want, got)
	}
}
