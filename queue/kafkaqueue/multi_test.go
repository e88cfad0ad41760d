package kafkaqueue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// multiTimeout bounds each multi-topic scenario. It is a failure timeout only: every wait
// below ends as soon as what it waits for happened.
const multiTimeout = 3 * time.Minute

// tp names one partition of one topic in the tests.
type tp struct {
	topic     string
	partition int32
}

func (p tp) String() string { return p.topic + "/" + strconv.Itoa(int(p.partition)) }

// multiEnv is one broker setup for the multi-topic tests: kfake or the real Kafka.
type multiEnv struct {
	brokers      []string
	fetchMaxWait time.Duration
	metadataAge  time.Duration
	// create makes a topic (deleted when t ends, on the real Kafka).
	create func(ctx context.Context, t *testing.T, topic string, partitions int32)
	// real is set for the real Kafka, where topic names start with kq-multi-.
	real bool
}

// multiEnvs runs fn on kfake and, when the test environment names one, on the real Kafka.
func multiEnvs(t *testing.T, fn func(t *testing.T, env multiEnv)) {
	t.Run("kfake", func(t *testing.T) {
		cluster := newFake(t)
		fn(t, multiEnv{
			brokers: cluster.ListenAddrs(),
			// kfake answers the first fetch of a group resuming at a committed offset only
			// when FetchMaxWait runs out.
			fetchMaxWait: 200 * time.Millisecond,
			metadataAge:  time.Second,
			create: func(_ context.Context, t *testing.T, topic string, partitions int32) {
				if err := cluster.CreateTopic(topic, partitions, nil); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
		adm := admin(t, brokers)
		fn(t, multiEnv{
			brokers:     brokers,
			metadataAge: 2 * time.Second,
			create: func(ctx context.Context, t *testing.T, topic string, partitions int32) {
				createTopic(ctx, t, adm, topic, partitions)
			},
			real: true,
		})
	})
}

// forgetGroup deletes group from the broker when t ends (after the consumers closed, which
// the tests do with defer).
func forgetGroup(t *testing.T, brokers []string, group string) {
	adm := admin(t, brokers)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm.DeleteGroups(ctx, group)
	})
}

// publish writes one message per value to topic, keyed so that they spread over the
// topic's partitions; value i of a topic is its i-th message, so per partition the values
// ascend in publish order.
func publish(ctx context.Context, t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	p, err := kafkaqueue.NewPublisher(ctx, kafkaqueue.Config{Brokers: brokers, Topic: topic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	msgs := make([]queue.Message, n)
	for i := range msgs {
		msgs[i] = queue.Message{Key: fmt.Appendf(nil, "k%d", i%20), Value: []byte(strconv.Itoa(i))}
	}
	if err := p.Publish(ctx, msgs); err != nil {
		t.Fatalf("publish to %s: %v", topic, err)
	}
}

// fetchN fetches until n messages arrived, grouping them per topic-partition and checking
// that each partition's messages come in order.
func fetchN(ctx context.Context, t *testing.T, c *kafkaqueue.Consumer, n int) map[tp][]queue.Message {
	t.Helper()
	got := map[tp][]queue.Message{}
	for seen := 0; seen < n; {
		msgs, err := c.Fetch(ctx)
		if err != nil {
			t.Fatalf("Fetch after %d of %d messages: %v", seen, n, err)
		}
		for _, m := range msgs {
			k := tp{m.Topic, m.Partition}
			got[k] = append(got[k], m)
		}
		seen += len(msgs)
	}
	for k, ms := range got {
		checkOrder(t, k, ms)
	}
	return got
}

// checkOrder fails unless ms, one partition's messages, ascend by offset and by value.
func checkOrder(t *testing.T, k tp, ms []queue.Message) {
	t.Helper()
	for i := 1; i < len(ms); i++ {
		a, _ := strconv.Atoi(string(ms[i-1].Value))
		b, _ := strconv.Atoi(string(ms[i].Value))
		if ms[i].Offset <= ms[i-1].Offset || b <= a {
			t.Fatalf("%s out of order: offset %d (value %d) after offset %d (value %d)", k, ms[i].Offset, b, ms[i-1].Offset, a)
		}
	}
}

// committed returns the group's committed offset of every partition of topics (-1: none).
func committed(ctx context.Context, t *testing.T, brokers []string, group string, parts []tp) map[tp]int64 {
	t.Helper()
	offsets, err := admin(t, brokers).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch the group's offsets: %v", err)
	}
	out := map[tp]int64{}
	for _, k := range parts {
		out[k] = -1
		if o, ok := offsets.Lookup(k.topic, k.partition); ok {
			out[k] = o.At
		}
	}
	return out
}

func TestMultiTopicConfigValidation(t *testing.T) {
	base := kafkaqueue.Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g"}
	cases := []struct {
		name   string
		edit   func(*kafkaqueue.Config)
		expect string // a fragment the error must contain
		queue  string // the error's Queue
	}{
		{"no topic at all", func(c *kafkaqueue.Config) {}, "no topic (set one of Topic, Topics and TopicPattern)", ""},
		{"Topic and Topics", func(c *kafkaqueue.Config) { c.Topic, c.Topics = "a", []string{"b", "c"} },
			"set only one of Topic, Topics and TopicPattern", "a"},
		{"Topics and TopicPattern", func(c *kafkaqueue.Config) { c.Topics, c.TopicPattern = []string{"b", "c"}, "d.*" },
			"set only one of Topic, Topics and TopicPattern", "b,c"},
		{"bad name in Topics", func(c *kafkaqueue.Config) { c.Topics = []string{"shop.public.orders", "a/b"} },
			`Topics: topic name "a/b" has characters`, "shop.public.orders,a/b"},
		{"empty name in Topics", func(c *kafkaqueue.Config) { c.Topics = []string{"a", ""} }, "Topics: no topic", "a,"},
		{"topic listed twice", func(c *kafkaqueue.Config) { c.Topics = []string{"a", "b", "a"} }, `topic "a" is listed twice`, "a,b,a"},
		{"bad pattern", func(c *kafkaqueue.Config) { c.TopicPattern = `shop\.(orders` },
			`TopicPattern "shop\\.(orders" is not a valid Go regular expression: missing closing )`, `shop\.(orders`},
		{"pattern only the anchoring would balance", func(c *kafkaqueue.Config) { c.TopicPattern = `a)|(b` },
			"not a valid Go regular expression: unexpected )", `a)|(b`},
		{"CreateTopic with TopicPattern", func(c *kafkaqueue.Config) {
			c.TopicPattern, c.CreateTopic = "shop\\..*", &kafkaqueue.TopicSpec{Partitions: 1}
		}, "CreateTopic cannot be used with TopicPattern", "shop\\..*"},
		{"MetadataMaxAge over an hour", func(c *kafkaqueue.Config) { c.Topic, c.MetadataMaxAge = "a", 2*time.Hour },
			"MetadataMaxAge 2h0m0s is not between 10ms and 1h0m0s", "a"},
		{"MetadataMaxAge under 10ms", func(c *kafkaqueue.Config) { c.Topic, c.MetadataMaxAge = "a", time.Millisecond },
			"MetadataMaxAge 1ms is not between", "a"},
		{"negative MetadataMaxAge", func(c *kafkaqueue.Config) { c.Topic, c.MetadataMaxAge = "a", -time.Second }, "negative timeout", "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			_, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil)
			qe, ok := errors.AsType[*queue.Error](err)
			if !ok || qe.Kind != queue.Invalid || !strings.Contains(err.Error(), tc.expect) {
				t.Fatalf("NewConsumer: %v; want Invalid mentioning %q", err, tc.expect)
			}
			if qe.Queue != tc.queue {
				t.Fatalf("the error names queue %q, want %q", qe.Queue, tc.queue)
			}
		})
	}

	// Publishers serve one Topic and say so; a monitor watches several, but one of the three.
	for _, edit := range []func(*kafkaqueue.Config){
		func(c *kafkaqueue.Config) { c.Topics = []string{"a", "b"} },
		func(c *kafkaqueue.Config) { c.TopicPattern = "a.*" },
		func(c *kafkaqueue.Config) { c.Topic, c.Topics = "a", []string{"b"} },
	} {
		cfg := base
		edit(&cfg)
		_, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil)
		if queue.KindOf(err) != queue.Invalid || !strings.Contains(fmt.Sprint(err), "a publisher writes one Topic") {
			t.Fatalf("NewPublisher with %+v: %v; want Invalid saying a publisher writes one Topic", cfg, err)
		}
		m, err := kafkaqueue.NewMonitor(cfg, nil)
		if cfg.Topic != "" {
			if queue.KindOf(err) != queue.Invalid || !strings.Contains(fmt.Sprint(err), "set only one of Topic, Topics and TopicPattern") {
				t.Fatalf("NewMonitor with %+v: %v; want Invalid saying only one", cfg, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("NewMonitor with %+v: %v", cfg, err)
		}
		m.Close()
	}

	// A pattern is checked against nothing at construction: the consumer is built without
	// asking the (here unreachable) brokers anything.
	cfg := kafkaqueue.Config{Brokers: []string{closedPort(t)}, Group: "g", TopicPattern: `shop\.public\..*`, RequestTimeout: time.Second}
	c, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("NewConsumer with a TopicPattern and no broker: %v", err)
	}
	c.Close()
}

// Several topics are checked (or created) together, and a missing one is named.
func TestMultiTopicMissingTopic(t *testing.T) {
	cluster := newFake(t)
	if err := cluster.CreateTopic("present", 2, nil); err != nil {
		t.Fatal(err)
	}
	cfg := kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topics: []string{"present", "absent"}, Group: "g"}
	_, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil)
	qe, ok := errors.AsType[*queue.Error](err)
	if !ok || qe.Kind != queue.NotFound || qe.Queue != "present,absent" || !strings.Contains(err.Error(), "topic absent: topic does not exist") {
		t.Fatalf("NewConsumer with a missing topic: %v; want NotFound on queue present,absent naming absent", err)
	}
	if cluster.TopicInfo("absent") != nil {
		t.Fatal("a check-only configuration created the topic")
	}
	cfg.Topics = []string{"present", "absent", "absent-too"}
	cfg.CreateTopic = &kafkaqueue.TopicSpec{Partitions: 3}
	c, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("NewConsumer with CreateTopic: %v", err)
	}
	c.Close()
	for topic, want := range map[string]int{"present": 2, "absent": 3, "absent-too": 3} {
		if n := len(cluster.PartitionInfos(topic)); n != want {
			t.Fatalf("topic %s has %d partitions, want %d", topic, n, want)
		}
	}
}

