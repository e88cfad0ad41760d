package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	internalconfig "github.com/tributary-dev/tributary/internal/config"
)

// config is a recordsvc configuration file. CONFIG.md documents every field; keep the two in
// step (TestConfigReference fails when a key is missing there, or documented but absent).
// Zero values mean the documented default, which withDefaults fills in.
type config struct {
	Mode     string                  `yaml:"mode"`
	Listen   listenConfig            `yaml:"listen"`
	Limits   limitsConfig            `yaml:"limits"`
	Service  serviceConfig           `yaml:"service"`
	Coalesce coalesceConfig          `yaml:"coalesce"`
	Lua      luaConfig               `yaml:"lua"`
	Health   healthConfig            `yaml:"health"`
	Shutdown shutdownConfig          `yaml:"shutdown"`
	Log      logConfig               `yaml:"log"`
	Stores   map[string]*storeConfig `yaml:"stores"`
}

type listenConfig struct {
	GRPC    string `yaml:"grpc"`
	Metrics string `yaml:"metrics"`
	// Reflection serves gRPC server reflection on the gRPC listener; nil means the default,
	// true.
	Reflection *bool `yaml:"reflection"`
}

type limitsConfig struct {
	MaxRequestBytes  int `yaml:"max_request_bytes"`
	MaxResponseBytes int `yaml:"max_response_bytes"`
	MaxDocumentBytes int `yaml:"max_document_bytes"`
	MaxItems         int `yaml:"max_items"`
}

type serviceConfig struct {
	MergeBudget   time.Duration `yaml:"merge_budget"`
	RetryAttempts int           `yaml:"retry_attempts"`
	BackoffBase   time.Duration `yaml:"backoff_base"`
	BackoffMax    time.Duration `yaml:"backoff_max"`
	// DeadlineReserve: store.Options.DeadlineReserve.
	DeadlineReserve time.Duration `yaml:"deadline_reserve"`
}

type coalesceConfig struct {
	Disabled bool `yaml:"disabled"`
	// Window is a pointer so that an explicit 0s (no window) differs from "not set".
	Window      *time.Duration `yaml:"window"`
	MaxBatch    int            `yaml:"max_batch"`
	QueueLimit  int            `yaml:"queue_limit"`
	MaxInFlight int            `yaml:"max_in_flight"`
}

type luaConfig struct {
	MaxInstructions   int64         `yaml:"max_instructions"`
	Timeout           time.Duration `yaml:"timeout"`
	MaxInputBytes     int           `yaml:"max_input_bytes"`
	MaxOutputBytes    int           `yaml:"max_output_bytes"`
	MaxDepth          int           `yaml:"max_depth"`
	MaxMemoryBytes    int64         `yaml:"max_memory_bytes"`
	MaxCallDepth      int           `yaml:"max_call_depth"`
	MaxProgramBytes   int           `yaml:"max_program_bytes"`
	MaxCachedPrograms int           `yaml:"max_cached_programs"`
}

type healthConfig struct {
	Interval time.Duration `yaml:"interval"`
	Timeout  time.Duration `yaml:"timeout"`
}

type shutdownConfig struct {
	Timeout    time.Duration `yaml:"timeout"`
	DrainDelay time.Duration `yaml:"drain_delay"`
}

type logConfig struct {
	Level string `yaml:"level"`
}

// storeConfig is one named store. The settings of every kind share one struct so that a
// setting of another kind is reported as such rather than as an unknown key.
type storeConfig struct {
	Kind string `yaml:"kind"` // memory | mongodb | elasticsearch | opensearch

	// mongodb
	URI            string `yaml:"uri"`
	MetadataField  string `yaml:"metadata_field"`
	MaxConcurrency int    `yaml:"max_concurrency"`
	FerretDB       bool   `yaml:"ferretdb"`

	// elasticsearch, opensearch
	URLs             []string      `yaml:"urls"`
	DatasetTTL       time.Duration `yaml:"dataset_ttl"`
	SkipDatasetCheck bool          `yaml:"skip_dataset_check"`
	Username         string        `yaml:"username"`
	Password         string        `yaml:"password"`
	APIKey           string        `yaml:"api_key"`

	// mongodb, elasticsearch, opensearch
	Timeout time.Duration   `yaml:"timeout"`
	TLS     *storeTLSConfig `yaml:"tls"`

	Health storeHealthConfig `yaml:"health"`
	Queue  *queueConfig      `yaml:"queue"`
}

