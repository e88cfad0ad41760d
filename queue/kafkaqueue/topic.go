package kafkaqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/queue"
)

// errNoTopic explains a missing topic and the setting that would create it.
var errNoTopic = errors.New("topic does not exist (set CreateTopic to create it)")

// ensureTopic creates cfg's topics (Topic or each of Topics) when cfg asks for it, else checks
// that they exist; a TopicPattern has nothing to check. Writes never create topics: franz-go's
// producer does not ask brokers to auto-create them. Errors name the Config's topics
// (queueName) as their Queue and, when there are several, the topic that failed in their text.
func ensureTopic(ctx context.Context, cl *kgo.Client, cfg *Config) error {
	topics := cfg.topics()
	if len(topics) == 0 {
		return nil
	}
	name := cfg.queueName()
	fail := func(topic string, err error) error {
		if len(topics) > 1 {
			err = fmt.Errorf("topic %s: %w", topic, err)
		}
		return classify(name, err)
	}
	adm := kadm.NewClient(cl)
	if spec := cfg.CreateTopic; spec != nil {
		rf := spec.ReplicationFactor
		if rf == 0 {
			rf = -1 // the broker's default
		}
		resps, err := adm.CreateTopics(ctx, spec.Partitions, rf, nil, topics...)
		if err != nil {
			return classify(name, err)
		}
		for _, topic := range topics {
			resp, ok := resps[topic]
			err := resp.Err
			if !ok {
				err = errors.New("the broker did not answer for this topic")
			}
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return fail(topic, err)
			}
		}
		return nil
	}
	// A topic created a moment ago may not be in every broker's metadata yet, so a missing
	// topic is looked up again a few times (about a second in all) before it counts as
	// missing, as franz-go's producer does with UnknownTopicRetries.
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return classify(name, err)
		}
		missing := ""
		for _, topic := range topics {
			d, ok := details[topic]
			if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
				if d.Err != nil {
					return fail(topic, d.Err)
				}
				continue
			}
			if missing == "" {
				missing = topic
			}
		}
		if missing == "" {
			return nil
		}
		if wait > 400*time.Millisecond {
			err := error(errNoTopic)
			if len(topics) > 1 {
				err = fmt.Errorf("topic %s: %w", missing, errNoTopic)
			}
			return &queue.Error{Kind: queue.NotFound, Queue: name, Err: err}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
