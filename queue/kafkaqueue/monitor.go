package kafkaqueue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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
	if m.group == "" {
		return Lag{}, &queue.Error{Kind: queue.Invalid, Queue: m.topic, Err: errors.New("Lag needs a consumer group in the Config")}
	}
	topics, err := m.watched(ctx)
	if err != nil {
		return Lag{}, err
	}
	if len(topics) == 0 {
		return Lag{Topics: map[string]map[int32]int64{}}, nil
	}
	ends, err := m.listed(ctx, m.adm.ListEndOffsets, topics)
	if err != nil {
		return Lag{}, err
	}
	starts, err := m.listed(ctx, m.adm.ListStartOffsets, topics)
	if err != nil {
		return Lag{}, err
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
		return Lag{}, m.fail(ctx, err)
	}
	lag := Lag{Topics: make(map[string]map[int32]int64, len(topics))}
	for _, t := range topics {
		parts := make(map[int32]int64, len(ends[t]))
		for p, end := range ends[t] {
			at := int64(0)
			if s, ok := starts.Lookup(t, p); ok {
				at = s.Offset
			}
			if c, ok := commits.Lookup(t, p); ok && c.At >= 0 {
				at = c.At
			}
			n := max(end.Offset-at, 0)
			parts[p] = n
			lag.Total += n
			lag.Head += end.Offset
			lag.Position += min(at, end.Offset)
		}
		lag.Topics[t] = parts
	}
	if len(m.topics) == 1 && m.pattern == nil {
		lag.Partitions = lag.Topics[m.topics[0]]
	}
	return lag, nil
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