// One member consumes two topics; Commit commits each topic-partition's finished prefix
// (and nothing past a gap), Finish ignores messages of topics it does not consume, and a
// new member resumes every topic-partition at its first unfinished message.
func TestMultiTopicCommitsPerTopicPartition(t *testing.T) {
	multiEnvs(t, func(t *testing.T, env multiEnv) {
		ctx, cancel := context.WithTimeout(t.Context(), multiTimeout)
		defer cancel()
		base := uniqueName("kq-multi")
		topics := []string{base + "-orders", base + "-items"}
		for _, topic := range topics {
			env.create(ctx, t, topic, 2)
		}
		const perTopic = 40
		for _, topic := range topics {
			publish(ctx, t, env.brokers, topic, perTopic)
		}
		group := uniqueName("kq-multi")
		forgetGroup(t, env.brokers, group)
		cfg := kafkaqueue.Config{Brokers: env.brokers, Topics: topics, Group: group, FetchMaxWait: env.fetchMaxWait}

		first, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		got := fetchN(ctx, t, first, 2*perTopic)
		if len(got) != 4 {
			t.Fatalf("messages came from %d topic-partitions, want 4: %v", len(got), slices.Collect(maps.Keys(got)))
		}
		// Per topic-partition: finish a prefix of a different length each, leave one
		// unfinished, finish the one after it.
		resumeAt := map[tp]int64{}
		i := 0
		for _, k := range slices.SortedFunc(maps.Keys(got), func(a, b tp) int { return strings.Compare(a.String(), b.String()) }) {
			ms := got[k]
			if len(ms) < 6 {
				t.Fatalf("%s got only %d messages; the keys do not spread", k, len(ms))
			}
			cut := 1 + i%3
			i++
			first.Finish(ms[:cut]...)
			first.Finish(ms[cut+1])
			resumeAt[k] = ms[cut].Offset
		}
		// Messages of a topic the consumer does not read, and of a partition it does not
		// have, change nothing.
		first.Finish(queue.Message{Topic: base + "-elsewhere", Partition: 0, Offset: 0},
			queue.Message{Topic: topics[0], Partition: 7, Offset: 0})
		if err := first.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		parts := slices.Collect(maps.Keys(got))
		for k, at := range committed(ctx, t, env.brokers, group, append(parts, tp{base + "-elsewhere", 0}, tp{topics[0], 7})) {
			want, ok := resumeAt[k]
			if !ok {
				want = -1
			}
			if at != want {
				t.Fatalf("%s committed at %d, want %d", k, at, want)
			}
		}
		// Close commits nothing; a new member receives everything from each first
		// unfinished message on, and nothing before it.
		first.Close()
		second, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		want := 0
		for k, ms := range got {
			want += len(ms) - slices.IndexFunc(ms, func(m queue.Message) bool { return m.Offset == resumeAt[k] })
		}
		again := fetchN(ctx, t, second, want)
		for k, ms := range got {
			rest := ms[slices.IndexFunc(ms, func(m queue.Message) bool { return m.Offset == resumeAt[k] }):]
			if !sameOffsets(again[k], rest) {
				t.Fatalf("%s resumed with offsets %v, want %v", k, offsetsOf(again[k]), offsetsOf(rest))
			}
		}
	})
}

