package worker_test

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/worker"
)

// An accepted-mode write returns once the queue holds it; a worker applies it.
func Example() {
	ctx := context.Background()
	broker := memqueue.New(nil)
	mutations, _ := broker.Publisher("mutations")
	svc, _ := store.New(map[string]store.Adapter{"main": memstore.New()},
		&store.Options{Queues: map[string]store.Queue{"main": accepted.NewPublisher(mutations)}})
	defer svc.Close(ctx)

	a := store.Address{Store: "main", Namespace: "shop", Dataset: "carts", Key: store.StringKey("c1")}
	res, _ := svc.Do(ctx, []store.Op{store.Put(a, store.Document{JSON: []byte(`{"items":2}`)})}, store.ReturnAccepted)
	fmt.Println(res[0].Outcome)

	consumer, _ := broker.Consumer("mutations", "workers")
	deadLetters, _ := broker.Publisher("mutations-dead")
	applied := make(chan struct{}, 1)
	w, _ := worker.New("main", consumer, svc, deadLetters, &worker.Options{Observer: observerFunc(func(worker.FetchStats) {
		applied <- struct{}{}
	})})
	go w.Run(ctx)
	<-applied
	_ = w.Stop(ctx)
	_ = consumer.Close()

	res, _ = svc.Do(ctx, []store.Op{store.Read(a)}, store.WaitApplied)
	fmt.Println(res[0].Outcome, string(res[0].Doc.JSON))
	// Output:
	// accepted
	// found {"items":2}
}

type observerFunc func(worker.FetchStats)

func (f observerFunc) FetchDone(s worker.FetchStats) { f(s) }
