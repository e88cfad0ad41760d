package kafkaqueue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-dev/tributary/queue"
)

// Monitor watches one topic and, when its Config names a group, that group's progress on it:
// a health probe (Ping) and the group's lag (Lag). It keeps one client with the same brokers,
// TLS and SASL as the Publisher and Consumer of the same Config, so a periodic check costs a
// request or three on an open connection. It is safe for concurrent use.
type Monitor struct {
	cl      *kgo.Client
	adm     *kadm.Client
	topic   string         // Topic, or the Config's queue name (Topics joined, TopicPattern)
	topics  []string       // Topics, or Topic alone
	pattern *regexp.Regexp // TopicPattern, anchored
	group   string
	dials   *dialErrors
	close   sync.Once

	stampsMu sync.Mutex
	stamps   map[topicPartition]stamp // per partition: the timestamp of the message at one offset
}

// stamp is the timestamp of the first message at or after offset on a partition; Backlog
// keeps the latest one per partition, so a group that does not move costs no fetch.
type stamp struct {
	offset int64
	at     time.Time
}

// Lag is how far a consumer group is behind on its topic: the messages published and not yet
// committed by the group, which for a store's queue is the accepted writes not yet applied
// for good (its queue depth).
type Lag struct {
	// Total is the sum of Partitions.
	Total int64
	// Partitions maps every partition of the topic to the messages between the group's
	// committed offset and the partition's end. A partition the group never committed counts
	// from its first retained message, where the group would start. Set for a Config with
	// one Topic.
	Partitions map[int32]int64
	// Topics is Partitions per topic, for every Config (with Topics or TopicPattern: the
	// topics it names or matches now).
	Topics map[string]map[int32]int64
	// Head and Position are the sums, over every partition, of its end offset and of where
	// the group is (committed, else the first retained message): two positions on one axis
	// that only grow while the partitions do, so a reader can tell when the group passed a
	// head it saw earlier.
	Head, Position int64
}

// Backlog is a group's Lag and the age of its oldest message: how much its consumer still has
// to do and since when. For a store's queue, the accepted writes not yet applied for good and
// the time the oldest of them has waited.
type Backlog struct {
	Lag
	// Oldest is the timestamp of the oldest message the group has not committed: the
	// earliest, over the partitions with a lag, of the timestamp of the first message at or
	// after where the group is. It is the producer's clock (CreateTime, kgo sets it when a
	// message is published) or the broker's (a topic with LogAppendTime). Zero when Total is
	// 0, and when no such message has a timestamp (none do before message format v1, Kafka
	// 0.10) or retention removed them between the two reads.
	Oldest time.Time
}

// Age is how long the oldest message has waited at now: now - Oldest, never negative, and 0
// when Oldest is zero (an empty backlog). It keeps growing with now while nothing is
// measured, so a reader that keeps the last Backlog of an unreachable cluster sees the wait
// grow instead of freezing.
func (b Backlog) Age(now time.Time) time.Duration {
	if b.Oldest.IsZero() {
		return 0
	}
	return max(now.Sub(b.Oldest), 0)
}

// NewMonitor validates cfg and builds the monitor's client; it connects on first use, so
// an unreachable cluster shows in Ping, not here. cfg.Group is needed only by Lag; the
// monitor never creates a topic (CreateTopic is ignored). It watches the Config's Topic,
// Topics or TopicPattern. opts may be nil.
func NewMonitor(cfg Config, o *Options) (*Monitor, error) {
	if err := cfg.validate(forMonitor); err != nil {
		return nil, err
	}
	m := &Monitor{topic: cfg.queueName(), group: cfg.Group, dials: &dialErrors{}}
	switch {
	case cfg.Topic != "":
		m.topics = []string{cfg.Topic}
	case len(cfg.Topics) > 0:
		m.topics = cfg.Topics
	default:
		var err error
		if m.pattern, err = compilePattern(cfg.TopicPattern); err != nil {
			return nil, &queue.Error{Kind: queue.Invalid, Queue: m.topic, Err: err}
		}
	}
	opts, err := cfg.clientOptions(o.logger())
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.WithHooks(m.dials))...)
	if err != nil {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: m.topic, Err: err}
	}
	m.cl, m.adm = cl, kadm.NewClient(cl)
	return m, nil
}

