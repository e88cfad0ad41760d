package accepted_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/memstore"
)

// A store's accepted-mode writes become one record per operation on its queue, keyed by the
// record's address; a Decoder reads them back as the worker does.
func Example() {
	ctx := context.Background()
	broker := memqueue.New(nil)
	pub, _ := broker.Publisher("writes")
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	svc, _ := store.New(map[string]store.Adapter{"main": memstore.New()}, &store.Options{
		Now:    func() time.Time { return at },
		Queues: map[string]store.Queue{"main": accepted.NewPublisher(pub)},
	})
	defer svc.Close(ctx)

	a := store.Address{Store: "main", Namespace: "shop", Dataset: "carts", Key: store.StringKey("c1")}
	res, _ := svc.Put(ctx, a, store.Document{JSON: []byte(`{"items":2}`)}, store.IfAbsent(), store.ReturnAccepted)
	fmt.Println(res.Outcome)

	for _, m := range broker.Messages("writes") {
		var d accepted.Decoder
		r, err := d.Decode(m.Value)
		fmt.Println(string(m.Key), r.Op.Kind, r.Op.If.Absent(), r.AcceptedAt.Equal(at), string(r.Op.Doc.JSON), err)
	}
	// Output:
	// accepted
	// main/shop/carts/s:c1 put true true {"items":2} <nil>
}
