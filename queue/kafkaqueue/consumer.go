package kafkaqueue

import (
	"context"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-dev/tributary/queue"
)

// Consumer consumes one topic as a member of a consumer group, committing only the finished
// prefix of each partition. It implements queue.Consumer; its methods are safe for
// concurrent use (concurrent Fetch calls run one at a time).
type Consumer struct {
	cl       *kgo.Client
	topic    string
	maxFetch int

	fetchMu sync.Mutex // one poll at a time: a poll and its bookkeeping are one step

	// mu guards the bookkeeping, and is held across every commit, so a partition cannot be
	// revoked (the callback takes mu) while a commit naming it is in flight.
	mu      sync.Mutex
	closed  bool
	tracks  map[int32]*track
	logFail func(msg string, err error)
}

// track is the bookkeeping of one partition for its current ownership.
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

// NewConsumer joins cfg.Group on cfg.Topic after checking (or creating) the topic. A group
// that never committed starts at the earliest offset. ctx bounds the check. opts may be nil.
func NewConsumer(ctx context.Context, cfg Config, o *Options) (*Consumer, error) {
	if err := cfg.validate(true); err != nil {
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
	c := &Consumer{topic: cfg.Topic, maxFetch: maxFetch, tracks: map[int32]*track{}, logFail: func(string, error) {}}
	if log != nil {
		c.logFail = func(msg string, err error) {
			log.Warn(msg, "topic", cfg.Topic, "group", cfg.Group, "err", err)
		}
	}
	// The topic is checked with a client outside the group, so a missing topic never
	// makes a group member that consumes nothing.
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: cfg.Topic, Err: err}
	}
	err = ensureTopic(ctx, admin, &cfg)
	admin.Close()
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
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
	c.cl, err = kgo.NewClient(opts...)
	if err != nil {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: cfg.Topic, Err: err}
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
		t := c.trackFor(r.Partition, r.Offset)
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
	fs.EachError(func(_ string, _ int32, err error) {
		if firstErr == nil {
			firstErr = err
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
		return nil, classify(c.topic, firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, nil
}

// trackFor returns the track of partition p for a record at offset. An offset at or below
// what the track already handed out means franz-go moved the partition back (an offset
// reset); the old bookkeeping can then no longer be committed, so a new track starts.
func (c *Consumer) trackFor(p int32, offset int64) *track {
	t := c.tracks[p]
	if t != nil && (len(t.pending) > 0 && offset <= t.pending[len(t.pending)-1].offset || offset < t.commitAt.Offset) {
		t = &track{commitAt: kgo.EpochOffset{Epoch: -1, Offset: -1}, committed: t.committed}
		c.tracks[p] = t
	}
	if t == nil {
		t = &track{commitAt: kgo.EpochOffset{Epoch: -1, Offset: -1}, committed: -1}
		c.tracks[p] = t
	}
	return t
}

// Finish marks messages as processed. Messages of partitions the consumer no longer owns,
// or that it did not hand out since it owns them, are ignored: their owner receives them
// again from the committed offset.
func (c *Consumer) Finish(msgs ...queue.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		t := c.tracks[m.Partition]
		if m.Topic != c.topic || t == nil {
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

// Commit commits the finished prefix of every owned partition that advanced.
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

// commitLocked commits the finished prefixes of the given partitions (all owned ones when
// only is nil) and remembers what was committed.
func (c *Consumer) commitLocked(ctx context.Context, only []int32) error {
	offsets := map[int32]kgo.EpochOffset{}
	for p, t := range c.tracks {
		if only != nil && !slices.Contains(only, p) {
			continue
		}
		if t.commitAt.Offset > t.committed {
			offsets[p] = t.commitAt
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	var commitErr error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				commitErr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && commitErr == nil {
						commitErr = err
					}
				}
			}
		})
	if commitErr != nil {
		return classify(c.topic, commitErr)
	}
	for p, off := range offsets {
		if t := c.tracks[p]; t != nil {
			t.committed = off.Offset
		}
	}
	return nil
}

// onRevoked runs when the group takes partitions away from a live member: the finished
// prefix is real work, so it is committed before the partitions move; unfinished messages
// are forgotten and their new owner receives them again. A closing consumer commits
// nothing, as queue.Consumer.Close promises.
func (c *Consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := revoked[c.topic]
	if len(parts) == 0 {
		return
	}
	if !c.closed {
		if err := c.commitLocked(ctx, parts); err != nil {
			// The next owner starts from the last successful commit: work is repeated,
			// never lost.
			c.logFail("commit of revoked partitions failed", err)
		}
	}
	for _, p := range parts {
		delete(c.tracks, p)
	}
}

// onLost runs when the member was thrown out of the group; a commit could not succeed.
func (c *Consumer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range lost[c.topic] {
		delete(c.tracks, p)
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
