package kafkaqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

const secret = "s3cr3t-Pa55word"

func TestConfigValidation(t *testing.T) {
	ok := kafkaqueue.Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Group: "g"}
	cases := []struct {
		name   string
		edit   func(*kafkaqueue.Config)
		expect string // a fragment the error must contain
	}{
		{"no brokers", func(c *kafkaqueue.Config) { c.Brokers = nil }, "no brokers"},
		{"broker without port", func(c *kafkaqueue.Config) { c.Brokers = []string{"localhost"} }, `"localhost" is not host:port`},
		{"no topic", func(c *kafkaqueue.Config) { c.Topic = "" }, "no topic"},
		{"bad topic characters", func(c *kafkaqueue.Config) { c.Topic = "a/b" }, "characters"},
		{"topic too long", func(c *kafkaqueue.Config) { c.Topic = strings.Repeat("x", 250) }, "not allowed"},
		{"no group", func(c *kafkaqueue.Config) { c.Group = "" }, "no consumer group"},
		{"negative timeout", func(c *kafkaqueue.Config) { c.RequestTimeout = -time.Second }, "negative timeout"},
		{"unknown SASL mechanism", func(c *kafkaqueue.Config) {
			c.SASL = &kafkaqueue.SASL{Mechanism: "GSSAPI", Username: "u", Password: secret}
		}, `"GSSAPI"`},
		{"SASL without password", func(c *kafkaqueue.Config) { c.SASL = &kafkaqueue.SASL{Mechanism: "PLAIN", Username: "u"} }, "password"},
		{"cert without key", func(c *kafkaqueue.Config) { c.TLS = &kafkaqueue.TLS{CertFile: "c.pem"} }, "CertFile and KeyFile"},
		{"missing CA file", func(c *kafkaqueue.Config) { c.TLS = &kafkaqueue.TLS{CAFile: filepath.Join(t.TempDir(), "none.pem")} }, "CA file"},
		{"zero partitions", func(c *kafkaqueue.Config) { c.CreateTopic = &kafkaqueue.TopicSpec{} }, "at least one partition"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			_, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil)
			if queue.KindOf(err) != queue.Invalid || !strings.Contains(err.Error(), tc.expect) {
				t.Fatalf("NewConsumer: %v; want Invalid mentioning %q", err, tc.expect)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatal("the error carries the SASL password")
			}
		})
	}
	// Every problem is reported at once, so a configuration is fixed in one round.
	_, err := kafkaqueue.NewConsumer(t.Context(), kafkaqueue.Config{Topic: "a b"}, nil)
	for _, want := range []string{"no brokers", "characters", "no consumer group"} {
		if !strings.Contains(fmt.Sprint(err), want) {
			t.Fatalf("error %v does not mention %q", err, want)
		}
	}
	// A publisher needs no group.
	cfg := ok
	cfg.Group = ""
	cfg.Brokers = []string{"bad"}
	if _, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil); strings.Contains(fmt.Sprint(err), "group") {
		t.Fatalf("NewPublisher asked for a group: %v", err)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestRefusedConnectionIsUnavailable(t *testing.T) {
	cfg := kafkaqueue.Config{Brokers: []string{closedPort(t)}, Topic: "t", Group: "g", RequestTimeout: time.Second, DialTimeout: time.Second}
	_, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil)
	if queue.KindOf(err) != queue.Unavailable || !queue.Retryable(err) {
		t.Fatalf("NewPublisher on a closed port: %v, want Unavailable", err)
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Fatalf("error %q does not say the connection was refused", err)
	}
	if _, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil); queue.KindOf(err) != queue.Unavailable {
		t.Fatalf("NewConsumer on a closed port: %v, want Unavailable", err)
	}
}

func TestMissingTopic(t *testing.T) {
	cluster := newFake(t)
	cfg := kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "absent-topic", Group: "g"}
	_, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil)
	if queue.KindOf(err) != queue.NotFound || !strings.Contains(err.Error(), "absent-topic") {
		t.Fatalf("NewPublisher without CreateTopic: %v, want NotFound naming the topic", err)
	}
	if _, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil); queue.KindOf(err) != queue.NotFound {
		t.Fatalf("NewConsumer without CreateTopic: %v, want NotFound", err)
	}
	if cluster.TopicInfo("absent-topic") != nil {
		t.Fatal("a check-only configuration created the topic")
	}

	cfg.CreateTopic = &kafkaqueue.TopicSpec{Partitions: 3}
	p, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("NewPublisher with CreateTopic: %v", err)
	}
	defer p.Close()
	if n := len(cluster.PartitionInfos("absent-topic")); n != 3 {
		t.Fatalf("created topic has %d partitions, want 3", n)
	}
	// A second construction finds the topic and is fine with it.
	c, err := kafkaqueue.NewConsumer(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("NewConsumer with CreateTopic on an existing topic: %v", err)
	}
	c.Close()
}