// watched returns the topics the monitor watches now: the listed ones, or those the pattern
// matches (never internal ones).
func (m *Monitor) watched(ctx context.Context) ([]string, error) {
	if m.pattern == nil {
		return m.topics, nil
	}
	details, err := m.adm.ListTopics(ctx)
	if err != nil {
		return nil, m.fail(ctx, err)
	}
	var out []string
	for name := range details {
		if m.pattern.MatchString(name) && !internalTopic.MatchString(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Ping checks that the brokers answer and know the topic: one metadata request. It returns
// nil, or a *queue.Error classified as everywhere in this package: Unavailable when the
// brokers cannot be reached, Denied when they refuse the credentials or the certificate,
// NotFound when the topic does not exist. When ctx's deadline passes before the brokers
// answered, the error is Unavailable (for a probe, no answer in time is the answer) and
// carries the last connection error, if any, and context.DeadlineExceeded; a canceled ctx
// comes back bare.
func (m *Monitor) Ping(ctx context.Context) error {
	details, err := m.adm.ListTopics(ctx, m.topics...) // a pattern: every topic (none may match yet)
	if err != nil {
		return m.fail(ctx, err)
	}
	for _, t := range m.topics {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return &queue.Error{Kind: queue.NotFound, Queue: t, Err: errNoTopic}
		}
		if d.Err != nil {
			return m.fail(ctx, d.Err)
		}
	}
	return nil
}

// Lag reads the group's committed offsets and the topic's start and end offsets (three
// requests) and returns how far the group is behind. The offsets are listed one after the
// other, so a lag read while the group works is a moment's estimate, never negative. Errors
// are classified as Ping's; a Config without a group is Invalid.
func (m *Monitor) Lag(ctx context.Context) (Lag, error) {
	lag, _, err := m.lag(ctx, "Lag")
	return lag, err
}

// lag is Lag, and for every partition with a lag the offset of its oldest message not
// committed: the group's position, or the first retained message when retention removed
// the messages at that position.
func (m *Monitor) lag(ctx context.Context, caller string) (Lag, map[topicPartition]int64, error) {
	if m.group == "" {
		return Lag{}, nil, &queue.Error{Kind: queue.Invalid, Queue: m.topic, Err: errors.New(caller + " needs a consumer group in the Config")}
	}
	topics, err := m.watched(ctx)
	if err != nil {
		return Lag{}, nil, err
	}
	if len(topics) == 0 {
		return Lag{Topics: map[string]map[int32]int64{}}, nil, nil
	}
	ends, err := m.listed(ctx, m.adm.ListEndOffsets, topics)
	if err != nil {
		return Lag{}, nil, err
	}
	starts, err := m.listed(ctx, m.adm.ListStartOffsets, topics)
	if err != nil {
		return Lag{}, nil, err
	}
	commits, err := m.adm.FetchOffsets(ctx, m.group)
	if err == nil {
		err = commits.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		// Some brokers (kfake, newer Kafka versions) say so for a group that never
		// committed; it starts at the partitions' beginnings.
		commits, err = nil, nil
	}
	if err != nil {
		return Lag{}, nil, m.fail(ctx, err)
	}
	lag := Lag{Topics: make(map[string]map[int32]int64, len(topics))}
	pending := map[topicPartition]int64{}
	for _, t := range topics {
		parts := make(map[int32]int64, len(ends[t]))
		for p, end := range ends[t] {
			at, start := int64(0), int64(0)
			if s, ok := starts.Lookup(t, p); ok {
				at, start = s.Offset, s.Offset
			}
			if c, ok := commits.Lookup(t, p); ok && c.At >= 0 {
				at = c.At
			}
			n := max(end.Offset-at, 0)
			parts[p] = n
			lag.Total += n
			lag.Head += end.Offset
			lag.Position += min(at, end.Offset)
			if n > 0 && max(at, start) < end.Offset {
				pending[topicPartition{t, p}] = max(at, start)
			}
		}
		lag.Topics[t] = parts
	}
	if len(m.topics) == 1 && m.pattern == nil {
		lag.Partitions = lag.Topics[m.topics[0]]
	}
	return lag, pending, nil
}

// Backlog is Lag and the timestamp of the oldest message the group has not committed. On top
// of Lag's three requests it reads, for each partition with a lag whose position moved since
// the last call, the first record batch at that position (one metadata request and one small
// fetch per partition leader, on the monitor's connections; nothing when no position
// moved). Errors are classified as Ping's; a Config without a group is Invalid.
func (m *Monitor) Backlog(ctx context.Context) (Backlog, error) {
	lag, pending, err := m.lag(ctx, "Backlog")
	if err != nil {
		return Backlog{}, err
	}
	b := Backlog{Lag: lag}
	if len(pending) == 0 {
		return b, nil
	}
	stamps, err := m.timestamps(ctx, pending)
	if err != nil {
		return Backlog{}, err
	}
	for _, at := range stamps {
		if !at.IsZero() && (b.Oldest.IsZero() || at.Before(b.Oldest)) {
			b.Oldest = at
		}
	}
	return b, nil
}

// Bounds of the fetches that read the timestamps: a partition's share is small, for only
// its first message counts, but a batch larger than it still comes back whole (the broker
// returns at least one batch for the first partition with data), and what did not fit is
// asked again in the next round.
const (
	stampFetchBytes          = 1 << 20
	stampFetchPartitionBytes = 64 << 10
	stampRounds              = 8
)

// timestamps returns the timestamp of the first message at or after the offset of each
// partition in pending (zero when it has none: a message without a timestamp, or retention
// removed it), from the cache when the offset did not move.
func (m *Monitor) timestamps(ctx context.Context, pending map[topicPartition]int64) (map[topicPartition]time.Time, error) {
	out := make(map[topicPartition]time.Time, len(pending))
	miss := map[topicPartition]int64{}
	m.stampsMu.Lock()
	for tp, off := range pending {
		if s, ok := m.stamps[tp]; ok && s.offset == off {
			out[tp] = s.at
		} else {
			miss[tp] = off
		}
	}
	m.stampsMu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	var topics []string
	for tp := range miss {
		if !slices.Contains(topics, tp.topic) {
			topics = append(topics, tp.topic)
		}
	}
	details, err := m.adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, m.fail(ctx, err)
	}
	byLeader := map[int32]map[topicPartition]int64{}
	ids := map[string][16]byte{}
	for tp, off := range miss {
		d, ok := details[tp.topic]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return nil, &queue.Error{Kind: queue.NotFound, Queue: m.topic, Err: errNoTopic}
		}
		if d.Err != nil {
			return nil, m.fail(ctx, d.Err)
		}
		ids[tp.topic] = d.ID
		p, ok := d.Partitions[tp.partition]
		if !ok || p.Err != nil || p.Leader < 0 {
			err := p.Err
			if err == nil {
				err = kerr.LeaderNotAvailable
			}
			return nil, m.fail(ctx, fmt.Errorf("topic %s partition %d: %w", tp.topic, tp.partition, err))
		}
		if byLeader[p.Leader] == nil {
			byLeader[p.Leader] = map[topicPartition]int64{}
		}
		byLeader[p.Leader][tp] = off
	}
	found := map[topicPartition]time.Time{}
	for leader, parts := range byLeader {
		if err := m.fetchStamps(ctx, leader, ids, parts, found); err != nil {
			return nil, err
		}
	}
	m.stampsMu.Lock()
	if m.stamps == nil {
		m.stamps = map[topicPartition]stamp{}
	}
	for tp, off := range miss {
		out[tp] = found[tp]
		m.stamps[tp] = stamp{offset: off, at: found[tp]} // keyed by the asked offset: the next call asks it again
	}
	for tp := range m.stamps {
		if _, ok := pending[tp]; !ok {
			delete(m.stamps, tp) // a partition without a lag now: its next message is a new one
		}
	}
	m.stampsMu.Unlock()
	return out, nil
}

