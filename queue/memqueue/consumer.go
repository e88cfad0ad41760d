package memqueue

import (
	"context"
	"errors"

	"github.com/tributary-dev/tributary/queue"
)

// Consumer consumes one topic as a member of a consumer group. It implements queue.Consumer.
type Consumer struct {
	b    *Broker
	t    *topic
	g    *group
	done chan struct{} // closed by Close, wakes a waiting Fetch

	// Guarded by b.mu.
	closed bool
	owned  map[int32]*cursor
	next   int // partition index the next Fetch starts at, so no partition starves
}

// cursor is a consumer's position in one partition it owns.
type cursor struct {
	fetch    int64              // offset of the next message to hand out
	base     int64              // first offset not finished: the finished prefix ends here
	finished map[int64]struct{} // finished offsets above base
}

var _ queue.Consumer = (*Consumer)(nil)

// errNoGroup is returned for an empty group name.
var errNoGroup = errors.New("empty consumer group name")

// Consumer returns a new member of group on the named topic. It receives the partitions
// assigned to it from their committed offsets.
func (b *Broker) Consumer(topicName, groupName string) (*Consumer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.topicLocked(topicName)
	if err != nil {
		return nil, err
	}
	if groupName == "" {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: topicName, Err: errNoGroup}
	}
	g := t.groups[groupName]
	if g == nil {
		g = &group{committed: make([]int64, len(t.parts))}
		t.groups[groupName] = g
	}
	c := &Consumer{b: b, t: t, g: g, done: make(chan struct{}), owned: map[int32]*cursor{}}
	g.members = append(g.members, c)
	t.rebalanceLocked(g)
	return c, nil
}

// rebalanceLocked assigns g's partitions to its members: partition p to member p mod n.
// Revocations run first, so a member gaining a partition starts at the offset its previous
// owner just committed.
func (t *topic) rebalanceLocked(g *group) {
	n := len(g.members)
	owner := func(p int32) *Consumer {
		if n == 0 {
			return nil
		}
		return g.members[int(p)%n]
	}
	for _, c := range g.members {
		for p, cur := range c.owned {
			if owner(p) != c {
				// The member is alive and its finished work is real: keep it, as kafkaqueue
				// does when a partition is revoked. Unfinished messages go to the new owner.
				if cur.base > g.committed[p] {
					g.committed[p] = cur.base
				}
				delete(c.owned, p)
			}
		}
	}
	for p := range t.parts {
		if c := owner(int32(p)); c != nil && c.owned[int32(p)] == nil {
			off := g.committed[p]
			c.owned[int32(p)] = &cursor{fetch: off, base: off, finished: map[int64]struct{}{}}
		}
	}
	t.wakeLocked()
}

// Fetch returns the next messages of the consumer's partitions, at most Options.MaxFetch,
// waiting until there is one, ctx ends or the consumer is closed.
func (c *Consumer) Fetch(ctx context.Context) ([]queue.Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.b.mu.Lock()
		if c.closed {
			c.b.mu.Unlock()
			return nil, queue.ErrClosed
		}
		if err, ok := takeFault(&c.b.fetchFaults); ok {
			c.b.mu.Unlock()
			return nil, err
		}
		msgs := c.collectLocked()
		wait := c.t.notify
		c.b.mu.Unlock()
		if len(msgs) > 0 {
			return msgs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
			return nil, queue.ErrClosed
		case <-wait:
		}
	}
}

// collectLocked takes up to MaxFetch messages, partition by partition, starting at a
// partition that rotates per call.
func (c *Consumer) collectLocked() []queue.Message {
	var out []queue.Message
	n := len(c.t.parts)
	limit := c.b.opts.MaxFetch
	for i := 0; i < n && len(out) < limit; i++ {
		p := int32((c.next + i) % n)
		cur := c.owned[p]
		if cur == nil {
			continue
		}
		avail := c.t.parts[p][cur.fetch:]
		take := min(len(avail), limit-len(out))
		out = append(out, avail[:take]...)
		cur.fetch += int64(take)
	}
	c.next = (c.next + 1) % n
	return out
}

// Finish marks messages as processed. Messages of partitions the consumer no longer owns,
// or that it did not hand out, are ignored: their new owner receives them again.
func (c *Consumer) Finish(msgs ...queue.Message) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed {
		return
	}
	for _, m := range msgs {
		cur := c.owned[m.Partition]
		if m.Topic != c.t.name || cur == nil || m.Offset < cur.base || m.Offset >= cur.fetch {
			continue
		}
		cur.finished[m.Offset] = struct{}{}
		for {
			if _, ok := cur.finished[cur.base]; !ok {
				break
			}
			delete(cur.finished, cur.base)
			cur.base++
		}
	}
}

// Commit commits the finished prefix of every partition the consumer owns.
func (c *Consumer) Commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed {
		return queue.ErrClosed
	}
	if err, ok := takeFault(&c.b.commitFaults); ok {
		return err
	}
	for p, cur := range c.owned {
		if cur.base > c.g.committed[p] {
			c.g.committed[p] = cur.base
		}
	}
	return nil
}

// Close leaves the group without committing; the consumer's partitions go to the remaining
// members, from the committed offsets. Closing twice is a no-op.
func (c *Consumer) Close() error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.done)
	c.owned = nil
	for i, m := range c.g.members {
		if m == c {
			c.g.members = append(c.g.members[:i], c.g.members[i+1:]...)
			break
		}
	}
	c.t.rebalanceLocked(c.g)
	return nil
}
