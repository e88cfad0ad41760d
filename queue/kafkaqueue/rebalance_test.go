package kafkaqueue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// A partition taken from a live member keeps exactly the member's finished prefix: the
// revocation commits it, a finished message behind an unfinished one is not committed, and
// the new owner receives everything from the first unfinished message on. Finish and
// Commit of the old owner on a partition it lost change nothing.
func TestRebalanceCommitsFinishedPrefixOnly(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		cluster := newFake(t)
		topic := uniqueName("rebalance")
		if err := cluster.CreateTopic(topic, 4, nil); err != nil {
			t.Fatal(err)
		}
		testRebalance(t, cluster.ListenAddrs(), topic, 200*time.Millisecond)
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
		topic := uniqueName("rebalance")
		createTopic(t.Context(), t, admin(t, brokers), topic, 4)
		testRebalance(t, brokers, topic, 0)
	})
}

func testRebalance(t *testing.T, brokers []string, topic string, fetchMaxWait time.Duration) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	group := uniqueName("rebalance")
	adm := admin(t, brokers)
	t.Cleanup(func() { adm.DeleteGroups(context.Background(), group) })
	cfg := kafkaqueue.Config{Brokers: brokers, Topic: topic, Group: group, FetchMaxWait: fetchMaxWait}

	p, err := kafkaqueue.NewPublisher(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var msgs []queue.Message
	for i := range 200 {
		msgs = append(msgs, queue.Message{Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := p.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	first, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	byPartition := map[int32][]queue.Message{}
	for n := 0; n < len(msgs); {
		got, err := first.Fetch(ctx)
		if err != nil {
			t.Fatalf("first member's Fetch: %v", err)
		}
		for _, m := range got {
			byPartition[m.Partition] = append(byPartition[m.Partition], m)
		}
		n += len(got)
	}
	// Per partition: finish the first half, leave one unfinished, finish the one after it.
	prefixEnd := map[int32]int64{}
	for part, ms := range byPartition {
		if len(ms) < 4 {
			t.Fatalf("partition %d got only %d messages; the keys do not spread", part, len(ms))
		}
		half := len(ms) / 2
		first.Finish(ms[:half]...)
		first.Finish(ms[half+1])
		prefixEnd[part] = ms[half].Offset
	}

	second, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	var (
		mu    sync.Mutex
		moved = map[int32][]queue.Message{}
	)
	fetchCtx, stopFetch := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		for {
			got, err := second.Fetch(fetchCtx)
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			for _, m := range got {
				moved[m.Partition] = append(moved[m.Partition], m)
			}
			mu.Unlock()
		}
	}()
	// Wait until the newcomer holds every remaining message of the partitions it took.
	complete := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(moved) == 0 {
			return false
		}
		for part, ms := range moved {
			all := byPartition[part]
			if want := len(all) - len(all)/2; len(ms) < want {
				return false
			}
		}
		return true
	}
	for !complete() {
		select {
		case <-ctx.Done():
			t.Fatalf("the second member never received the moved partitions' messages: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	stopFetch()
	<-done

	mu.Lock()
	defer mu.Unlock()
	for part, ms := range moved {
		if ms[0].Offset != prefixEnd[part] {
			t.Fatalf("partition %d resumed at offset %d, want %d: the first unfinished message", part, ms[0].Offset, prefixEnd[part])
		}
	}
	if len(moved) == len(byPartition) {
		t.Fatal("every partition moved; the first member kept none")
	}
	// The old owner's late Finish and Commit on a lost partition must not commit anything.
	for part := range moved {
		first.Finish(byPartition[part]...)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatalf("first member's Commit: %v", err)
	}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for part := range moved {
		o, ok := offsets.Lookup(topic, part)
		if !ok || o.At != prefixEnd[part] {
			t.Fatalf("partition %d committed at %+v, want %d (the finished prefix of the first member)", part, o, prefixEnd[part])
		}
	}
	// The partitions the first member kept: its commit stops at the unfinished message.
	for part := range byPartition {
		if _, gone := moved[part]; gone {
			continue
		}
		if o, ok := offsets.Lookup(topic, part); !ok || o.At != prefixEnd[part] {
			t.Fatalf("kept partition %d committed at %+v, want %d", part, o, prefixEnd[part])
		}
	}
}