// fetchStamps fetches from one leader the first message at or after each partition's offset
// and records its timestamp in found (a partition whose messages retention removed, or whose
// message has no timestamp, gets a zero one). A partition the response had no room for,
// or whose batch held only control records, is asked again, for at most stampRounds rounds.
func (m *Monitor) fetchStamps(ctx context.Context, leader int32, ids map[string][16]byte, parts map[topicPartition]int64, found map[topicPartition]time.Time) error {
	left := maps.Clone(parts)
	decompressor := kgo.DefaultDecompressor()
	for range stampRounds {
		if len(left) == 0 {
			return nil
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = stampFetchBytes
		byTopic := map[string]int{}
		for tp, off := range left {
			i, ok := byTopic[tp.topic]
			if !ok {
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = tp.topic, ids[tp.topic]
				req.Topics = append(req.Topics, t)
				i = len(req.Topics) - 1
				byTopic[tp.topic] = i
			}
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition, p.FetchOffset, p.PartitionMaxBytes = tp.partition, off, stampFetchPartitionBytes
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
		}
		kresp, err := m.cl.Broker(int(leader)).RetriableRequest(ctx, req)
		if err != nil {
			return m.fail(ctx, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return m.fail(ctx, err)
		}
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			topic := rt.Topic
			if req.Version >= 13 {
				for name, id := range ids {
					if id == rt.TopicID {
						topic = name
					}
				}
			}
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				tp := topicPartition{topic, rp.Partition}
				off, ok := left[tp]
				if !ok {
					continue
				}
				switch err := kerr.ErrorForCode(rp.ErrorCode); {
				case errors.Is(err, kerr.OffsetOutOfRange):
					// Retention removed the message between the two reads; the next
					// Backlog starts from the new first message.
					delete(left, tp)
					continue
				case err != nil:
					return m.fail(ctx, fmt.Errorf("topic %s partition %d: %w", tp.topic, tp.partition, err))
				}
				fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, Topic: tp.topic, Partition: tp.partition}, rp, decompressor, nil)
				if fp.Err != nil && len(fp.Records) == 0 {
					return m.fail(ctx, fmt.Errorf("topic %s partition %d: reading the batch at offset %d: %w", tp.topic, tp.partition, off, fp.Err))
				}
				switch {
				case len(fp.Records) > 0:
					r := fp.Records[0]
					var at time.Time
					if r.Timestamp.UnixMilli() > 0 {
						at = r.Timestamp
					}
					found[tp] = at
					delete(left, tp)
				case off >= rp.HighWatermark:
					delete(left, tp) // consumed and gone since the offsets were read: nothing waits
				case next > off:
					left[tp] = next // control records only: look further
				}
				// else: no room in this response; asked again in the next round
			}
		}
	}
	if len(left) > 0 {
		return &queue.Error{Kind: queue.Unavailable, Queue: m.topic,
			Err: fmt.Errorf("the first message of %d partition(s) did not come back in %d fetches", len(left), stampRounds)}
	}
	return nil
}