func TestPublishToDeletedTopicIsNotFound(t *testing.T) {
	cluster := newFake(t)
	if err := cluster.CreateTopic("doomed", 1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := kafkaqueue.NewPublisher(t.Context(), kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "doomed"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := cluster.DeleteTopic("doomed"); err != nil {
		t.Fatal(err)
	}
	err = p.Publish(t.Context(), []queue.Message{{Key: []byte("k"), Value: []byte("v")}})
	var pe *queue.PublishError
	if !errors.As(err, &pe) || queue.KindOf(pe.Errs[0]) != queue.NotFound || !strings.Contains(err.Error(), "doomed") {
		t.Fatalf("Publish to a deleted topic: %v, want a PublishError with NotFound naming the topic", err)
	}
}

func TestTooLargeMessageIsInvalidAlone(t *testing.T) {
	cluster := newFake(t)
	cluster.CreateTopic("big", 1, nil)
	p, err := kafkaqueue.NewPublisher(t.Context(), kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "big"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	huge := make([]byte, 2<<20) // over franz-go's default 1 MB batch limit
	err = p.Publish(t.Context(), []queue.Message{{Key: []byte("a"), Value: huge}, {Key: []byte("b"), Value: []byte("small")}})
	var pe *queue.PublishError
	if !errors.As(err, &pe) || len(pe.Errs) != 2 {
		t.Fatalf("Publish: %v, want a PublishError for two messages", err)
	}
	if queue.KindOf(pe.Errs[0]) != queue.Invalid || queue.Retryable(pe.Errs[0]) {
		t.Fatalf("too large message: %v, want Invalid", pe.Errs[0])
	}
	if pe.Errs[1] != nil {
		t.Fatalf("the small message failed too: %v", pe.Errs[1])
	}
}

func TestPublishWithCanceledContext(t *testing.T) {
	cluster := newFake(t)
	cluster.CreateTopic("t", 1, nil)
	p, err := kafkaqueue.NewPublisher(t.Context(), kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = p.Publish(ctx, []queue.Message{{Key: []byte("k")}})
	var pe *queue.PublishError
	if !errors.As(err, &pe) || pe.Errs[0] != context.Canceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a canceled context: %v, want a PublishError of context.Canceled", err)
	}
}

func TestSASL(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "app", secret),
		kfake.User("SCRAM-SHA-512", "nobody", secret)) // authenticated, allowed nothing
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cluster.CreateTopic("t", 1, nil)
	cfg := kafkaqueue.Config{Brokers: cluster.ListenAddrs(), Topic: "t", RequestTimeout: 2 * time.Second,
		SASL: &kafkaqueue.SASL{Mechanism: "SCRAM-SHA-256", Username: "app", Password: "wrong-" + secret}}
	// kfake drops the connection on a failed SASL exchange where Kafka answers
	// SASL_AUTHENTICATION_FAILED (TestKindOf covers that mapping), so only the error's
	// contents are checked here.
	_, err = kafkaqueue.NewPublisher(t.Context(), cfg, nil)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("wrong password: %v; want an error without the password", err)
	}

	cfg.SASL = &kafkaqueue.SASL{Mechanism: "scram-sha-512", Username: "nobody", Password: secret}
	_, err = kafkaqueue.NewPublisher(t.Context(), cfg, nil)
	if queue.KindOf(err) != queue.Denied || strings.Contains(err.Error(), secret) {
		t.Fatalf("user without ACLs: %v; want Denied without the password", err)
	}

	cfg.SASL = &kafkaqueue.SASL{Mechanism: "SCRAM-SHA-256", Username: "app", Password: secret}
	p, err := kafkaqueue.NewPublisher(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	defer p.Close()
	if err := p.Publish(t.Context(), []queue.Message{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatalf("Publish over SASL: %v", err)
	}
}
