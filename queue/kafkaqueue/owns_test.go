package kafkaqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// Owns tells a message of the consumer's current ownership, not finished yet, from one it
// finished or whose partition moved to another member (store/worker then leaves it to be
// delivered again instead of applying it twice).
func TestOwnsForgetsFinishedAndMovedMessages(t *testing.T) {
	cluster := newFake(t)
	topic := uniqueName("owns")
	if err := cluster.CreateTopic(topic, 4, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: topic, Group: uniqueName("owns"), FetchMaxWait: 200 * time.Millisecond}
	p, err := kafkaqueue.NewPublisher(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var msgs []queue.Message
	for i := range 80 {
		msgs = append(msgs, queue.Message{Key: fmt.Appendf(nil, "k%d", i%20), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := p.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	first, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	var got []queue.Message
	for len(got) < len(msgs) {
		ms, err := first.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
	}
	for _, m := range got {
		if !first.Owns(m) {
			t.Fatalf("a message just handed out (partition %d offset %d) is not owned", m.Partition, m.Offset)
		}
	}
	first.Finish(got[0])
	if first.Owns(got[0]) {
		t.Fatal("a finished message is still owned")
	}
	if first.Owns(queue.Message{Topic: topic, Partition: got[1].Partition, Offset: 1 << 40}) {
		t.Fatal("a message never handed out is owned")
	}

	// A second member takes some partitions; the first lets the rebalance through in Fetch.
	second, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	fetchCtx, stop := context.WithCancel(ctx)
	defer stop()
	for _, c := range []*kafkaqueue.Consumer{first, second} {
		go func() {
			for fetchCtx.Err() == nil {
				_, _ = c.Fetch(fetchCtx)
			}
		}()
	}
	for {
		moved, kept := 0, 0
		for _, m := range got[1:] {
			if first.Owns(m) {
				kept++
			} else {
				moved++
			}
		}
		if moved > 0 && kept > 0 {
			break // some partitions moved, their messages no longer the first member's
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no partition moved to the second member (%d kept, %d moved)", kept, moved)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
