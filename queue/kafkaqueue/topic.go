package kafkaqueue

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/queue"
)

// errNoTopic explains a missing topic and the setting that would create it.
var errNoTopic = errors.New("topic does not exist (set CreateTopic to create it)")

// ensureTopic creates the topic when cfg asks for it, else checks that it exists. Writes
// never create topics: franz-go's producer does not ask brokers to auto-create them.
func ensureTopic(ctx context.Context, cl *kgo.Client, cfg *Config) error {
	adm := kadm.NewClient(cl)
	if spec := cfg.CreateTopic; spec != nil {
		rf := spec.ReplicationFactor
		if rf == 0 {
			rf = -1 // the broker's default
		}
		resp, err := adm.CreateTopic(ctx, spec.Partitions, rf, nil, cfg.Topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return classify(cfg.Topic, err)
	}
	// A topic created a moment ago may not be in every broker's metadata yet, so a missing
	// topic is looked up again a few times (about a second in all) before it counts as
	// missing, as franz-go's producer does with UnknownTopicRetries.
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		details, err := adm.ListTopics(ctx, cfg.Topic)
		if err != nil {
			return classify(cfg.Topic, err)
		}
		d, ok := details[cfg.Topic]
		if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return classify(cfg.Topic, d.Err)
		}
		if wait > 400*time.Millisecond {
			return &queue.Error{Kind: queue.NotFound, Queue: cfg.Topic, Err: errNoTopic}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
