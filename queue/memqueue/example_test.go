package memqueue_test

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/memqueue"
)

// A consumer that finishes and commits only part of what it fetched: after a restart the
// group receives the rest again.
func Example() {
	ctx := context.Background()
	b := memqueue.New(&memqueue.Options{Partitions: 1})
	p, _ := b.Publisher("mutations")
	p.Publish(ctx, []queue.Message{
		{Key: []byte("doc-1"), Value: []byte("a")},
		{Key: []byte("doc-1"), Value: []byte("b")},
		{Key: []byte("doc-1"), Value: []byte("c")},
	})

	worker, _ := b.Consumer("mutations", "appliers")
	msgs, _ := worker.Fetch(ctx)
	worker.Finish(msgs[0]) // "a" applied; the worker stops before "b"
	worker.Commit(ctx)
	worker.Close()

	restarted, _ := b.Consumer("mutations", "appliers")
	again, _ := restarted.Fetch(ctx)
	for _, m := range again {
		fmt.Printf("%s at offset %d\n", m.Value, m.Offset)
	}
	fmt.Println("committed:", b.Committed("mutations", "appliers"))
	// Output:
	// b at offset 1
	// c at offset 2
	// committed: map[0:1]
}