// ErrGroupInUse is what DeleteGroup's error wraps when the group still has members.
var ErrGroupInUse = errors.New("the consumer group has live members")

// DeleteGroup deletes the Config's consumer group, its committed offsets with it, so that a
// consumer of the group starts over at the partitions' beginnings. A group that does not
// exist is no error (deleted reports whether one was); one with live members is refused
// (ErrGroupInUse). Errors are classified as Ping's.
func (m *Monitor) DeleteGroup(ctx context.Context) (deleted bool, err error) {
	if m.group == "" {
		return false, &queue.Error{Kind: queue.Invalid, Queue: m.topic, Err: errors.New("DeleteGroup needs a consumer group in the Config")}
	}
	resp, err := m.adm.DeleteGroup(ctx, m.group)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kerr.GroupIDNotFound):
		return false, nil
	case errors.Is(err, kerr.NonEmptyGroup):
		return false, &queue.Error{Kind: queue.Invalid, Queue: m.topic, Err: fmt.Errorf("group %s: %w", m.group, ErrGroupInUse)}
	}
	return false, m.fail(ctx, err)
}

// listed lists the topics' start or end offsets; a missing topic is NotFound.
func (m *Monitor) listed(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topics []string) (kadm.ListedOffsets, error) {
	offsets, err := list(ctx, topics...)
	if err == nil {
		err = offsets.Error()
	}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, &queue.Error{Kind: queue.NotFound, Queue: m.topic, Err: errNoTopic}
	case err != nil:
		return nil, m.fail(ctx, err)
	}
	return offsets, nil
}

// fail classifies err, turning a deadline that passed while the brokers did not answer into
// Unavailable with the last connection error as its cause.
func (m *Monitor) fail(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		if last := m.dials.last(); last != nil {
			err = fmt.Errorf("no answer from the brokers before the deadline (last connection attempt: %w; %w)", last, context.DeadlineExceeded)
		} else {
			err = fmt.Errorf("no answer from the brokers before the deadline: %w", context.DeadlineExceeded)
		}
		return &queue.Error{Kind: queue.Unavailable, Queue: m.topic, Err: err}
	}
	return classify(m.topic, err)
}

// Close releases the monitor's connections. It is idempotent and returns nil (franz-go's
// client reports no close error); it has the repository's Close() error shape.
func (m *Monitor) Close() error {
	m.close.Do(m.cl.Close)
	return nil
}

// dialErrors remembers the outcome of the latest connection attempt, which franz-go's retries
// otherwise hide behind the context error when a deadline passes. Its errors name the broker
// address and the failure (refused, TLS, SASL), never credentials.
type dialErrors struct {
	mu  sync.Mutex
	err error
}

func (d *dialErrors) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
}

func (d *dialErrors) last() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
