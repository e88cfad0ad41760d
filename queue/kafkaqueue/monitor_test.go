package kafkaqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// TestMonitor pings a topic and follows a group's lag while it consumes: the lag is every
// message while the group never committed, shrinks by exactly what a commit covers, and is
// zero once everything is committed. A missing topic is NotFound for both.
func TestMonitor(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		cluster := newFake(t)
		topic := uniqueName("monitor")
		if err := cluster.CreateTopic(topic, 3, nil); err != nil {
			t.Fatal(err)
		}
		testMonitor(t, cluster.ListenAddrs(), topic, 200*time.Millisecond)
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
		topic := uniqueName("monitor")
		adm := admin(t, brokers)
		createTopic(t.Context(), t, adm, topic, 3)
		testMonitor(t, brokers, topic, 0)
	})
}

func testMonitor(t *testing.T, brokers []string, topic string, fetchMaxWait time.Duration) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	group := uniqueName("monitor")
	t.Cleanup(func() { admin(t, brokers).DeleteGroups(context.Background(), group) })
	cfg := kafkaqueue.Config{Brokers: brokers, Topic: topic, Group: group, FetchMaxWait: fetchMaxWait}
	mon, err := kafkaqueue.NewMonitor(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if err := mon.Ping(ctx); err != nil {
		t.Fatalf("Ping of an existing topic: %v", err)
	}
	lag, err := mon.Lag(ctx)
	if err != nil || lag.Total != 0 || len(lag.Partitions) != 3 {
		t.Fatalf("Lag of an empty topic: %+v, %v; want 0 on each of 3 partitions", lag, err)
	}

	p, err := kafkaqueue.NewPublisher(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 60
	msgs := make([]queue.Message, n)
	for i := range msgs {
		msgs[i] = queue.Message{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}
	}
	if err := p.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	lag, err = mon.Lag(ctx)
	if err != nil || lag.Total != n {
		t.Fatalf("Lag before the group committed anything: %+v, %v; want %d", lag, err, n)
	}

	c, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	byPartition := map[int32][]queue.Message{}
	for got := 0; got < n; {
		ms, err := c.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			byPartition[m.Partition] = append(byPartition[m.Partition], m)
		}
		got += len(ms)
	}
	sum := int64(0)
	for part, ms := range byPartition {
		if lag.Partitions[part] != int64(len(ms)) {
			t.Fatalf("partition %d: lag %d before any commit, but it holds %d messages", part, lag.Partitions[part], len(ms))
		}
		sum += lag.Partitions[part]
	}
	if sum != lag.Total {
		t.Fatalf("Total %d is not the sum of the partitions' lags, %d", lag.Total, sum)
	}

	// Commit a prefix of one partition: the lag shrinks by exactly that much.
	var part int32 = -1
	for p, ms := range byPartition {
		if len(ms) >= 2 {
			part = p
			break
		}
	}
	if part < 0 {
		t.Fatal("no partition got two messages; the keys do not spread")
	}
	half := byPartition[part][:len(byPartition[part])/2]
	c.Finish(half...)
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	lag, err = mon.Lag(ctx)
	if err != nil || lag.Total != n-int64(len(half)) || lag.Partitions[part] != int64(len(byPartition[part])-len(half)) {
		t.Fatalf("Lag after committing %d messages of partition %d: %+v, %v", len(half), part, lag, err)
	}
	for _, ms := range byPartition {
		c.Finish(ms...)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if lag, err = mon.Lag(ctx); err != nil || lag.Total != 0 {
		t.Fatalf("Lag after committing everything: %+v, %v; want 0", lag, err)
	}

	missing := cfg
	missing.Topic = uniqueName("absent")
	gone, err := kafkaqueue.NewMonitor(missing, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if err := gone.Ping(ctx); queue.KindOf(err) != queue.NotFound || !strings.Contains(err.Error(), missing.Topic) {
		t.Fatalf("Ping of a missing topic: %v, want NotFound naming it", err)
	}
	if _, err := gone.Lag(ctx); queue.KindOf(err) != queue.NotFound {
		t.Fatalf("Lag of a missing topic: %v, want NotFound", err)
	}
}

func TestMonitorErrors(t *testing.T) {
	if _, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Topic: "t"}, nil); queue.KindOf(err) != queue.Invalid {
		t.Fatalf("NewMonitor without brokers: %v, want Invalid", err)
	}

	cluster := newFake(t)
	cluster.CreateTopic("t", 1, nil)
	mon, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if _, err := mon.Lag(t.Context()); queue.KindOf(err) != queue.Invalid || !strings.Contains(err.Error(), "group") {
		t.Fatalf("Lag without a group: %v, want Invalid", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := mon.Ping(ctx); err != context.Canceled {
		t.Fatalf("Ping with a canceled context: %v, want it bare", err)
	}

	refused, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: []string{closedPort(t)}, Topic: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := refused.Ping(ctx); queue.KindOf(err) != queue.Unavailable || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Ping of a closed port: %v, want Unavailable saying the connection was refused", err)
	}

	// A listener that never answers: the deadline passes while the client waits, and for a
	// probe that is Unavailable, not a bare context error.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	hanging, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: []string{silent.Addr().String()}, Topic: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hanging.Close()
	ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if err := hanging.Ping(ctx); queue.KindOf(err) != queue.Unavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ping of a broker that never answers: %v, want Unavailable wrapping the deadline", err)
	}
}

