package memqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/queue/queuetest"
)

func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		// One broker for the whole suite, as a server would be: behaviours are isolated by
		// their topics and groups, not by fresh state.
		b := memqueue.New(&memqueue.Options{MaxFetch: 64})
		queuetest.Run(t, queuetest.Harness{
			Timeout: 30 * time.Second,
			NewTopic: func(ctx context.Context, t *testing.T) string {
				name := "topic-" + t.Name()
				if err := b.CreateTopic(name, 4); err != nil {
					t.Fatal(err)
				}
				return name
			},
			NewPublisher: func(ctx context.Context, t *testing.T, topic string) queue.Publisher {
				p, err := b.Publisher(topic)
				if err != nil {
					t.Fatal(err)
				}
				return p
			},
			NewConsumer: func(ctx context.Context, t *testing.T, topic, group string) queue.Consumer {
				c, err := b.Consumer(topic, group)
				if err != nil {
					t.Fatal(err)
				}
				return c
			},
		})
	})
}
