package kafkaqueue_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// A worker loop: fetch, apply, finish what was applied, commit. Compile-only: it needs a
// broker.
func Example() {
	ctx := context.Background()
	cfg := kafkaqueue.Config{
		Brokers:     []string{"127.0.0.1:9092"},
		Topic:       "store-mutations",
		Group:       "store-worker",
		CreateTopic: &kafkaqueue.TopicSpec{Partitions: 12, ReplicationFactor: 3},
		SASL:        &kafkaqueue.SASL{Mechanism: "SCRAM-SHA-512", Username: "worker", Password: "from-a-secret-store"},
	}
	c, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	apply := func(queue.Message) error { return nil }
	for {
		msgs, err := c.Fetch(ctx)
		if errors.Is(err, queue.ErrClosed) {
			return
		}
		if queue.Retryable(err) {
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			if apply(m) == nil {
				c.Finish(m)
			}
		}
		if err := c.Commit(ctx); err != nil {
			log.Print(err) // the uncommitted work is delivered again
		}
	}
}

// A periodic health check with queue depth, as a service exports them. Compile-only: it
// needs a broker.
func ExampleMonitor() {
	mon, err := kafkaqueue.NewMonitor(kafkaqueue.Config{
		Brokers: []string{"127.0.0.1:9092"},
		Topic:   "store-mutations",
		Group:   "store-worker",
	}, nil)

	if err != nil {
		log.Fatal(err)
	}
	defer mon.Close()
	for range time.Tick(5 * time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := mon.Ping(ctx); err != nil {
			log.Printf("queue unhealthy (%v): %v", queue.KindOf(err), err)
		} else if lag, err := mon.Lag(ctx); err == nil {
			log.Printf("queue depth %d", lag.Total)
		}
		cancel()
	}
}
