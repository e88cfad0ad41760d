package kafkaqueue

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"regexp/syntax"
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
	// Topic is the topic published to or consumed. NewPublisher and NewMonitor require it;
	// NewConsumer requires exactly one of Topic, Topics and TopicPattern.
	Topic string
	// Topics are several topics one consumer reads as one group member, such as a Debezium
	// source's topics, one per table. NewConsumer only (NewPublisher and NewMonitor refuse
	// it): its partitions are those of all the topics, each committed on its own, and every
	// topic is checked (or created, see CreateTopic) at construction. Each is a valid topic
	// name, listed once.
	Topics []string
	// TopicPattern, a Go regular expression (regexp syntax), makes the consumer read every
	// topic whose whole name it matches: it is anchored at both ends, so `shop\.public\..*`
	// matches shop.public.orders and not old.shop.public.orders. Topics whose names start
	// with "__" never match (Kafka's internal topics, such as __consumer_offsets, and tools'
	// own, such as Debezium's heartbeats). A topic created later that matches is consumed
	// from its first message once the consumer's next metadata refresh sees it: within about
	// MetadataMaxAge of its creation, plus the rebalance that assigns it. NewConsumer only;
	// nothing is checked or created at construction, so CreateTopic cannot be set with it.
	TopicPattern string
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

	// CreateTopic, when set, creates the topic (each of Topics) at construction if it does not
	// exist. Default: the topics are only checked, and a missing one fails construction with
	// queue.NotFound. Not with TopicPattern.
	CreateTopic *TopicSpec

	// MetadataMaxAge is how often every client of this Config refreshes its view of the
	// cluster (topics, partitions, leaders) when nothing else prompts it, as Kafka's
	// metadata.max.age.ms. With TopicPattern it is how soon a newly created matching topic is
	// seen. Default 5m (franz-go's and Kafka's); between 10ms and 1h. A value under 5s also
	// lowers franz-go's minimum time between two refreshes (MetadataMinAge, 5s) to it.
	MetadataMaxAge time.Duration

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
	// InstanceID makes the consumer a static member of its group (KIP-345): a process that
	// restarts with the same InstanceID within SessionTimeout -- after a crash, a SIGKILL, a
	// deploy -- takes its partitions back at once, without a rebalance and without waiting
	// for its old session to expire. Each live process needs its own (a second member with
	// the same one is fenced: Fetch fails with queue.Invalid). A static member leaving for
	// good keeps its partitions until its session expires. NewConsumer only; default none
	// (a dynamic member).
	InstanceID string
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
	defaultMetadataMinAge    = 5 * time.Second // franz-go's
)

// role is what a Config is validated for.
type role uint8

const (
	forPublisher role = iota
	forConsumer
	forMonitor
)

// validate checks cfg for r and returns every problem at once as a queue.Invalid error.
func (cfg *Config) validate(r role) error {
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
	errs = append(errs, cfg.validateTopics(r)...)
	if r == forConsumer && cfg.Group == "" {
		add("no consumer group")
	}
	if cfg.DialTimeout < 0 || cfg.RequestTimeout < 0 || cfg.DeliveryTimeout < 0 || cfg.FetchMaxWait < 0 || cfg.SessionTimeout < 0 || cfg.MetadataMaxAge < 0 {
		add("negative timeout")
	}
	if a := cfg.MetadataMaxAge; a > 0 && (a < minMetadataMaxAge || a > maxMetadataMaxAge) {
		add("MetadataMaxAge %v is not between %v and %v", a, minMetadataMaxAge, maxMetadataMaxAge)
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
		if r == forConsumer && cfg.TopicPattern != "" {
			add("CreateTopic cannot be used with TopicPattern (nothing is created for a pattern)")
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &queue.Error{Kind: queue.Invalid, Queue: cfg.queueName(), Err: fmt.Errorf("invalid configuration: %w", errors.Join(errs...))}
}

// validateTopics checks Topic, Topics and TopicPattern for r.
func (cfg *Config) validateTopics(r role) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r == forPublisher {
		if len(cfg.Topics) > 0 || cfg.TopicPattern != "" {
			add("Topics and TopicPattern are for NewConsumer and NewMonitor; a publisher writes one Topic")
		}
		if err := validTopicName(cfg.Topic); err != nil {
			errs = append(errs, err)
		}
		return errs
	}
	set := 0
	for _, b := range []bool{cfg.Topic != "", len(cfg.Topics) > 0, cfg.TopicPattern != ""} {
		if b {
			set++
		}
	}
	switch {
	case set == 0:
		add("no topic (set one of Topic, Topics and TopicPattern)")
		return errs
	case set > 1:
		add("set only one of Topic, Topics and TopicPattern")
	}
	if cfg.Topic != "" {
		if err := validTopicName(cfg.Topic); err != nil {
			errs = append(errs, err)
		}
	}
	seen := make(map[string]bool, len(cfg.Topics))
	for _, name := range cfg.Topics {
		if err := validTopicName(name); err != nil {
			errs = append(errs, fmt.Errorf("Topics: %w", err))
		} else if seen[name] {
			add("Topics: topic %q is listed twice", name)
		}
		seen[name] = true
	}
	if cfg.TopicPattern != "" {
		if _, err := compilePattern(cfg.TopicPattern); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

const (
	minMetadataMaxAge = 10 * time.Millisecond // franz-go's floor of MetadataMinAge
	maxMetadataMaxAge = time.Hour             // franz-go's ceiling
)

// anchoredPattern is TopicPattern as franz-go receives it: franz-go matches anywhere in a
// name (MatchString), so the pattern is wrapped to match whole names only.
func anchoredPattern(pattern string) string { return `^(?:` + pattern + `)$` }

// internalTopics is what no TopicPattern matches (ConsumeExcludeTopics): names starting with
// "__". franz-go itself skips only the topics the broker marks internal.
const internalTopics = `^__`

var internalTopic = regexp.MustCompile(internalTopics)

// compilePattern checks pattern alone first, so that one like "a)|(b", which the wrapping
// would balance, is refused rather than read as something else.
func compilePattern(pattern string) (*regexp.Regexp, error) {
	bad := func(err error) error {
		if se, ok := errors.AsType[*syntax.Error](err); ok {
			err = errors.New(se.Code.String())
		}
		return fmt.Errorf("TopicPattern %q is not a valid Go regular expression: %w", pattern, err)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, bad(err)
	}
	re, err := regexp.Compile(anchoredPattern(pattern))
	if err != nil {
		return nil, bad(err)
	}
	return re, nil
}

// topics returns the topics checked (or created) at construction: Topic or Topics; none
// for TopicPattern.
func (cfg *Config) topics() []string {
	if len(cfg.Topics) > 0 {
		return cfg.Topics
	}
	if cfg.Topic != "" {
		return []string{cfg.Topic}
	}
	return nil
}

// queueName is the Queue of this Config's errors: the topic, the Topics joined by ",", or
// the TopicPattern.
func (cfg *Config) queueName() string {
	switch {
	case cfg.Topic != "":
		return cfg.Topic
	case len(cfg.Topics) > 0:
		return strings.Join(cfg.Topics, ",")
	}
	return cfg.TopicPattern
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
	if a := cfg.MetadataMaxAge; a > 0 {
		opts = append(opts, kgo.MetadataMaxAge(a))
		if a < defaultMetadataMinAge {
			opts = append(opts, kgo.MetadataMinAge(a))
		}
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.config()
		if err != nil {
			return nil, &queue.Error{Kind: queue.Invalid, Queue: cfg.queueName(), Err: err}
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