func TestMonitorSASL(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "app", secret),
		kfake.User("SCRAM-SHA-512", "nobody", secret))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cluster.CreateTopic("t", 1, nil)
	cfg := kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "t", Group: "g",
		SASL: &kafkaqueue.SASL{Mechanism: "SCRAM-SHA-512", Username: "nobody", Password: secret}}
	mon, err := kafkaqueue.NewMonitor(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := mon.Ping(ctx); queue.KindOf(err) != queue.Denied || strings.Contains(err.Error(), secret) {
		t.Fatalf("Ping as a user allowed nothing: %v, want Denied without the password", err)
	}
	if _, err := mon.Lag(ctx); queue.KindOf(err) != queue.Denied {
		t.Fatalf("Lag as a user allowed nothing: %v, want Denied", err)
	}

	cfg.SASL = &kafkaqueue.SASL{Mechanism: "SCRAM-SHA-256", Username: "app", Password: secret}
	ok, err := kafkaqueue.NewMonitor(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	if err := ok.Ping(ctx); err != nil {
		t.Fatalf("Ping with the right credentials: %v", err)
	}
}

// TestSessionTimeoutReachesTheGroup checks that the consumer asks the group coordinator for
// the configured session timeout (franz-go's 45s when unset): the timeout after which a
// killed member's partitions move to the others.
func TestSessionTimeoutReachesTheGroup(t *testing.T) {
	for _, tc := range []struct {
		set  time.Duration
		want int32
	}{{0, 45000}, {7 * time.Second, 7000}} {
		t.Run(fmt.Sprint(tc.set), func(t *testing.T) {
			cluster := newFake(t)
			cluster.CreateTopic("t", 1, nil)
			var (
				mu   sync.Mutex
				seen []int32
			)
			joined := make(chan struct{}, 1)
			cluster.ControlKey(kmsg.JoinGroup.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				cluster.KeepControl()
				mu.Lock()
				seen = append(seen, req.(*kmsg.JoinGroupRequest).SessionTimeoutMillis)
				mu.Unlock()
				select {
				case joined <- struct{}{}:
				default:
				}
				return nil, nil, false
			})
			c, err := kafkaqueue.NewConsumer(t.Context(), kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "t", Group: "g",
				SessionTimeout: tc.set, FetchMaxWait: 100 * time.Millisecond}, nil)

			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Fetch joins the group; the topic is empty, so it waits until the first JoinGroup
			// request was seen (the minute only bounds a consumer that never joins).
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			go func() {
				select {
				case <-joined:
				case <-ctx.Done():
				}
				cancel()
			}()
			_, _ = c.Fetch(ctx)
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatal("the consumer never joined the group")
			}
			for _, ms := range seen {
				if ms != tc.want {
					t.Fatalf("JoinGroup asked for a %dms session, want %d", ms, tc.want)
				}
			}
		})
	}
	if _, err := kafkaqueue.NewConsumer(t.Context(), kafkaqueue.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", SessionTimeout: -time.Second}, nil); queue.KindOf(err) != queue.Invalid {
		t.Fatalf("negative SessionTimeout: %v, want Invalid", err)
	}
}

