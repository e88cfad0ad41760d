package memqueue

import (
	"errors"
	"hash/fnv"
	"maps"
	"slices"
	"sync"

	"github.com/tributary-dev/tributary/queue"
)

// Options configures a Broker. The zero value is ready to use.
type Options struct {
	// Partitions is the partition count of topics created implicitly. Default 4.
	Partitions int
	// MaxFetch bounds the messages one Fetch returns. Default 500.
	MaxFetch int
	// RequireTopics makes Publisher and Consumer fail with queue.NotFound for a topic that
	// CreateTopic did not create, as kafkaqueue does when it only checks topics. Default: a
	// topic is created on first use.
	RequireTopics bool
}

// Broker is an in-process message broker. Its methods are safe for concurrent use.
type Broker struct {
	opts Options

	mu     sync.Mutex
	topics map[string]*topic
	// One-shot faults, consumed in order by the next calls of their kind.
	publishFaults []func(queue.Message) error
	fetchFaults   []error
	commitFaults  []error
}

type topic struct {
	name   string
	parts  [][]queue.Message
	groups map[string]*group
	// notify is closed (and replaced) whenever messages arrive or partitions are assigned
	// again, waking every Fetch that waits on this topic.
	notify     chan struct{}
	roundRobin int
}

type group struct {
	committed []int64 // per partition: the offset of the next message to deliver
	members   []*Consumer
}

// New returns an empty Broker. A nil opts means defaults.
func New(opts *Options) *Broker {
	b := &Broker{topics: map[string]*topic{}}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Partitions <= 0 {
		b.opts.Partitions = 4
	}
	if b.opts.MaxFetch <= 0 {
		b.opts.MaxFetch = 500
	}
	return b
}

// CreateTopic creates a topic with the given number of partitions. Creating an existing
// topic again with the same count is a no-op; with another count it is a queue.Invalid error.
func (b *Broker) CreateTopic(name string, partitions int) error {
	if name == "" || partitions <= 0 {
		return &queue.Error{Kind: queue.Invalid, Queue: name, Err: errors.New("a topic needs a name and at least one partition")}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[name]; t != nil {
		if len(t.parts) != partitions {
			return &queue.Error{Kind: queue.Invalid, Queue: name, Err: errors.New("topic exists with another partition count")}
		}
		return nil
	}
	b.topics[name] = newTopic(name, partitions)
	return nil
}

func newTopic(name string, partitions int) *topic {
	return &topic{name: name, parts: make([][]queue.Message, partitions), groups: map[string]*group{}, notify: make(chan struct{})}
}

// topicLocked returns the named topic, creating it unless RequireTopics is set.
func (b *Broker) topicLocked(name string) (*topic, error) {
	if name == "" {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: name, Err: errors.New("empty topic name")}
	}
	t := b.topics[name]
	if t == nil {
		if b.opts.RequireTopics {
			return nil, &queue.Error{Kind: queue.NotFound, Queue: name, Err: errors.New("topic does not exist")}
		}
		t = newTopic(name, b.opts.Partitions)
		b.topics[name] = t
	}
	return t, nil
}

// wakeLocked wakes every Fetch waiting on t.
func (t *topic) wakeLocked() {
	close(t.notify)
	t.notify = make(chan struct{})
}

func (t *topic) partitionFor(key []byte) int32 {
	n := len(t.parts)
	if len(key) == 0 {
		p := t.roundRobin % n
		t.roundRobin++
		return int32(p)
	}
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// Op names a call FailNext can make fail.
type Op uint8

// Calls that can be made to fail.
const (
	OpPublish Op = iota + 1
	OpFetch
	OpCommit
)

// FailNext makes the next call of op, on any publisher or consumer of b, fail with err
// (n calls of FailNext fail the next n calls). A failed Publish writes none of its messages
// and reports err for each in its *queue.PublishError; a failed Fetch returns no messages
// and delivers nothing; a failed Commit commits nothing.
func (b *Broker) FailNext(op Op, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch op {
	case OpPublish:
		b.publishFaults = append(b.publishFaults, func(queue.Message) error { return err })
	case OpFetch:
		b.fetchFaults = append(b.fetchFaults, err)
	case OpCommit:
		b.commitFaults = append(b.commitFaults, err)
	default:
		panic("memqueue: FailNext with an unknown Op")
	}
}

// FailMessages makes the next Publish call fail each message for which fail returns an
// error, and write the others: a partial failure.
func (b *Broker) FailMessages(fail func(queue.Message) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishFaults = append(b.publishFaults, fail)
}

func takeFault[T any](faults *[]T) (T, bool) {
	var zero T
	if len(*faults) == 0 {
		return zero, false
	}
	f := (*faults)[0]
	*faults = (*faults)[1:]
	return f, true
}

// Committed returns the committed offsets of group on topic by partition; partitions the
// group never committed are absent.
func (b *Broker) Committed(topicName, groupName string) map[int32]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int32]int64{}
	t := b.topics[topicName]
	if t == nil || t.groups[groupName] == nil {
		return out
	}
	for p, off := range t.groups[groupName].committed {
		if off > 0 {
			out[int32(p)] = off
		}
	}
	return out
}

// Messages returns every message of the topic, partition by partition in offset order.
func (b *Broker) Messages(topicName string) []queue.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[topicName]
	if t == nil {
		return nil
	}
	var out []queue.Message
	for _, p := range t.parts {
		out = append(out, p...)
	}
	return out
}

// Topics returns the names of the broker's topics, sorted.
func (b *Broker) Topics() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.topics))
}
