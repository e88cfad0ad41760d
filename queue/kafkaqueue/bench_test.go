package kafkaqueue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// BenchmarkPublish compares kafkaqueue.Publish with a raw franz-go ProduceSync of the same
// records to the same broker and topic. Each iteration runs both, alternating which goes
// first, so drift on a shared machine hits both alike; the metrics are the time per record
// of each and ratio = raw/kafkaqueue (1 means no overhead; the goal is >= 0.7).
func BenchmarkPublish(b *testing.B) {
	brokers := strings.Split(testenv.Require(b, testenv.KafkaBrokers), ",")
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) { benchPublish(b, brokers, n) })
	}
}

func benchPublish(b *testing.B, brokers []string, n int) {
	ctx := context.Background()
	topic := uniqueName("bench-publish")
	createTopic(ctx, b, admin(b, brokers), topic, 4)
	p, err := kafkaqueue.NewPublisher(ctx, kafkaqueue.Config{Brokers: brokers, Topic: topic}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()

	msgs := make([]queue.Message, n)
	value := []byte(strings.Repeat("v", 200))
	for i := range msgs {
		msgs[i] = queue.Message{Key: fmt.Appendf(nil, "key-%d", i%100), Value: value,
			Headers: []queue.Header{{Key: "request-id", Value: fmt.Appendf(nil, "%d", i)}}}
	}
	produceRaw := func() {
		records := make([]*kgo.Record, n)
		for i, m := range msgs {
			records[i] = &kgo.Record{Key: m.Key, Value: m.Value, Headers: []kgo.RecordHeader{{Key: m.Headers[0].Key, Value: m.Headers[0].Value}}}
		}
		if err := raw.ProduceSync(ctx, records...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	publish := func() {
		if err := p.Publish(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
	// Warm both: producer ids, metadata, connections.
	produceRaw()
	publish()

	var rawTime, queueTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		for j := range 2 {
			start := time.Now()
			if (i+j)%2 == 0 {
				produceRaw()
				rawTime += time.Since(start)
			} else {
				publish()
				queueTime += time.Since(start)
			}
		}
	}
	records := float64(b.N * n)
	b.ReportMetric(float64(rawTime.Nanoseconds())/records, "raw-ns/record")
	b.ReportMetric(float64(queueTime.Nanoseconds())/records, "kafkaqueue-ns/record")
	b.ReportMetric(float64(rawTime)/float64(queueTime), "ratio")
}