func offsetsOf(ms []queue.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Offset
	}
	return out
}

func sameOffsets(a, b []queue.Message) bool { return slices.Equal(offsetsOf(a), offsetsOf(b)) }

// Two members over two topics of two partitions each: the newcomer takes two of the four
// topic-partitions; the revocation commits their finished prefix and nothing beyond it, the
// newcomer resumes each at the first unfinished message and gets every later one in order,
// the old owner's late Finish and Commit on them change nothing, and once both members
// finished what they hold, every message was delivered and every partition committed to
// its end.
func TestMultiTopicRebalance(t *testing.T) {
	multiEnvs(t, func(t *testing.T, env multiEnv) {
		ctx, cancel := context.WithTimeout(t.Context(), multiTimeout)
		defer cancel()
		base := uniqueName("kq-multi")
		topics := []string{base + "-orders", base + "-items"}
		for _, topic := range topics {
			env.create(ctx, t, topic, 2)
		}
		const perTopic = 60
		for _, topic := range topics {
			publish(ctx, t, env.brokers, topic, perTopic)
		}
		group := uniqueName("kq-multi")
		forgetGroup(t, env.brokers, group)
		cfg := kafkaqueue.Config{Brokers: env.brokers, Topics: topics, Group: group, FetchMaxWait: env.fetchMaxWait}

		first, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		all := fetchN(ctx, t, first, 2*perTopic)
		if len(all) != 4 {
			t.Fatalf("messages came from %d topic-partitions, want 4", len(all))
		}
		half := map[tp]int{}
		for k, ms := range all {
			if len(ms) < 4 {
				t.Fatalf("%s got only %d messages; the keys do not spread", k, len(ms))
			}
			h := len(ms) / 2
			first.Finish(ms[:h]...)
			first.Finish(ms[h+1])
			half[k] = h
		}

		second, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		var (
			mu    sync.Mutex
			moved = map[tp][]queue.Message{}
		)
		fetchCtx, stopFetch := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			for {
				got, err := second.Fetch(fetchCtx)
				if err != nil {
					done <- err
					return
				}
				mu.Lock()
				for _, m := range got {
					k := tp{m.Topic, m.Partition}
					moved[k] = append(moved[k], m)
				}
				mu.Unlock()
			}
		}()
		// The sticky balancer splits four partitions two and two; wait until the newcomer
		// holds every remaining message of two of them.
		complete := func() bool {
			mu.Lock()
			defer mu.Unlock()
			if len(moved) < 2 {
				return false
			}
			for k, ms := range moved {
				if len(ms) < len(all[k])-half[k] {
					return false
				}
			}
			return true
		}
		for !complete() {
			select {
			case <-ctx.Done():
				mu.Lock()
				t.Fatalf("the second member never received two moved partitions' messages (got %d partitions): %v", len(moved), ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		stopFetch()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("second member's Fetch: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(moved) != 2 {
			t.Fatalf("%d topic-partitions moved, want 2 of 4", len(moved))
		}
		for k, ms := range moved {
			checkOrder(t, k, ms)
			if rest := all[k][half[k]:]; !sameOffsets(ms, rest) {
				t.Fatalf("%s moved with offsets %v, want %v: from the first unfinished message on", k, offsetsOf(ms), offsetsOf(rest))
			}
		}
		parts := slices.Collect(maps.Keys(all))
		revokeCommits := committed(ctx, t, env.brokers, group, parts)
		for k := range moved {
			if want := all[k][half[k]].Offset; revokeCommits[k] != want {
				t.Fatalf("revoked %s committed at %d, want %d (the finished prefix)", k, revokeCommits[k], want)
			}
		}
		// The old owner's late Finish and Commit of the moved partitions change nothing.
		for k := range moved {
			first.Finish(all[k]...)
		}
		if err := first.Commit(ctx); err != nil {
			t.Fatalf("first member's Commit: %v", err)
		}
		afterLate := committed(ctx, t, env.brokers, group, parts)
		for k := range moved {
			if afterLate[k] != revokeCommits[k] {
				t.Fatalf("the old owner's late commit moved %s from %d to %d", k, revokeCommits[k], afterLate[k])
			}
		}
		// Both finish what they hold: nothing is lost, every partition ends committed.
		delivered := map[string]map[string]bool{}
		note := func(ms []queue.Message) {
			for _, m := range ms {
				if delivered[m.Topic] == nil {
					delivered[m.Topic] = map[string]bool{}
				}
				delivered[m.Topic][string(m.Value)] = true
			}
		}
		for k, ms := range all {
			if _, gone := moved[k]; gone {
				note(ms[:half[k]]) // finished by the first member before the move
				continue
			}
			first.Finish(ms...)
			note(ms)
		}
		for _, ms := range moved {
			second.Finish(ms...)
			note(ms)
		}
		if err := first.Commit(ctx); err != nil {
			t.Fatalf("first member's final Commit: %v", err)
		}
		if err := second.Commit(ctx); err != nil {
			t.Fatalf("second member's Commit: %v", err)
		}
		for _, topic := range topics {
			if n := len(delivered[topic]); n != perTopic {
				t.Fatalf("topic %s: %d of %d messages delivered and finished", topic, n, perTopic)
			}
		}
		for k, at := range committed(ctx, t, env.brokers, group, parts) {
			if want := all[k][len(all[k])-1].Offset + 1; at != want {
				t.Fatalf("%s committed at %d, want its end %d", k, at, want)
			}
		}
	})
}

// A TopicPattern consumer reads the matching topics that exist, and a matching topic
// created after it started from its first message, found at a metadata refresh; it never
// reads a topic that matches only part of its name, nor one whose name starts with "__".
func TestTopicPatternFindsNewTopic(t *testing.T) {
	multiEnvs(t, func(t *testing.T, env multiEnv) {
		ctx, cancel := context.WithTimeout(t.Context(), multiTimeout)
		defer cancel()
		base := uniqueName("kq-multi")
		pattern := `(__)?` + regexp.QuoteMeta(base) + `-[ab]`
		early, later := base+"-a", base+"-b"
		env.create(ctx, t, early, 2)
		publish(ctx, t, env.brokers, early, 10)
		// Created before the consumer starts, so its first metadata load judges them.
		unmatched := []string{base + "-ab"} // would match an unanchored pattern
		if !env.real {
			unmatched = append(unmatched, "__"+base+"-a") // matches, but starts with "__"
		}
		for _, topic := range unmatched {
			env.create(ctx, t, topic, 1)
			publish(ctx, t, env.brokers, topic, 3)
		}
		group := uniqueName("kq-multi")
		forgetGroup(t, env.brokers, group)
		cfg := kafkaqueue.Config{Brokers: env.brokers, TopicPattern: pattern, Group: group,
			FetchMaxWait: env.fetchMaxWait, MetadataMaxAge: env.metadataAge}
		c, err := kafkaqueue.NewConsumer(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := map[string][]queue.Message{}
		fetchUntil := func(topic string, n int) {
			t.Helper()
			for len(got[topic]) < n {
				msgs, err := c.Fetch(ctx)
				if err != nil {
					t.Fatalf("Fetch waiting for %d messages of %s (have %d): %v", n, topic, len(got[topic]), err)
				}
				for _, m := range msgs {
					got[m.Topic] = append(got[m.Topic], m)
				}
			}
		}
		fetchUntil(early, 10)

		// Published before any refresh can have seen the topic: read from its start.
		env.create(ctx, t, later, 2)
		publish(ctx, t, env.brokers, later, 10)
		fetchUntil(later, 10)
		for topic := range got {
			if topic != early && topic != later {
				t.Fatalf("read %d messages of %s, which %q must not match", len(got[topic]), topic, pattern)
			}
		}
		// The subscription the group knows is exactly the two matching topics.
		described, err := admin(t, env.brokers).DescribeGroups(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if subscribed := described.JoinTopics(); !slices.Equal(subscribed, []string{early, later}) {
			t.Fatalf("the member subscribed to %v, want [%s %s]", subscribed, early, later)
		}
		// The topic found later is committed like any other.
		for _, m := range got[later] {
			c.Finish(m)
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		var parts []tp
		ends := map[tp]int64{}
		for _, m := range got[later] {
			k := tp{m.Topic, m.Partition}
			if _, ok := ends[k]; !ok {
				parts = append(parts, k)
			}
			ends[k] = m.Offset + 1
		}
		for k, at := range committed(ctx, t, env.brokers, group, parts) {
			if at != ends[k] {
				t.Fatalf("%s committed at %d, want %d", k, at, ends[k])
			}
		}
	})
}
