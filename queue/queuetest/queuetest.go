package queuetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
)

// Harness is what an implementation supplies to the suite.
type Harness struct {
	// NewTopic returns the name of a new, empty topic with at least two partitions, and
	// registers its removal with t.Cleanup if the backend keeps topics.
	NewTopic func(ctx context.Context, t *testing.T) string
	// NewPublisher returns a publisher to topic. The suite closes it.
	NewPublisher func(ctx context.Context, t *testing.T, topic string) queue.Publisher
	// NewConsumer returns a new member of group consuming topic. The suite closes it.
	NewConsumer func(ctx context.Context, t *testing.T, topic, group string) queue.Consumer
	// Timeout bounds each behaviour. Default 2 minutes.
	Timeout time.Duration
}

type behaviour struct {
	name string
	run  func(ctx context.Context, t *testing.T, e *env)
}

var behaviours = []behaviour{
	{"RoundTrip", testRoundTrip},
	{"PerKeyOrder", testPerKeyOrder},
	{"UnfinishedGapHoldsCommit", testGapHoldsCommit},
	{"NewConsumerResumesAfterCommit", testResume},
	{"FetchHonoursContext", testFetchContext},
	{"UseAfterClose", testUseAfterClose},
	{"LargeBatch", testLargeBatch},
	{"ConcurrentPublishers", testConcurrentPublishers},
	{"SharedGroup", testSharedGroup},
}

// Run runs every behaviour against h.
func Run(t *testing.T, h Harness) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			e := &env{h: h, t: t, run: randomHex()}
			e.topic = h.NewTopic(ctx, t)
			b.run(ctx, t, e)
		})
	}
}

type env struct {
	h     Harness
	t     *testing.T
	topic string
	run   string // random part of group names
}

func randomHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// group returns a group name unique to this run of the behaviour.
func (e *env) group(name string) string { return "queuetest-" + name + "-" + e.run }

func (e *env) publisher(ctx context.Context) queue.Publisher {
	p := e.h.NewPublisher(ctx, e.t, e.topic)
	e.t.Cleanup(func() { p.Close() })
	return p
}

func (e *env) consumer(ctx context.Context, group string) queue.Consumer {
	c := e.h.NewConsumer(ctx, e.t, e.topic, group)
	e.t.Cleanup(func() { c.Close() })
	return c
}

// item builds a message whose value names its key and sequence number.
func item(key string, seq int) queue.Message {
	return queue.Message{Key: []byte(key), Value: []byte(key + "/" + strconv.Itoa(seq))}
}

// parse returns the key and sequence number item wrote into m's value.
func parse(t *testing.T, m queue.Message) (string, int) {
	t.Helper()
	key, rest, ok := strings.Cut(string(m.Value), "/")
	seq, _, _ := strings.Cut(rest, "/") // padding may follow
	n, err := strconv.Atoi(seq)
	if !ok || err != nil || key != string(m.Key) {
		t.Fatalf("message at %d/%d carries a value the suite did not write", m.Partition, m.Offset)
	}
	return key, n
}

func publish(ctx context.Context, t *testing.T, p queue.Publisher, msgs []queue.Message) {
	t.Helper()
	if err := p.Publish(ctx, msgs); err != nil {
		t.Fatalf("Publish of %d messages: %v", len(msgs), err)
	}
}

// fetchN fetches until it has n messages, failing on an error or on more than n.
func fetchN(ctx context.Context, t *testing.T, c queue.Consumer, n int) []queue.Message {
	t.Helper()
	var out []queue.Message
	for len(out) < n {
		got, err := c.Fetch(ctx)
		if err != nil {
			t.Fatalf("Fetch after %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, got...)
	}
	if len(out) > n {
		t.Fatalf("fetched %d messages, want %d", len(out), n)
	}
	return out
}

// fetchThrough fetches until it has seen a message with the value of marker, and returns
// everything fetched before it. Messages published before the marker with the marker's key
// are all delivered before it, so this is how a behaviour proves what was not redelivered
// without waiting for a silence.
func fetchThrough(ctx context.Context, t *testing.T, c queue.Consumer, marker queue.Message) []queue.Message {
	t.Helper()
	var out []queue.Message
	for {
		got, err := c.Fetch(ctx)
		if err != nil {
			t.Fatalf("Fetch while waiting for the marker (after %d messages): %v", len(out), err)
		}
		for _, m := range got {
			if string(m.Value) == string(marker.Value) {
				return out
			}
			out = append(out, m)
		}
	}
}

func commit(ctx context.Context, t *testing.T, c queue.Consumer) {
	t.Helper()
	if err := c.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// seqs returns the sequence numbers of msgs of key, in delivery order.
func seqs(t *testing.T, msgs []queue.Message, key string) []int {
	t.Helper()
	var out []int
	for _, m := range msgs {
		if k, n := parse(t, m); k == key {
			out = append(out, n)
		}
	}
	return out
}

func rangeInts(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func sameInts(t *testing.T, what string, got, want []int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}