// A session timeout the broker does not allow (below group.min.session.timeout.ms, 6s by
// default) fails Fetch with Invalid instead of leaving a consumer that never gets a partition.
func TestSessionTimeoutOutOfBrokerRangeIsInvalid(t *testing.T) {
	brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
	topic := uniqueName("session")
	createTopic(t.Context(), t, admin(t, brokers), topic, 1)
	group := uniqueName("session")
	t.Cleanup(func() { admin(t, brokers).DeleteGroups(context.Background(), group) })
	c, err := kafkaqueue.NewConsumer(t.Context(), kafkaqueue.Config{Brokers: brokers, Topic: topic, Group: group, SessionTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := c.Fetch(ctx); queue.KindOf(err) != queue.Invalid {
		t.Fatalf("Fetch with a 1s session: %v, want Invalid", err)
	}
}

// A monitor of several topics (listed, or matched by a pattern as they appear) sums their lag;
// Head and Position grow, and Position reaches Head once the group committed everything.
func TestMonitorTopics(t *testing.T) {
	cluster := newFake(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, b := uniqueName("mon-multi-a"), uniqueName("mon-multi-b")
	for _, topic := range []string{a, b} {
		if err := cluster.CreateTopic(topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	group := uniqueName("monitor")
	publish := func(topic string, n int) {
		p, err := kafkaqueue.NewPublisher(ctx, kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: topic}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		msgs := make([]queue.Message, n)
		for i := range msgs {
			msgs[i] = queue.Message{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}
		}
		if err := p.Publish(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	published := time.Now().Truncate(time.Millisecond)
	publish(a, 10)
	time.Sleep(2 * time.Millisecond)
	between := time.Now().Truncate(time.Millisecond)
	time.Sleep(2 * time.Millisecond)
	publish(b, 5)
	listed, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topics: []string{a, b}, Group: group}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer listed.Close()
	pattern, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: cluster.ListenAddrs(), TopicPattern: `mon-multi-.*`, Group: group}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pattern.Close()
	for _, m := range []*kafkaqueue.Monitor{listed, pattern} {
		if err := m.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		lag, err := m.Lag(ctx)
		if err != nil || lag.Total != 15 || lag.Head != 15 || lag.Position != 0 || len(lag.Topics) != 2 || lag.Partitions != nil {
			t.Fatalf("lag %+v, %v; want 15 over two topics", lag, err)
		}
		// The oldest message of both topics is the first one published, on topic a.
		if b, err := m.Backlog(ctx); err != nil || b.Total != 15 || b.Oldest.Before(published) || !b.Oldest.Before(between) {
			t.Fatalf("backlog %+v, %v; want 15 and the oldest message in [%s, %s)", b, err, published, between)
		}
	}
	c, err := kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topics: []string{a, b}, Group: group}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for got := 0; got < 15; {
		msgs, err := c.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Finish(msgs...)
		got += len(msgs)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	lag, err := listed.Lag(ctx)
	if err != nil || lag.Total != 0 || lag.Head != 15 || lag.Position != 15 {
		t.Fatalf("lag after committing everything: %+v, %v", lag, err)
	}
	if b, err := pattern.Backlog(ctx); err != nil || b.Total != 0 || !b.Oldest.IsZero() {
		t.Fatalf("backlog after committing everything: %+v, %v", b, err)
	}
	// The group cannot be deleted while it has a member; then it can, once.
	if _, err := listed.DeleteGroup(ctx); !errors.Is(err, kafkaqueue.ErrGroupInUse) {
		t.Fatalf("DeleteGroup of a group with a member: %v", err)
	}
	c.Close()
	if deleted, err := listed.DeleteGroup(ctx); err != nil || !deleted {
		t.Fatalf("DeleteGroup: %v, %v", deleted, err)
	}
	if deleted, err := listed.DeleteGroup(ctx); err != nil || deleted {
		t.Fatalf("DeleteGroup of a group that is gone: %v, %v", deleted, err)
	}
	missing, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topics: []string{a, "absent-topic"}, Group: group}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer missing.Close()
	if err := missing.Ping(ctx); queue.KindOf(err) != queue.NotFound || !strings.Contains(err.Error(), "absent-topic") {
		t.Fatalf("Ping with a missing topic: %v", err)
	}
}
