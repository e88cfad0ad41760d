package memqueue

import (
	"context"
	"slices"

	"github.com/tributary-dev/tributary/queue"
)

// Publisher publishes to one topic of a Broker. It implements queue.Publisher.
type Publisher struct {
	b      *Broker
	t      *topic
	closed bool // guarded by b.mu
}

var _ queue.Publisher = (*Publisher)(nil)

// Publisher returns a publisher to the named topic.
func (b *Broker) Publisher(topicName string) (*Publisher, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.topicLocked(topicName)
	if err != nil {
		return nil, err
	}
	return &Publisher{b: b, t: t}, nil
}

// Publish appends msgs to their partitions. It never blocks: memory is the durable store.
func (p *Publisher) Publish(ctx context.Context, msgs []queue.Message) error {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.closed {
		return queue.ErrClosed
	}
	if len(msgs) == 0 {
		return nil
	}
	errs := make([]error, len(msgs))
	failed := false
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return &queue.PublishError{Errs: errs}
	}
	fault, _ := takeFault(&p.b.publishFaults)
	wrote := false
	for i, m := range msgs {
		if fault != nil {
			if err := fault(m); err != nil {
				errs[i], failed = err, true
				continue
			}
		}
		part := p.t.partitionFor(m.Key)
		// Copies, because a caller may reuse its buffers once Publish returns.
		stored := queue.Message{
			Key:       slices.Clone(m.Key),
			Value:     slices.Clone(m.Value),
			Headers:   cloneHeaders(m.Headers),
			Topic:     p.t.name,
			Partition: part,
			Offset:    int64(len(p.t.parts[part])),
		}
		p.t.parts[part] = append(p.t.parts[part], stored)
		wrote = true
	}
	if wrote {
		p.t.wakeLocked()
	}
	if failed {
		return &queue.PublishError{Errs: errs}
	}
	return nil
}

func cloneHeaders(hs []queue.Header) []queue.Header {
	if hs == nil {
		return nil
	}
	out := make([]queue.Header, len(hs))
	for i, h := range hs {
		out[i] = queue.Header{Key: h.Key, Value: slices.Clone(h.Value)}
	}
	return out
}

// Close releases the publisher. Publish is synchronous, so nothing is in flight.
func (p *Publisher) Close() error {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.closed = true
	return nil
}
