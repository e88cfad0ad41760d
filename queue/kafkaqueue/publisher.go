package kafkaqueue

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/queue"
)

// Publisher publishes to one topic with an idempotent producer that waits for all in-sync
// replicas. It implements queue.Publisher and is safe for concurrent use.
type Publisher struct {
	cl    *kgo.Client
	topic string

	mu       sync.RWMutex // guards closed against inflight.Add
	closed   bool
	inflight sync.WaitGroup
}

var _ queue.Publisher = (*Publisher)(nil)

// NewPublisher connects to cfg.Brokers and checks (or creates, see Config.CreateTopic) the
// topic. ctx bounds the check.
func NewPublisher(ctx context.Context, cfg Config) (*Publisher, error) {
	if err := cfg.validate(false); err != nil {
		return nil, err
	}
	opts, err := cfg.clientOptions()
	if err != nil {
		return nil, err
	}
	delivery := cfg.DeliveryTimeout
	if delivery == 0 {
		delivery = defaultDeliveryTimeout
	}
	opts = append(opts,
		kgo.DefaultProduceTopic(cfg.Topic),
		// Both are franz-go's defaults; stated because the port's durability rests on them.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(delivery),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: cfg.Topic, Err: err}
	}
	if err := ensureTopic(ctx, cl, &cfg); err != nil {
		cl.Close()
		return nil, err
	}
	return &Publisher{cl: cl, topic: cfg.Topic}, nil
}

// errSharedBatchCanceled stands for a context error a message got although its own context
// is alive: franz-go fails every buffered record of a partition together, so another
// Publish's canceled context can fail this one's messages. Trying again may succeed.
var errSharedBatchCanceled = errors.New("failed together with another publish's canceled messages of the same partition")

// Publish produces msgs and waits until the brokers acknowledged each of them or gave up.
// Messages of one partition fail together and in order: when one fails, no later message
// of its partition in this call was written by it (franz-go keeps partitions gapless).
func (p *Publisher) Publish(ctx context.Context, msgs []queue.Message) error {
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return queue.ErrClosed
	}
	p.inflight.Add(1)
	p.mu.RUnlock()
	defer p.inflight.Done()

	if len(msgs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
		return &queue.PublishError{Errs: errs}
	}
	// One allocation for all records; franz-go reads the caller's byte slices until
	// ProduceSync returns, so they need no copy.
	records := make([]kgo.Record, len(msgs))
	ptrs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		records[i] = kgo.Record{Key: m.Key, Value: m.Value, Topic: p.topic}
		if len(m.Headers) > 0 {
			hs := make([]kgo.RecordHeader, len(m.Headers))
			for j, h := range m.Headers {
				hs[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
			}
			records[i].Headers = hs
		}
		ptrs[i] = &records[i]
	}
	results := p.cl.ProduceSync(ctx, ptrs...)
	var errs []error
	for _, r := range results {
		if r.Err == nil {
			continue
		}
		if errs == nil {
			errs = make([]error, len(msgs))
		}
		// Results come in completion order; the record pointer says which message it is.
		errs[p.index(ptrs, r.Record)] = p.classifyRecord(ctx, r.Err)
	}
	if errs != nil {
		return &queue.PublishError{Errs: errs}
	}
	return nil
}

// index finds r among ptrs. It runs only for failed records, so a linear scan costs nothing
// on the successful path.
func (p *Publisher) index(ptrs []*kgo.Record, r *kgo.Record) int {
	for i, q := range ptrs {
		if q == r {
			return i
		}
	}
	panic("kafkaqueue: franz-go returned a record it was not given")
}

func (p *Publisher) classifyRecord(ctx context.Context, err error) error {
	if (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
		return &queue.Error{Kind: queue.Unavailable, Queue: p.topic, Err: errSharedBatchCanceled}
	}
	return classify(p.topic, err)
}

// Close waits for the Publish calls in flight, then closes the client.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.inflight.Wait()
	p.cl.Close()
	return nil
}