// storeHealthConfig is the record the periodic check reads. It need not exist: any answer
// from the server (found, not found, even "no such index") proves it reachable.
type storeHealthConfig struct {
	Namespace string `yaml:"namespace"`
	Dataset   string `yaml:"dataset"`
	Key       string `yaml:"key"`
}

// storeTLSConfig is how a store's client verifies its servers and which certificate it
// presents. Files are read when the store is built, not when the configuration is checked.
type storeTLSConfig struct {
	CAFile     string `yaml:"ca_file"`
	CA         string `yaml:"ca"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

type queueConfig struct {
	Kind            string `yaml:"kind"` // memory | kafka
	Topic           string `yaml:"topic"`
	DeadLetterTopic string `yaml:"dead_letter_topic"`
	Group           string `yaml:"group"`

	// memory
	Partitions int `yaml:"partitions"`

	// kafka
	Brokers         []string            `yaml:"brokers"`
	ClientID        string              `yaml:"client_id"`
	DialTimeout     time.Duration       `yaml:"dial_timeout"`
	RequestTimeout  time.Duration       `yaml:"request_timeout"`
	DeliveryTimeout time.Duration       `yaml:"delivery_timeout"`
	MaxFetch        int                 `yaml:"max_fetch"`
	FetchMaxWait    time.Duration       `yaml:"fetch_max_wait"`
	SessionTimeout  time.Duration       `yaml:"session_timeout"`
	CreateTopics    *createTopicsConfig `yaml:"create_topics"`
	TLS             *tlsConfig          `yaml:"tls"`
	SASL            *saslConfig         `yaml:"sasl"`

	Worker workerConfig `yaml:"worker"`
}

type createTopicsConfig struct {
	Partitions        int32 `yaml:"partitions"`
	ReplicationFactor int16 `yaml:"replication_factor"`
}

type tlsConfig struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

type saslConfig struct {
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	Password  string `yaml:"password"`
}

type workerConfig struct {
	MaxAttempts   int           `yaml:"max_attempts"`
	BackoffBase   time.Duration `yaml:"backoff_base"`
	BackoffMax    time.Duration `yaml:"backoff_max"`
	CommitTimeout time.Duration `yaml:"commit_timeout"`
}

// Defaults the binary sets itself; the library's own defaults are left to the library.
const (
	defaultGRPCAddr        = "127.0.0.1:8080"
	defaultMetricsAddr     = "127.0.0.1:9090"
	defaultMaxMessageBytes = 64 << 20
	defaultHealthInterval  = 5 * time.Second
	defaultHealthTimeout   = 2 * time.Second
	defaultShutdownTimeout = 30 * time.Second
	defaultHealthNamespace = "tributary"
	defaultHealthDataset   = "tributary-health"
	defaultHealthKey       = "~health"
	// maxMessageBytesLimit keeps the limits inside what gRPC and an int32 length allow.
	maxMessageBytesLimit = 1 << 30
)

// loadConfig reads, expands and validates a configuration file.
func loadConfig(path string) (*config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// parseConfig decodes a configuration. Keys are checked first, on the file as written, against
// the configuration types (internal/config.CheckKeys), so an unknown key is reported with its
// line whatever the values; then ${NAME} references in values are expanded and the expanded
// tree is decoded and validated. Every problem is written in the format of every
// configuration error of the project (internal/config.Problem): one line of the file, the
// key's path, and for an unknown key its section, the keys the section knows and a
// did-you-mean. Errors never quote values: after expansion a value may be a secret.
func parseConfig(b []byte) (*config, error) {
	c, err := decodeConfig(b)
	if err != nil {
		return nil, &configError{msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	return c, nil
}

// configError is every error parseConfig returns: the problems, each naming its line or
// field, never a value.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// configType is the Go type a configuration file decodes into.
var configType = reflect.TypeOf(config{})

// decodeConfig reports every problem at once: unknown keys, values of the wrong type and
// invalid values, in that order, joined by "; ". Only a file that is not YAML, or a ${NAME}
// that cannot be expanded, stops it early.
func decodeConfig(b []byte) (*config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, internalconfig.ScrubYAMLError(err)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("the configuration is empty: it needs at least stores:")
	}
	problems := internalconfig.CheckKeys(&root, configType, "")
	if ps := internalconfig.ExpandAt(&root, configType, ""); len(ps) > 0 {
		return nil, append(problems, ps...)
	}
	var c config
	// A value of the wrong type is left at its zero value, the default: the others are still
	// validated.
	if err := internalconfig.DecodeValues(&root, &c, ""); err != nil {
		var ps internalconfig.Problems
		if !errors.As(err, &ps) {
			return nil, err
		}
		problems = append(problems, ps...)
	}
	c.withDefaults()
	if err := c.validate(); err != nil {
		// A key that an unknown one is likely a misspelling of, or whose value could not be
		// read, is reported through that problem, not again as missing.
		misspelt := map[string]bool{}
		for _, p := range problems {
			switch {
			case p.Suggestion != "":
				misspelt[internalconfig.JoinKey(p.Key, p.Suggestion)] = true
			case p.Unknown == "":
				misspelt[p.Key] = true
			}
		}
		lines := internalconfig.KeyLines(&root)
		for _, p := range err.(internalconfig.Problems) {
			if misspelt[p.Key] {
				continue
			}
			p.Line = internalconfig.LineOf(lines, p.Key)
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return &c, nil
}

// checkMode refuses a mode that runs workers when no store has a queue: there would be
// nothing to consume, and `all` would silently be `server`.
func (c *config) checkMode() error {
	if c.Mode == modeServer {
		return nil
	}
	for _, sc := range c.Stores {
		if sc.Queue != nil {
			return nil
		}
	}
	return fmt.Errorf("mode %s runs a worker per store queue, and no store has a queue (stores.<name>.queue): configure one, or use mode server for the API alone", c.Mode)
}

// withDefaults fills in the defaults the binary owns. Library defaults (coalescing, Lua,
// retries, Kafka timeouts) stay zero here and are applied by the library.
func (c *config) withDefaults() {
	if c.Mode == "" {
		c.Mode = modeServer
	}
	if c.Listen.GRPC == "" {
		c.Listen.GRPC = defaultGRPCAddr
	}
	if c.Listen.Metrics == "" {
		c.Listen.Metrics = defaultMetricsAddr
	}
	if c.Listen.Reflection == nil {
		on := true
		c.Listen.Reflection = &on
	}
	if c.Limits.MaxRequestBytes == 0 {
		c.Limits.MaxRequestBytes = defaultMaxMessageBytes
	}
	if c.Limits.MaxResponseBytes == 0 {
		c.Limits.MaxResponseBytes = defaultMaxMessageBytes
	}
	if c.Health.Interval == 0 {
		c.Health.Interval = defaultHealthInterval
	}
	if c.Health.Timeout == 0 {
		c.Health.Timeout = defaultHealthTimeout
	}
	if c.Shutdown.Timeout == 0 {
		c.Shutdown.Timeout = defaultShutdownTimeout
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	for name, s := range c.Stores {
		if s == nil {
			continue
		}
		h := &s.Health
		if h.Namespace == "" {
			h.Namespace = defaultHealthNamespace
		}
		if h.Dataset == "" {
			h.Dataset = defaultHealthDataset
		}
		if h.Key == "" {
			h.Key = defaultHealthKey
		}
		if q := s.Queue; q != nil {
			if q.Topic == "" {
				q.Topic = "tributary.records." + name
			}
			if q.DeadLetterTopic == "" {
				q.DeadLetterTopic = q.Topic + ".dlq"
			}
			if q.Group == "" {
				q.Group = "tributary-recordsvc-" + name
			}
		}
	}
}

var storeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// validate reports every invalid value at once, each naming its field: an
// internalconfig.Problems without lines (decodeConfig adds them).
func (c *config) validate() error {
	var errs internalconfig.Problems
	bad := func(field, format string, args ...any) {
		errs = append(errs, internalconfig.Problem{Key: field, Message: fmt.Sprintf(format, args...)})
	}
	checkAddr := func(field, v string, allowOff bool) {
		if allowOff && v == "off" {
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(field, "must be host:port (port 0 picks a free one)")
		}
	}
	if c.Mode != modeServer && c.Mode != modeWorker && c.Mode != modeAll {
		bad("mode", "must be server, worker or all")
	}
	checkAddr("listen.grpc", c.Listen.GRPC, false)
	checkAddr("listen.metrics", c.Listen.Metrics, true)

	positive := func(field string, v int64) {
		if v < 0 {
			bad(field, "must not be negative (0 or absent means the default)")
		}
	}
	for _, f := range []struct {
		field string
		v     int
	}{{"limits.max_request_bytes", c.Limits.MaxRequestBytes}, {"limits.max_response_bytes", c.Limits.MaxResponseBytes}} {
		if f.v < 1024 || f.v > maxMessageBytesLimit {
			bad(f.field, "must be between 1024 and %d bytes", maxMessageBytesLimit)
		}
	}
	positive("limits.max_document_bytes", int64(c.Limits.MaxDocumentBytes))
	positive("limits.max_items", int64(c.Limits.MaxItems))
	if c.Limits.MaxDocumentBytes > 0 && c.Limits.MaxDocumentBytes > c.Limits.MaxRequestBytes {
		bad("limits.max_document_bytes", "is larger than limits.max_request_bytes, so no request could carry such a document")
	}
	positive("service.merge_budget", int64(c.Service.MergeBudget))
	positive("service.retry_attempts", int64(c.Service.RetryAttempts))
	positive("service.backoff_base", int64(c.Service.BackoffBase))
	positive("service.backoff_max", int64(c.Service.BackoffMax))
	positive("service.deadline_reserve", int64(c.Service.DeadlineReserve))
	if c.Coalesce.Window != nil {
		positive("coalesce.window", int64(*c.Coalesce.Window))
	}
	positive("coalesce.max_batch", int64(c.Coalesce.MaxBatch))
	positive("coalesce.queue_limit", int64(c.Coalesce.QueueLimit))
	positive("coalesce.max_in_flight", int64(c.Coalesce.MaxInFlight))
	maxItems := c.Limits.MaxItems
	if maxItems == 0 {
		maxItems = 10000
	}
	if c.Coalesce.MaxBatch > maxItems {
		bad("coalesce.max_batch", "exceeds limits.max_items (%d)", maxItems)
	}
	l := c.Lua
	positive("lua.max_instructions", l.MaxInstructions)
	positive("lua.timeout", int64(l.Timeout))
	positive("lua.max_input_bytes", int64(l.MaxInputBytes))
	positive("lua.max_output_bytes", int64(l.MaxOutputBytes))
	positive("lua.max_depth", int64(l.MaxDepth))
	positive("lua.max_memory_bytes", l.MaxMemoryBytes)
	positive("lua.max_call_depth", int64(l.MaxCallDepth))
	positive("lua.max_program_bytes", int64(l.MaxProgramBytes))
	positive("lua.max_cached_programs", int64(l.MaxCachedPrograms))
	if c.Health.Interval < 100*time.Millisecond {
		bad("health.interval", "must be at least 100ms")
	}
	if c.Health.Timeout <= 0 || c.Health.Timeout > c.Health.Interval {
		bad("health.timeout", "must be positive and at most health.interval")
	}
	if c.Shutdown.Timeout <= 0 {
		bad("shutdown.timeout", "must be positive")
	}
	if c.Shutdown.DrainDelay < 0 {
		bad("shutdown.drain_delay", "must not be negative")
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad("log.level", "must be debug, info, warn or error")
	}

	if len(c.Stores) == 0 {
		bad("stores", "at least one store is required")
	}
	names := make([]string, 0, len(c.Stores))
	for name := range c.Stores {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		field := "stores." + name
		if !storeName.MatchString(name) {
			bad(field, "a store name uses letters, digits, '_', '.' and '-' (at most 64), starting with a letter or digit")
			continue
		}
		s := c.Stores[name]
		if s == nil {
			bad(field, "is empty: it needs at least kind:")
			continue
		}
		s.validate(field, bad)
	}
	c.checkTopicsOwned(names, bad)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// checkTopicsOwned refuses a record topic that is another store's record or dead-letter topic
// on the same queue (the in-process broker, or Kafka with the same brokers): each store's
// worker applies its own store's records only and dead-letters any other's, so two stores'
// workers on one topic would dead-letter each other's records, and a worker reading another
// store's dead letters would dead-letter them again. Dead-letter topics may be shared.
func (c *config) checkTopicsOwned(names []string, bad func(field, format string, args ...any)) {
	recordTopics := map[string]string{} // queue and topic -> the store whose records it carries
	deadTopics := map[string]string{}   // queue and topic -> the first store dead-lettering there
	queueOf := func(q *queueConfig) string {
		if q.Kind != "kafka" {
			return q.Kind
		}
		brokers := slices.Clone(q.Brokers)
		sort.Strings(brokers)
		return "kafka " + strings.Join(brokers, ",")
	}
	for _, name := range names {
		if s := c.Stores[name]; s != nil && s.Queue != nil {
			q := s.Queue
			at := queueOf(q) + "\x00"
			if other, ok := recordTopics[at+q.Topic]; ok {
				bad("stores."+name+".queue.topic", "is also the topic of stores.%s: a topic carries the records of one store, and each store's worker dead-letters the records of any other", other)
			} else {
				recordTopics[at+q.Topic] = name
			}
			if _, ok := deadTopics[at+q.DeadLetterTopic]; !ok {
				deadTopics[at+q.DeadLetterTopic] = name
			}
		}
	}
	for _, name := range names {
		if s := c.Stores[name]; s != nil && s.Queue != nil {
			q := s.Queue
			if other, ok := recordTopics[queueOf(q)+"\x00"+q.DeadLetterTopic]; ok && other != name {
				bad("stores."+name+".queue.dead_letter_topic", "is the record topic of stores.%s, whose worker would dead-letter these dead letters again", other)
			}
		}
	}
}

func (s *storeConfig) validate(field string, bad func(field, format string, args ...any)) {
	only := func(kinds string, set map[string]bool) {
		for _, k := range slices.Sorted(maps.Keys(set)) {
			if set[k] {
				bad(field+"."+k, "is a setting of kind %s only", kinds)
			}
		}
	}
	mongoOnly := map[string]bool{"uri": s.URI != "", "metadata_field": s.MetadataField != "", "max_concurrency": s.MaxConcurrency != 0, "ferretdb": s.FerretDB}
	searchOnly := map[string]bool{"urls": len(s.URLs) > 0, "dataset_ttl": s.DatasetTTL != 0, "skip_dataset_check": s.SkipDatasetCheck,
		"username": s.Username != "", "password": s.Password != "", "api_key": s.APIKey != ""}
	if s.Timeout < 0 {
		bad(field+".timeout", "must not be negative")
	}
	if s.TLS != nil && s.Kind != "memory" {
		s.TLS.validate(field+".tls", bad)
	}
	switch s.Kind {
	case "memory":
		only("mongodb", mongoOnly)
		only("elasticsearch or opensearch", searchOnly)
		if s.Timeout != 0 {
			bad(field+".timeout", "is not a setting of kind memory")
		}
		if s.TLS != nil {
			bad(field+".tls", "is not a setting of kind memory")
		}
	case "mongodb":
		if searchOnly["username"] || searchOnly["password"] || searchOnly["api_key"] {
			bad(field, "username, password and api_key are settings of kind elasticsearch or opensearch only: MongoDB's credentials go in the uri")
			searchOnly["username"], searchOnly["password"], searchOnly["api_key"] = false, false, false
		}
		only("elasticsearch or opensearch", searchOnly)
		if s.URI == "" {
			bad(field+".uri", "is required for kind mongodb")
		} else if !strings.HasPrefix(s.URI, "mongodb://") && !strings.HasPrefix(s.URI, "mongodb+srv://") {
			bad(field+".uri", "must start with mongodb:// or mongodb+srv://")
		} else if s.TLS != nil && uriHasTLSOptions(s.URI) {
			bad(field+".tls", "is set, and the uri has TLS options (tls, tlsCAFile, tlsCertificateKeyFile, ...): give them in one place")
		}
		if f := s.MetadataField; f != "" && (f == "_id" || strings.ContainsAny(f, ".\x00") || f[0] == '$') {
			bad(field+".metadata_field", "must be a plain top-level field name other than _id (no '.', not starting with '$')")
		}
		if s.MaxConcurrency < 0 {
			bad(field+".max_concurrency", "must not be negative")
		}
	case "elasticsearch", "opensearch":
		only("mongodb", mongoOnly)
		if len(s.URLs) == 0 {
			bad(field+".urls", "is required for kind %s", s.Kind)
		}
		https, userinfo := false, -1
		for i, u := range s.URLs {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				bad(fmt.Sprintf("%s.urls[%d]", field, i), "must be an http:// or https:// URL")
			}
			https = https || strings.HasPrefix(u, "https://")
			if pu, err := url.Parse(u); err == nil && pu.User != nil && userinfo < 0 {
				userinfo = i
			}
		}
		if s.DatasetTTL < 0 {
			bad(field+".dataset_ttl", "must not be negative")
		}
		if (s.Username == "") != (s.Password == "") {
			bad(field, "username and password go together")
		}
		if s.APIKey != "" && (s.Username != "" || s.Password != "") {
			bad(field+".api_key", "is set, and so are username and password: give one kind of credentials")
		}
		if (s.Username != "" || s.APIKey != "") && userinfo >= 0 {
			bad(fmt.Sprintf("%s.urls[%d]", field, userinfo), "holds user:password@, and username or api_key is set: give the credentials once")
		}
		if s.TLS != nil && !https && len(s.URLs) > 0 {
			bad(field+".tls", "is set, and no url is https://: TLS applies to https:// URLs only")
		}
	case "":
		bad(field+".kind", "is required: memory, mongodb, elasticsearch or opensearch")
	default:
		bad(field+".kind", "must be memory, mongodb, elasticsearch or opensearch")
	}
	if s.Health.Key == "" || s.Health.Namespace == "" || s.Health.Dataset == "" {
		bad(field+".health", "namespace, dataset and key must not be empty")
	}
	if q := s.Queue; q != nil {
		q.validate(field+".queue", bad)
	}
}

func (t *storeTLSConfig) validate(field string, bad func(field, format string, args ...any)) {
	if t.CAFile != "" && t.CA != "" {
		bad(field, "ca_file and ca are two ways to give the CA: set one")
	}
	if t.CA != "" && !pemCertificates([]byte(t.CA)) {
		bad(field+".ca", "must be PEM: one or more -----BEGIN CERTIFICATE----- blocks")
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad(field, "cert_file and key_file go together")
	}
	if t.ServerName != "" && (strings.ContainsAny(t.ServerName, " /:@") || strings.HasPrefix(t.ServerName, ".")) {
		bad(field+".server_name", "must be a host name (no scheme, port or path)")
	}
}

// pemCertificates reports whether b holds at least one PEM certificate that parses, and
// nothing PEM but certificates.
func pemCertificates(b []byte) bool {
	n := 0
	for {
		blk, rest := pem.Decode(b)
		if blk == nil {
			return n > 0
		}
		if blk.Type != "CERTIFICATE" {
			return false
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return false
		}
		n++
		b = rest
	}
}

// uriHasTLSOptions reports whether a MongoDB URI sets any TLS option itself (tls, ssl,
// tlsCAFile, tlsCertificateKeyFile, tlsInsecure, ...; names are case-insensitive).
func uriHasTLSOptions(uri string) bool {
	_, query, ok := strings.Cut(uri, "?")
	if !ok {
		return false
	}
	for _, kv := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, _, _ := strings.Cut(kv, "=")
		k = strings.ToLower(k)
		if strings.HasPrefix(k, "tls") || strings.HasPrefix(k, "ssl") {
			return true
		}
	}
	return false
}

var topicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

func (q *queueConfig) validate(field string, bad func(field, format string, args ...any)) {
	for _, t := range []struct{ key, v string }{{"topic", q.Topic}, {"dead_letter_topic", q.DeadLetterTopic}} {
		if !topicName.MatchString(t.v) || t.v == "." || t.v == ".." {
			bad(field+"."+t.key, "must be 1-249 ASCII letters, digits, '.', '_' or '-'")
		}
	}
	if q.Topic == q.DeadLetterTopic {
		bad(field+".dead_letter_topic", "must differ from topic")
	}
	kafkaOnly := map[string]bool{
		"brokers": len(q.Brokers) > 0, "client_id": q.ClientID != "", "dial_timeout": q.DialTimeout != 0,
		"request_timeout": q.RequestTimeout != 0, "delivery_timeout": q.DeliveryTimeout != 0,
		"max_fetch": q.MaxFetch != 0, "fetch_max_wait": q.FetchMaxWait != 0, "session_timeout": q.SessionTimeout != 0,
		"create_topics": q.CreateTopics != nil, "tls": q.TLS != nil, "sasl": q.SASL != nil,
	}
	switch q.Kind {
	case "memory":
		for _, k := range slices.Sorted(maps.Keys(kafkaOnly)) {
			if kafkaOnly[k] {
				bad(field+"."+k, "is a setting of kind kafka only")
			}
		}
		if q.Partitions < 0 {
			bad(field+".partitions", "must not be negative")
		}
	case "kafka":
		if q.Partitions != 0 {
			bad(field+".partitions", "is a setting of kind memory only (Kafka topics: create_topics.partitions)")
		}
		if len(q.Brokers) == 0 {
			bad(field+".brokers", "is required for kind kafka")
		}
		for i, b := range q.Brokers {
			if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
				bad(fmt.Sprintf("%s.brokers[%d]", field, i), "must be host:port")
			}
		}
		for _, d := range []struct {
			key string
			v   time.Duration
		}{{"dial_timeout", q.DialTimeout}, {"request_timeout", q.RequestTimeout}, {"delivery_timeout", q.DeliveryTimeout}, {"fetch_max_wait", q.FetchMaxWait}, {"session_timeout", q.SessionTimeout}} {
			if d.v < 0 {
				bad(field+"."+d.key, "must not be negative")
			}
		}
		if q.MaxFetch < 0 {
			bad(field+".max_fetch", "must not be negative")
		}
		if ct := q.CreateTopics; ct != nil {
			if ct.Partitions < 1 {
				bad(field+".create_topics.partitions", "must be at least 1")
			}
			if ct.ReplicationFactor < 0 {
				bad(field+".create_topics.replication_factor", "must not be negative")
			}
		}
		if t := q.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
			bad(field+".tls", "cert_file and key_file go together")
		}
		if s := q.SASL; s != nil {
			if !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, strings.ToUpper(s.Mechanism)) {
				bad(field+".sasl.mechanism", "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
			}
			if s.Username == "" || s.Password == "" {
				bad(field+".sasl", "username and password are required")
			}
		}
	case "":
		bad(field+".kind", "is required: memory or kafka")
	default:
		bad(field+".kind", "must be memory or kafka")
	}
	w := q.Worker
	if w.MaxAttempts < 0 || w.BackoffBase < 0 || w.BackoffMax < 0 || w.CommitTimeout < 0 {
		bad(field+".worker", "values must not be negative")
	}
}
