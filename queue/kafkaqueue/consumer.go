package kafkaqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-dev/tributary/queue"
)

// Consumer consumes one topic (Config.Topic), several (Config.Topics) or every topic matching
// a pattern (Config.TopicPattern) as a member of a consumer group, committing only the
// finished prefix of each partition of each topic. It implements queue.Consumer; its methods
// are safe for concurrent use (concurrent Fetch calls run one at a time).
type Consumer struct {
	cl       *kgo.Client
	name     string // the Queue of its errors: Config.queueName
	several  bool   // it may read more than one topic: errors name the topic that failed
	maxFetch int

	fetchMu sync.Mutex // one poll at a time: a poll and its bookkeeping are one step

	// mu guards the bookkeeping, and is held across every commit, so a partition cannot be
	// revoked (the callback takes mu) while a commit naming it is in flight.
	mu      sync.Mutex
	closed  bool
	tracks  map[topicPartition]*track
	logFail func(msg string, err error)
}

// topicPartition names one partition of one topic: the unit of ownership and of commits.
type topicPartition struct {
	topic     string
	partition int32
}

// track is the bookkeeping of one partition of one topic for its current ownership.
type track struct {
	// pending are the offsets handed out and not yet part of the finished prefix, ascending.
	pending []pendingOffset
	// commitAt is the offset to commit: just after the finished prefix. Offset -1: nothing
	// finished since the partition was assigned.
	commitAt  kgo.EpochOffset
	committed int64 // the last commitAt committed, so an unchanged prefix is not sent again
}

type pendingOffset struct {
	offset   int64
	epoch    int32
	finished bool
}

var _ queue.Consumer = (*Consumer)(nil)

// NewConsumer joins cfg.Group on cfg.Topic, cfg.Topics or cfg.TopicPattern (exactly one of
// them) after checking (or creating) the named topics; a pattern is not checked. A partition
// the group never committed starts at the earliest offset, also one of a topic a pattern
// finds later. ctx bounds the check. opts may be nil.
func NewConsumer(ctx context.Context, cfg Config, o *Options) (*Consumer, error) {
	if err := cfg.validate(forConsumer); err != nil {
		return nil, err
	}
	log := o.logger()
	opts, err := cfg.clientOptions(log)
	if err != nil {
		return nil, err
	}
	maxFetch := cfg.MaxFetch
	if maxFetch == 0 {
		maxFetch = defaultMaxFetch
	}
	name := cfg.queueName()
	c := &Consumer{
		name:     name,
		several:  len(cfg.Topics) > 1 || cfg.TopicPattern != "",
		maxFetch: maxFetch,
		tracks:   map[topicPartition]*track{},
		logFail:  func(string, error) {},
	}
	if log != nil {
		c.logFail = func(msg string, err error) {
			log.Warn(msg, "topic", name, "group", cfg.Group, "err", err)
		}
	}
	if len(cfg.topics()) > 0 {
		// The topics are checked with a client outside the group, so a missing topic never
		// makes a group member that consumes nothing.
		admin, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, &queue.Error{Kind: queue.Invalid, Queue: name, Err: err}
		}
		err = ensureTopic(ctx, admin, &cfg)
		admin.Close()
		if err != nil {
			return nil, err
		}
	}
	if cfg.TopicPattern != "" {
		// franz-go matches a pattern anywhere in a name, lists every topic at each metadata
		// refresh and evaluates each name once; new matches make the member rejoin the group
		// with the larger subscription.
		opts = append(opts,
			kgo.ConsumeTopics(anchoredPattern(cfg.TopicPattern)),
			kgo.ConsumeRegex(),
			kgo.ConsumeExcludeTopics(internalTopics),
		)
	} else {
		opts = append(opts, kgo.ConsumeTopics(cfg.topics()...))
	}
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Rebalance callbacks never run between a poll and its bookkeeping; Fetch allows
		// them again before it returns, so slow processing never holds up the group.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
	)
	if cfg.FetchMaxWait > 0 {
		opts = append(opts, kgo.FetchMaxWait(cfg.FetchMaxWait))
	}
	if st := cfg.SessionTimeout; st > 0 {
		// Kafka wants at least three heartbeats per session, so a short session does not
		// expire between two of them.
		opts = append(opts, kgo.SessionTimeout(st), kgo.HeartbeatInterval(min(defaultHeartbeatInterval, st/3)))
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	c.cl, err = kgo.NewClient(opts...)
	if err != nil {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: name, Err: err}
	}
	return c, nil
}

