package kafkaqueue

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-dev/tributary/queue"
)

// answerWithin is how long the tests wait for a Publish whose bound is a few seconds: far
// beyond it, so only a Publish that does not answer at all fails them.
const answerWithin = 60 * time.Second

func fakeCluster(t *testing.T, topic string) *kfake.Cluster {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	if err := cluster.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	return cluster
}

// publishAsync runs Publish in a goroutine; await returns its error, failing the test when it
// has not answered within answerWithin.
func publishAsync(ctx context.Context, p *Publisher, msgs ...queue.Message) func(t *testing.T) error {
	ch := make(chan error, 1)
	go func() { ch <- p.Publish(ctx, msgs) }()
	return func(t *testing.T) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(answerWithin):
			t.Fatalf("Publish did not answer within %s (its bound: %s)", answerWithin, p.answer)
			return nil
		}
	}
}

func msg(key, value string) queue.Message {
	return queue.Message{Key: []byte(key), Value: []byte(value)}
}

// wantKinds fails unless err is a *queue.PublishError whose every message failed with kind.
func wantKinds(t *testing.T, what string, err error, n int, kind queue.Kind) {
	t.Helper()
	pe, ok := errors.AsType[*queue.PublishError](err)
	if !ok || len(pe.Errs) != n {
		t.Fatalf("%s: %v, want a PublishError for %d messages", what, err, n)
	}
	for i, e := range pe.Errs {
		if queue.KindOf(e) != kind || !queue.Retryable(e) {
			t.Fatalf("%s: message %d failed with %v (%v), want %v", what, i, e, queue.KindOf(e), kind)
		}
	}
}

// firstErrNil is a context whose first Err call says it is alive although it ended: the
// caller's context ending right after Publish checked it, with the records handed over.
type firstErrNil struct {
	context.Context
	checked atomic.Bool
}

func (c *firstErrNil) Err() error {
	if !c.checked.Swap(true) {
		return nil
	}
	return c.Context.Err()
}

// TestHungBrokerAnswersOutcomeUnknown: a broker that holds a produce request without answering
// (as a stopped process does) delays Publish by its bound, not by the hang: the messages it
// sent come back OutcomeUnknown, and so do the messages of a call whose context ends while they
// wait behind them. Once the broker answers again, the unknown messages turn out written, in
// their order, before what is published next.
func TestHungBrokerAnswersOutcomeUnknown(t *testing.T) {
	cluster := fakeCluster(t, "hung")
	p, err := NewPublisher(t.Context(), Config{Brokers: cluster.ListenAddrs(), Topic: "hung", DeliveryTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Publish answers after 2s; franz-go never gives up a record itself, so every message
	// unanswered then is reported OutcomeUnknown, however fast the machine is.
	p.answer, p.send = 2*time.Second, time.Hour
	if err := p.Publish(t.Context(), []queue.Message{msg("k", "warm")}); err != nil {
		t.Fatal(err)
	}

	var hung atomic.Bool
	hung.Store(true)
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if hung.Load() {
			arrived <- struct{}{}
			cluster.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	defer func() {
		if hung.Swap(false) {
			close(release)
		}
	}()

	await := publishAsync(t.Context(), p, msg("k", "a"), msg("k", "b"))
	select {
	case <-arrived:
	case <-time.After(answerWithin):
		t.Fatal("the produce request never reached the broker")
	}
	err = await(t)
	wantKinds(t, "messages sent to a hung broker", err, 2, queue.OutcomeUnknown)
	if !strings.Contains(err.Error(), "may have been written") {
		t.Fatalf("the error does not say the message may have been written: %v", err)
	}

	// The caller's context ends while its message waits behind the hung ones.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	err = publishAsync(&firstErrNil{Context: gone}, p, msg("k", "c"))(t)
	wantKinds(t, "a message in flight when the context ended", err, 1, queue.OutcomeUnknown)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the error does not carry the context's: %v", err)
	}

	hung.Store(false)
	close(release)
	deadline := time.Now().Add(answerWithin)
	for {
		err := p.Publish(t.Context(), []queue.Message{msg("k", "d")})
		if err == nil {
			break
		}
		if !queue.Retryable(err) || time.Now().After(deadline) {
			t.Fatalf("publishing after the broker answers again: %v", err)
		}
	}
	got := readValues(t, cluster.ListenAddrs(), "hung", "d")
	if !strings.HasPrefix(got, "warm a b ") {
		t.Fatalf("the partition holds %q, want the unknown messages a and b written, in order, before d", got)
	}
}

// readValues returns the values of topic's partition 0 from its start up to the first value
// last, space separated.
func readValues(t *testing.T, brokers []string, topic, last string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()
	var vals []string
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s back: %v (so far %q)", topic, err, vals)
		}
		for _, r := range fs.Records() {
			vals = append(vals, string(r.Value))
			if string(r.Value) == last {
				return strings.Join(vals, " ")
			}
		}
	}
}

// TestUnreachableBrokerIsUnavailable: messages that could not be sent because no broker
// could be reached are reported not written (Unavailable), never OutcomeUnknown.
func TestUnreachableBrokerIsUnavailable(t *testing.T) {
	cluster := fakeCluster(t, "gone")
	p, err := NewPublisher(t.Context(), Config{Brokers: cluster.ListenAddrs(), Topic: "gone", DeliveryTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The records' send deadline passes long before Publish would stop waiting, so franz-go
	// fails every unsent record first, however slow the machine is.
	p.answer, p.send = time.Minute, 200*time.Millisecond
	cluster.Close() // connections refused from now on; this publisher never produced
	err = publishAsync(t.Context(), p, msg("k", "a"), msg("j", "b"))(t)
	wantKinds(t, "messages no broker could take", err, 2, queue.Unavailable)
}

func TestPublishBounds(t *testing.T) {
	for _, c := range []struct{ d, answer, send, produce, overhead time.Duration }{
		{30 * time.Second, 30 * time.Second, 29 * time.Second, 10 * time.Second, 10 * time.Second},
		{10 * time.Second, 10 * time.Second, 9 * time.Second, 5 * time.Second, 5 * time.Second},
		{3 * time.Second, 3 * time.Second, 2400 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{time.Second, time.Second, 800 * time.Millisecond, 500 * time.Millisecond, time.Second},
	} {
		answer, send := publishBounds(c.d)
		produce, overhead := connectionBounds(c.d)
		if answer != c.answer || send != c.send || produce != c.produce || overhead != c.overhead {
			t.Errorf("DeliveryTimeout %s: answer %s send %s produce %s overhead %s, want %s %s %s %s",
				c.d, answer, send, produce, overhead, c.answer, c.send, c.produce, c.overhead)
		}
	}
}
