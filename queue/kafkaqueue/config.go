package kafkaqueue

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tributary-dev/tributary/queue"
)

// Config configures one Publisher or Consumer. Each store configures its own, so stores can
// use separate clusters, topics and groups.
type Config struct {
	// Brokers are the seed brokers, as host:port. Required.
	Brokers []string
	// Topic is the topic published to or consumed. Required.
	Topic string
	// Group is the consumer group. Required by NewConsumer; NewPublisher ignores it.
	Group string
	// ClientID names the client in broker logs and quotas. Default "tributary".
	ClientID string

	// TLS, when set, encrypts connections. Default: plaintext.
	TLS *TLS
	// SASL, when set, authenticates connections. Default: none.
	SASL *SASL

	// DialTimeout bounds opening one connection. Default 10s (franz-go's).
	DialTimeout time.Duration
	// RequestTimeout bounds how long a metadata, admin or group request, including the
	// topic check at construction, is retried before it fails. Default 30s.
	RequestTimeout time.Duration
	// DeliveryTimeout bounds every Publish call, whatever the brokers do (down, hung,
	// unreachable). A message not sent by about DeliveryTimeout less a slack (a fifth of it, at
	// most 1s) is failed and reported not written (Unavailable); a message still unanswered
	// when DeliveryTimeout has passed is reported OutcomeUnknown: it may have been sent, and
	// then the idempotent producer keeps it until the broker answers, so it may still be
	// written, in its order. It also sets the producer's hung-connection detection: the
	// broker's produce timeout and franz-go's request timeout overhead are half of it each (at
	// most 10s, the overhead at least 1s), so a broker that stops answering costs the producer
	// its connection after about DeliveryTimeout. Default 30s.
	DeliveryTimeout time.Duration

	// CreateTopic, when set, creates the topic at construction if it does not exist. Default:
	// the topic is only checked, and a missing one fails construction with queue.NotFound.
	CreateTopic *TopicSpec

	// MaxFetch bounds the messages one Fetch returns. Default 1000.
	MaxFetch int
	// FetchMaxWait is how long a broker holds a fetch open waiting for new messages.
	// Default 5s (franz-go's). Fetch itself waits until ctx ends; this only bounds one
	// round trip, so a shorter value costs idle requests, not correctness.
	FetchMaxWait time.Duration
	// SessionTimeout is how long the group waits for a silent member (a killed process)
	// before it hands that member's partitions to the others: until then they are
	// consumed by nobody. Default 45s (franz-go's). The broker only accepts values within
	// its group.min.session.timeout.ms and group.max.session.timeout.ms (Kafka's defaults:
	// 6s and 30m); a value outside them makes Fetch fail with queue.Invalid. Heartbeats go
	// out every third of it, at most every 3s (franz-go's default interval).
	SessionTimeout time.Duration
}

// Options are what a publisher, consumer or monitor takes besides its Config: what a program
// injects rather than declares. nil means every default.
type Options struct {
	// Logger receives franz-go's log lines at Info and above, and the consumer's warnings.
	// Default: none. Those lines name brokers, topics, groups and partitions, never message
	// contents or credentials.
	Logger *slog.Logger
}

func (o *Options) logger() *slog.Logger {
	if o == nil {
		return nil
	}
	return o.Logger
}

// TLS configures encrypted connections.
type TLS struct {
	// CAFile is a PEM file of the certificate authorities to trust. Default: the system pool.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for brokers that
	// authenticate clients by certificate. Both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name verified in the broker certificates. Default: the host
	// of each broker address.
	ServerName string
	// InsecureSkipVerify accepts any broker certificate. For tests only: it gives up the
	// protection TLS exists for.
	InsecureSkipVerify bool
}

// SASL configures authentication.
type SASL struct {
	// Mechanism is "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512".
	Mechanism string
	// Username and Password are the credentials. Neither ever appears in an error or a log.
	Username, Password string
}

// TopicSpec is how CreateTopic creates a missing topic.
type TopicSpec struct {
	// Partitions is the partition count. Required, at least 1.
	Partitions int32
	// ReplicationFactor is the replica count per partition. Default: the broker's
	// default.replication.factor.
	ReplicationFactor int16
}

const (
	defaultClientID          = "tributary"
	defaultHeartbeatInterval = 3 * time.Second // franz-go's
	defaultRequestTimeout    = 30 * time.Second
	defaultDeliveryTimeout   = 30 * time.Second
	defaultMaxFetch          = 1000
)

// validate checks cfg and returns every problem at once as a queue.Invalid error.
func (cfg *Config) validate(needGroup bool) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(cfg.Brokers) == 0 {
		add("no brokers")
	}
	for _, b := range cfg.Brokers {
		if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
			add("broker %q is not host:port", b)
		}
	}
	if err := validTopicName(cfg.Topic); err != nil {
		errs = append(errs, err)
	}
	if needGroup && cfg.Group == "" {
		add("no consumer group")
	}
	if cfg.DialTimeout < 0 || cfg.RequestTimeout < 0 || cfg.DeliveryTimeout < 0 || cfg.FetchMaxWait < 0 || cfg.SessionTimeout < 0 {
		add("negative timeout")
	}
	if cfg.MaxFetch < 0 {
		add("negative MaxFetch")
	}
	if t := cfg.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		add("TLS CertFile and KeyFile must be set together")
	}
	if s := cfg.SASL; s != nil {
		switch strings.ToUpper(s.Mechanism) {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			add("SASL mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
		}
		if s.Username == "" || s.Password == "" {
			add("SASL needs a username and a password")
		}
	}
	if c := cfg.CreateTopic; c != nil {
		if c.Partitions < 1 {
			add("CreateTopic needs at least one partition")
		}
		if c.ReplicationFactor < 0 {
			add("negative CreateTopic replication factor")
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &queue.Error{Kind: queue.Invalid, Queue: cfg.Topic, Err: fmt.Errorf("invalid configuration: %w", errors.Join(errs...))}
}

// validTopicName applies Kafka's rules, so a bad name fails here with a clear message rather
// than at the broker.
func validTopicName(name string) error {
	if name == "" {
		return errors.New("no topic")
	}
	if len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("topic name %q is not allowed by Kafka", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q has characters other than ASCII letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// clientOptions returns the options every client of cfg shares.
func (cfg *Config) clientOptions(log *slog.Logger) ([]kgo.Opt, error) {
	clientID := cfg.ClientID
	if clientID == "" {
		clientID = defaultClientID
	}
	requestTimeout := cfg.RequestTimeout
	if requestTimeout == 0 {
		requestTimeout = defaultRequestTimeout
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(clientID),
		kgo.RetryTimeout(requestTimeout),
	}
	if cfg.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(cfg.DialTimeout))
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.config()
		if err != nil {
			return nil, &queue.Error{Kind: queue.Invalid, Queue: cfg.Topic, Err: err}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if s := cfg.SASL; s != nil {
		switch strings.ToUpper(s.Mechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
		}
	}
	if log != nil {
		opts = append(opts, kgo.WithLogger(slogLogger{log}))
	}
	return opts, nil
}

// config builds the tls.Config. File errors name the file, never its contents.
func (t *TLS) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// LoadX509KeyPair's errors describe the PEM blocks, never the key material.
			return nil, fmt.Errorf("TLS client certificate %s / key %s: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