// Fetch polls the next messages, waiting until there is one, ctx ends or the consumer is
// closed.
func (c *Consumer) Fetch(ctx context.Context) ([]queue.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	for {
		fs := c.cl.PollRecords(ctx, c.maxFetch)
		msgs, err := c.take(ctx, fs)
		c.cl.AllowRebalance()
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
	}
}

// take records what a poll handed out and converts it. It runs before AllowRebalance, so
// every record belongs to a partition the consumer owns now.
func (c *Consumer) take(ctx context.Context, fs kgo.Fetches) ([]queue.Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, queue.ErrClosed
	}
	var out []queue.Message
	if n := fs.NumRecords(); n > 0 {
		out = make([]queue.Message, 0, n)
	}
	fs.EachRecord(func(r *kgo.Record) {
		t := c.trackFor(topicPartition{r.Topic, r.Partition}, r.Offset)
		t.pending = append(t.pending, pendingOffset{offset: r.Offset, epoch: r.LeaderEpoch})
		m := queue.Message{Key: r.Key, Value: r.Value, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		if len(r.Headers) > 0 {
			m.Headers = make([]queue.Header, len(r.Headers))
			for i, h := range r.Headers {
				m.Headers[i] = queue.Header{Key: h.Key, Value: h.Value}
			}
		}
		out = append(out, m)
	})
	var firstErr error
	fs.EachError(func(topic string, p int32, err error) {
		if firstErr == nil {
			firstErr = err
			if c.several && topic != "" {
				firstErr = fmt.Errorf("topic %s partition %d: %w", topic, p, err)
			}
		}
	})
	if len(out) > 0 {
		if firstErr != nil {
			// The records are good; the failing partition reports again on a later poll.
			c.logFail("fetch error alongside records", firstErr)
		}
		return out, nil
	}
	if firstErr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify(c.name, firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, nil
}

// trackFor returns the track of partition tp for a record at offset. An offset at or below
// what the track already handed out means franz-go moved the partition back (an offset
// reset); the old bookkeeping can then no longer be committed, so a new track starts.
func (c *Consumer) trackFor(tp topicPartition, offset int64) *track {
	t := c.tracks[tp]
	if t != nil && (len(t.pending) > 0 && offset <= t.pending[len(t.pending)-1].offset || offset < t.commitAt.Offset) {
		t = &track{commitAt: kgo.EpochOffset{Epoch: -1, Offset: -1}, committed: t.committed}
		c.tracks[tp] = t
	}
	if t == nil {
		t = &track{commitAt: kgo.EpochOffset{Epoch: -1, Offset: -1}, committed: -1}
		c.tracks[tp] = t
	}
	return t
}

// Finish marks messages as processed. Messages of topics or partitions the consumer does
// not own (any longer), or that it did not hand out since it owns them, are ignored: their
// owner receives them again from the committed offset.
func (c *Consumer) Finish(msgs ...queue.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		t := c.tracks[topicPartition{m.Topic, m.Partition}]
		if t == nil {
			continue
		}
		i, found := slices.BinarySearchFunc(t.pending, m.Offset, func(p pendingOffset, off int64) int {
			switch {
			case p.offset < off:
				return -1
			case p.offset > off:
				return 1
			}
			return 0
		})
		if !found {
			continue
		}
		t.pending[i].finished = true
		if i > 0 {
			continue // pending[0] is unfinished, so the prefix cannot move
		}
		n := 0
		for n < len(t.pending) && t.pending[n].finished {
			n++
		}
		if n > 0 {
			last := t.pending[n-1]
			t.commitAt = kgo.EpochOffset{Epoch: last.epoch, Offset: last.offset + 1}
			t.pending = t.pending[n:]
		}
	}
}

