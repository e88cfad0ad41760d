package kafkaqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/queue/queuetest"
)

const suitePartitions = 4

func TestConformance(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		cluster := newFake(t)
		// kfake answers the first fetch of a group resuming at a committed offset only when
		// FetchMaxWait runs out; a short wait keeps the suite quick.
		queuetest.Run(t, harness(cluster.ListenAddrs(), 200*time.Millisecond, func(ctx context.Context, t *testing.T, topic string) {
			if err := cluster.CreateTopic(topic, suitePartitions, nil); err != nil {
				t.Fatal(err)
			}
		}, nil))
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
		adm := admin(t, brokers)
		queuetest.Run(t, harness(brokers, 0, func(ctx context.Context, t *testing.T, topic string) {
			createTopic(ctx, t, adm, topic, suitePartitions)
		}, func(groups []string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm.DeleteGroups(ctx, groups...)
		}))
	})
}

// harness builds a queuetest.Harness over brokers: create makes each behaviour's topic, and
// forget (if set) removes the groups a behaviour used once it is over.
func harness(brokers []string, fetchMaxWait time.Duration, create func(context.Context, *testing.T, string), forget func([]string)) queuetest.Harness {
	return queuetest.Harness{
		NewTopic: func(ctx context.Context, t *testing.T) string {
			topic := uniqueName("queuetest")
			create(ctx, t, topic)
			return topic
		},
		NewPublisher: func(ctx context.Context, t *testing.T, topic string) queue.Publisher {
			p, err := kafkaqueue.NewPublisher(ctx, kafkaqueue.Config{Brokers: brokers, Topic: topic}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		NewConsumer: func(ctx context.Context, t *testing.T, topic, group string) queue.Consumer {
			c, err := kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: brokers, Topic: topic, Group: group, MaxFetch: 200, FetchMaxWait: fetchMaxWait}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if forget != nil {
				rememberGroup(t, group, forget)
			}
			return c
		},
	}
}

var (
	groupsMu   sync.Mutex
	groupsSeen = map[*testing.T]map[string]bool{}
)

// rememberGroup arranges for group to be deleted when t ends (after its consumers closed:
// cleanups run last-registered first, and this one is registered before the suite's Close).
func rememberGroup(t *testing.T, group string, forget func([]string)) {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	seen := groupsSeen[t]
	if seen == nil {
		seen = map[string]bool{}
		groupsSeen[t] = seen
		t.Cleanup(func() {
			groupsMu.Lock()
			var names []string
			for g := range groupsSeen[t] {
				names = append(names, g)
			}
			delete(groupsSeen, t)
			groupsMu.Unlock()
			forget(names)
		})
	}
	seen[group] = true
}

func uniqueName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func newFake(t testing.TB) *kfake.Cluster {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster
}

func admin(t testing.TB, brokers []string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates topic on a real broker and deletes it when t ends.
func createTopic(ctx context.Context, t testing.TB, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	// The broker on the test server sometimes answers UNKNOWN_TOPIC_OR_PARTITION for about
	// five seconds after creating a topic while other topics are being deleted; wait it out
	// so a check-only kafkaqueue sees the topic.
	for deadline := time.Now().Add(30 * time.Second); ; {
		d, err := adm.ListTopics(ctx, topic)
		if err == nil && d[topic].Err == nil && len(d[topic].Partitions) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not visible after creation: %v %v", topic, err, d[topic].Err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopics(ctx, topic); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
}
