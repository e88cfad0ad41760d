package kafkaqueue_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// TestMonitorBacklog follows a group's backlog through its life: an empty topic is 0 messages
// and no oldest message; messages published with no consumer are all counted, the oldest
// timestamp is the first publish's, and its age grows; once the group committed the first
// wave the oldest is a message of the second; once it committed everything the backlog is
// 0 and has no age again.
func TestMonitorBacklog(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		cluster := newFake(t)
		topic := uniqueName("l39_backlog")
		if err := cluster.CreateTopic(topic, 3, nil); err != nil {
			t.Fatal(err)
		}
		var fetches atomic.Int64
		cluster.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			cluster.KeepControl()
			fetches.Add(1)
			return nil, nil, false
		})
		testBacklog(t, cluster.ListenAddrs(), topic, 200*time.Millisecond, &fetches)
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
		topic := uniqueName("l39_backlog")
		createTopic(t.Context(), t, admin(t, brokers), topic, 3)
		testBacklog(t, brokers, topic, 0, nil)
	})
}

// testBacklog runs TestMonitorBacklog on one cluster; fetches, when set, counts the Fetch
// requests the cluster receives (kfake), to show that a backlog whose positions did not move
// is measured without fetching.
func testBacklog(t *testing.T, brokers []string, topic string, fetchMaxWait time.Duration, fetches *atomic.Int64) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	group := uniqueName("l39_backlog")
	t.Cleanup(func() { admin(t, brokers).DeleteGroups(context.Background(), group) })
	cfg := kafkaqueue.Config{Brokers: brokers, Topic: topic, Group: group, FetchMaxWait: fetchMaxWait}
	mon, err := kafkaqueue.NewMonitor(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	b, err := mon.Backlog(ctx)
	if err != nil || b.Total != 0 || !b.Oldest.IsZero() || b.Age(time.Now()) != 0 {
		t.Fatalf("Backlog of an empty topic: %+v, %v; want 0 messages and no oldest", b, err)
	}

	p, err := kafkaqueue.NewPublisher(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 30 // per wave
	wave := func(name string) {
		msgs := make([]queue.Message, n)
		for i := range msgs {
			msgs[i] = queue.Message{Key: fmt.Appendf(nil, "k%d", i), Value: []byte(name)}
		}
		if err := p.Publish(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	// Timestamps are milliseconds: the bounds are taken on millisecond boundaries.
	before := time.Now().Truncate(time.Millisecond)
	wave("first")
	time.Sleep(2 * time.Millisecond)
	between := time.Now().Truncate(time.Millisecond)
	time.Sleep(2 * time.Millisecond)
	wave("second")
	after := time.Now()

	b, err = mon.Backlog(ctx)
	if err != nil || b.Total != 2*n {
		t.Fatalf("Backlog before the group committed anything: %+v, %v; want %d messages", b, err, 2*n)
	}
	if b.Oldest.Before(before) || !b.Oldest.Before(between) {
		t.Fatalf("oldest message at %s, want one of the first wave, published in [%s, %s)", b.Oldest, before, between)
	}
	first := b
	if fetches != nil {
		fetches.Store(0)
	}
	var again kafkaqueue.Backlog
	eventually(ctx, t, "the age of the oldest message grows", func() bool {
		again, err = mon.Backlog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return again.Age(time.Now()) > first.Age(after)
	})
	if again.Total != 2*n || !again.Oldest.Equal(first.Oldest) {
		t.Fatalf("Backlog measured again with nothing consumed: %+v, want %+v", again, first)
	}
	if fetches != nil && fetches.Load() != 0 {
		t.Fatalf("measuring a backlog whose positions did not move sent %d Fetch requests, want none (cached)", fetches.Load())
	}

	c, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var firstWave, secondWave []queue.Message
	for len(firstWave)+len(secondWave) < 2*n {
		ms, err := c.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if string(m.Value) == "first" {
				firstWave = append(firstWave, m)
			} else {
				secondWave = append(secondWave, m)
			}
		}
	}
	// The first wave precedes the second on every partition: finishing it commits exactly it.
	c.Finish(firstWave...)
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b, err = mon.Backlog(ctx)
	if err != nil || b.Total != n {
		t.Fatalf("Backlog after committing the first wave: %+v, %v; want %d messages", b, err, n)
	}
	if b.Oldest.Before(between) || b.Oldest.After(after) {
		t.Fatalf("oldest message after committing the first wave at %s, want one of the second, published in [%s, %s]", b.Oldest, between, after)
	}

	c.Finish(secondWave...)
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b, err = mon.Backlog(ctx)
	if err != nil || b.Total != 0 || !b.Oldest.IsZero() || b.Age(time.Now()) != 0 {
		t.Fatalf("Backlog after committing everything: %+v, %v; want 0 messages and no oldest", b, err)
	}
	if lag, err := mon.Lag(ctx); err != nil || lag.Total != b.Total || lag.Head != b.Head {
		t.Fatalf("Lag %+v, %v disagrees with Backlog %+v", lag, err, b.Lag)
	}
}

// eventually polls cond every 50ms until it holds; it fails the test when ctx ends first.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not before the deadline", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Backlog without a group is Invalid, and against a closed port Unavailable, as Lag.
func TestMonitorBacklogErrors(t *testing.T) {
	cluster := newFake(t)
	cluster.CreateTopic("t", 1, nil)
	mon, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if _, err := mon.Backlog(t.Context()); queue.KindOf(err) != queue.Invalid || !strings.Contains(err.Error(), "Backlog needs a consumer group") {
		t.Fatalf("Backlog without a group: %v, want Invalid", err)
	}
	refused, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: []string{closedPort(t)}, Topic: "t", Group: "g"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := refused.Backlog(ctx); queue.KindOf(err) != queue.Unavailable {
		t.Fatalf("Backlog of a closed port: %v, want Unavailable", err)
	}
}

// Backlog.Age is now - Oldest, never negative, and 0 without an oldest message.
func TestBacklogAge(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		oldest time.Time
		want   time.Duration
	}{{time.Time{}, 0}, {now.Add(-3 * time.Second), 3 * time.Second}, {now.Add(time.Second), 0}} {
		if got := (kafkaqueue.Backlog{Oldest: c.oldest}).Age(now); got != c.want {
			t.Errorf("Age with oldest %v: %s, want %s", c.oldest, got, c.want)
		}
	}
}

// A broker that stops answering (every request held, connections open, as when its process
// is stopped) fails Backlog with Unavailable within the caller's deadline; the Backlog kept
// from before ages with the clock, and once the broker answers again Backlog measures the
// same oldest message.
func TestMonitorBacklogHungBroker(t *testing.T) {
	cluster := newFake(t)
	topic := uniqueName("l39_backlog_hung")
	if err := cluster.CreateTopic(topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: topic, Group: uniqueName("l39_backlog_hung")}
	p, err := kafkaqueue.NewPublisher(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Publish(ctx, []queue.Message{msg("a", "1"), msg("b", "2"), msg("c", "3")}); err != nil {
		t.Fatal(err)
	}
	mon, err := kafkaqueue.NewMonitor(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	kept, err := mon.Backlog(ctx)
	if err != nil || kept.Total != 3 || kept.Oldest.IsZero() {
		t.Fatalf("Backlog before the hang: %+v, %v", kept, err)
	}

	release := make(chan struct{})
	var once atomic.Bool
	resume := func() {
		if once.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(resume)
	cluster.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		<-release // hold every request until resumed
		return nil, nil, false
	})
	ageBefore := kept.Age(time.Now())
	hung, cancelHung := context.WithTimeout(ctx, time.Second)
	_, err = mon.Backlog(hung)
	cancelHung()
	if queue.KindOf(err) != queue.Unavailable {
		t.Fatalf("Backlog of a hung broker: %v, want Unavailable", err)
	}
	if ageAfter := kept.Age(time.Now()); ageAfter <= ageBefore {
		t.Fatalf("the kept backlog's age did not grow while the broker hung: %s then %s", ageBefore, ageAfter)
	}

	resume()
	var again kafkaqueue.Backlog
	eventually(ctx, t, "Backlog answers once the broker does", func() bool {
		again, err = mon.Backlog(ctx)
		return err == nil
	})
	if again.Total != 3 || !again.Oldest.Equal(kept.Oldest) {
		t.Fatalf("Backlog after the hang: %+v, want %+v", again, kept)
	}
}