// Owns reports whether m is a message the consumer handed out, and has not finished, in its
// current ownership of m's partition. Once the partition is revoked or lost (the member was
// thrown out of the group, as after a long broker pause), its messages are no longer owned:
// their new owner -- perhaps this consumer again, after it rejoined -- receives them again
// from the last commit, so a worker that applied them now would only apply them twice
// (store/worker checks before each round).
func (c *Consumer) Owns(m queue.Message) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tracks[topicPartition{m.Topic, m.Partition}]
	if t == nil {
		return false
	}
	i, found := slices.BinarySearchFunc(t.pending, m.Offset, func(p pendingOffset, off int64) int {
		switch {
		case p.offset < off:
			return -1
		case p.offset > off:
			return 1
		}
		return 0
	})
	return found && !t.pending[i].finished
}

// Commit commits the finished prefix of every owned partition, of every topic, that
// advanced, in one request.
func (c *Consumer) Commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return queue.ErrClosed
	}
	return c.commitLocked(ctx, nil)
}

// commitLocked commits, in one CommitOffsetsSync, the finished prefixes of the given
// partitions (all owned ones when only is nil) and remembers what was committed: each
// partition the broker accepted, even when it refused another.
func (c *Consumer) commitLocked(ctx context.Context, only map[string][]int32) error {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for tp, t := range c.tracks {
		if only != nil && !slices.Contains(only[tp.topic], tp.partition) {
			continue
		}
		if t.commitAt.Offset > t.committed {
			if offsets[tp.topic] == nil {
				offsets[tp.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[tp.topic][tp.partition] = t.commitAt
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	var (
		commitErr error
		accepted  []topicPartition
	)
	// CommitOffsetsSync returns only after its callback returned.
	c.cl.CommitOffsetsSync(ctx, offsets,
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				commitErr = err
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					err := kerr.ErrorForCode(rp.ErrorCode)
					if err == nil {
						accepted = append(accepted, topicPartition{rt.Topic, rp.Partition})
					} else if commitErr == nil {
						commitErr = err
						if c.several {
							commitErr = fmt.Errorf("topic %s partition %d: %w", rt.Topic, rp.Partition, err)
						}
					}
				}
			}
		})
	for _, tp := range accepted {
		off, sent := offsets[tp.topic][tp.partition]
		if t := c.tracks[tp]; sent && t != nil {
			t.committed = off.Offset
		}
	}
	if commitErr != nil {
		return classify(c.name, commitErr)
	}
	return nil
}

// onRevoked runs when the group takes partitions away from a live member: the finished
// prefix is real work, so it is committed before the partitions move; unfinished messages
// are forgotten and their new owner receives them again. A closing consumer commits
// nothing, as queue.Consumer.Close promises.
//
// The partitions of every topic revoked are committed together, in one request. franz-go
// also calls this at the end of every group session with nothing revoked; that commits
// nothing.
func (c *Consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, parts := range revoked {
		n += len(parts)
	}
	if n == 0 {
		return
	}
	if !c.closed {
		if err := c.commitLocked(ctx, revoked); err != nil {
			// The next owner starts from the last successful commit: work is repeated,
			// never lost.
			c.logFail("commit of revoked partitions failed", err)
		}
	}
	c.forget(revoked)
}

// onLost runs when the member was thrown out of the group; a commit could not succeed.
func (c *Consumer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(lost)
}

// forget drops the bookkeeping of partitions the consumer no longer owns. c.mu is held.
func (c *Consumer) forget(parts map[string][]int32) {
	for topic, ps := range parts {
		for _, p := range ps {
			delete(c.tracks, topicPartition{topic, p})
		}
	}
}

// Close leaves the group without committing; a waiting Fetch returns queue.ErrClosed.
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	// A Fetch between its poll and AllowRebalance would block a plain Close; this one
	// lets the revocation through.
	c.cl.CloseAllowingRebalance()
	return nil
}
