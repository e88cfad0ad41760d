package sink

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/config"
)

// Secret is a credential from the configuration (internal/config): every way of printing it
// shows only whether it is set, so a Config can be logged as a whole without leaking.
type Secret = config.Secret

// Duration is a time.Duration written as Go duration text ("30s", "24h") in YAML.
type Duration = config.Duration

const redacted = config.Redacted

// Auth types.
const (
	AuthNone   = "none"
	AuthBasic  = "basic"
	AuthAPIKey = "api_key"
)

// Auth is how the sink authenticates to the cluster.
type Auth struct {
	Type     string `yaml:"type" json:"type"` // basic | api_key | none
	Username string `yaml:"username,omitempty" json:"username,omitempty"`
	Password Secret `yaml:"password,omitempty" json:"password,omitempty"`
	APIKey   Secret `yaml:"api_key,omitempty" json:"api_key,omitempty"` // the base64 "id:key" credential Elasticsearch issues
}

// TLS configures https: which servers to trust, the client certificate to present, the
// name the servers' certificates must carry. Each PEM is given as a file or inline, not
// both; a client certificate needs its key and a key its certificate.
type TLS struct {
	CAFile string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"` // PEM file of the CA that signed the servers' certificates (default: the system's roots)
	CA     string `yaml:"ca,omitempty" json:"ca,omitempty"`           // the same, inline PEM
	// CertFile or Cert is the client certificate (PEM, its chain may follow), for clusters
	// that authenticate clients by certificate (Elasticsearch's PKI realm, OpenSearch's
	// clientcert_auth_domain); KeyFile or Key is its unencrypted private key (PEM).
	CertFile string `yaml:"cert_file,omitempty" json:"cert_file,omitempty"`
	Cert     string `yaml:"cert,omitempty" json:"cert,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty" json:"key_file,omitempty"`
	Key      Secret `yaml:"key,omitempty" json:"key,omitempty"`
	// ServerName is the name the servers' certificates must carry when it is not the
	// urls' host (nodes reached by address). Default: each url's host.
	ServerName string `yaml:"server_name,omitempty" json:"server_name,omitempty"`
}

// Batch bounds one _bulk request. A batch from the runner larger than this is sent as several
// requests (after coalescing); within the bounds it is exactly one.
type Batch struct {
	MaxDocs  int `yaml:"max_docs,omitempty" json:"max_docs,omitempty"`   // default 5000 actions
	MaxBytes int `yaml:"max_bytes,omitempty" json:"max_bytes,omitempty"` // default 10 MiB of request body
}

// Config is one elasticsearch sink, as the specification's YAML writes it under config:.
type Config struct {
	ID string `yaml:"id" json:"id"`
	// URL is the cluster's address; URLs, instead of it, lists several of its nodes: a
	// request that cannot reach one (refused, a connect timeout) goes to the next
	// (internal/search). Exactly one of the two, all http:// or all https://, without
	// credentials (auth: holds them).
	URL             string   `yaml:"url,omitempty" json:"url,omitempty"`
	URLs            []string `yaml:"urls,omitempty" json:"urls,omitempty"`
	Index           string   `yaml:"index" json:"index"`
	IDFields        []string `yaml:"id_fields,omitempty" json:"id_fields,omitempty"`
	IDSeparator     string   `yaml:"id_separator,omitempty" json:"id_separator,omitempty"` // default "|"
	Auth            Auth     `yaml:"auth" json:"auth"`
	AutoCreateIndex *bool    `yaml:"auto_create_index,omitempty" json:"auto_create_index,omitempty"` // default true
	// Keyless is what happens to a table with neither a primary key nor the id_fields
	// columns, whose rows can get no _id: refuse (the default) stops the pipeline at start,
	// or when such a table first appears, naming the table; dead_letter sends each of its
	// rows to the dead-letter queue instead.
	Keyless string `yaml:"keyless,omitempty" json:"keyless,omitempty"`

	TLS TLS `yaml:"tls,omitempty" json:"tls,omitempty"`
	// RequestTimeout bounds each request (default 60s); ConnectTimeout each connection attempt
	// (default 10s).
	RequestTimeout Duration `yaml:"request_timeout,omitempty" json:"request_timeout,omitempty"`
	ConnectTimeout Duration `yaml:"connect_timeout,omitempty" json:"connect_timeout,omitempty"`
	Batch          Batch    `yaml:"batch,omitempty" json:"batch,omitempty"`
	// Concurrency is how many _bulk requests of one oversized batch are in flight at once
	// (default 2). Coalescing makes every _id appear once per batch, so order between them
	// does not matter.
	Concurrency int `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	// DeleteRetention is index.gc_deletes for the indices the sink creates: how long the
	// cluster remembers a delete's version (default 24h; Elasticsearch's own default is 60s).
	// See "Deletes never resurrect" in the package documentation.
	DeleteRetention Duration `yaml:"delete_retention,omitempty" json:"delete_retention,omitempty"`
	// ItemRetries is how often per-item 429s of one request are retried before the whole
	// batch is handed back as backpressure (default 3).
	ItemRetries int `yaml:"item_retries,omitempty" json:"item_retries,omitempty"`
	// Refresh is the _bulk refresh parameter ("", "true", "false", "wait_for"); default none.
	Refresh string `yaml:"refresh,omitempty" json:"refresh,omitempty"`
	// Shards and Replicas, when set, go into the settings of created indices.
	Shards   int  `yaml:"number_of_shards,omitempty" json:"number_of_shards,omitempty"`
	Replicas *int `yaml:"number_of_replicas,omitempty" json:"number_of_replicas,omitempty"`
	// Mapping tunes the generated mappings, for engines without scaled_float or
	// unsigned_long and for JSON columns that should be searchable.
	Mapping MappingConfig `yaml:"mapping,omitempty" json:"mapping,omitempty"`
	// ReadAlias creates each new table's index as its first generation, <index>-g1, behind a
	// read-only alias named <index> that readers query, so that the table can be reindexed
	// without downtime (doc.go, Reindexing). Without it (the default) a new table's index is
	// <index> itself, which a reindex turns into a generation behind the alias.
	ReadAlias bool `yaml:"read_alias,omitempty" json:"read_alias,omitempty"`
	// RetireAfter is how long the generation a reindex replaced is kept before it is deleted
	// (default 1h), for readers that still hold it (a scroll, a point in time).
	RetireAfter Duration `yaml:"retire_after,omitempty" json:"retire_after,omitempty"`
	// SharedOwner, when set, owns the pipeline's indices instead of the state store's
	// deployment identity, so that several processes -- each with its own state store -- write
	// the same indices at once: every process of one scale-out group sets the same value (for
	// a Debezium pipeline, e.g. the consumer group's name). Processes of one owner never fence
	// each other; a deployment with another owner, or with none, is still refused
	// (owned_by_other), and so is an index created without it. Reindexing is not available
	// under a shared owner. See "Shared owners" in the package documentation. Default "": the
	// deployment owns its indices alone. At most 255 bytes of printable UTF-8, no leading or
	// trailing white space.
	SharedOwner string `yaml:"shared_owner,omitempty" json:"shared_owner,omitempty"`
}

// MappingConfig is the YAML face of MappingOptions.
type MappingConfig struct {
	Decimal string `yaml:"decimal,omitempty" json:"decimal,omitempty"` // scaled_float (default) | keyword | double
	JSON    string `yaml:"json,omitempty" json:"json,omitempty"`       // stored (default) | flattened
	Uint64  string `yaml:"uint64,omitempty" json:"uint64,omitempty"`   // unsigned_long (default) | keyword
}

// options translates the configuration; unknown words are validation errors.
func (m MappingConfig) options() (MappingOptions, error) {
	var o MappingOptions
	switch m.Decimal {
	case "", "scaled_float":
		o.DecimalAs = DecimalScaledFloat
	case "keyword":
		o.DecimalAs = DecimalKeyword
	case "double":
		o.DecimalAs = DecimalDouble
	default:
		return o, errors.New("mapping: decimal must be scaled_float, keyword or double")
	}
	switch m.JSON {
	case "", "stored":
		o.JSONAs = JSONStored
	case "flattened":
		o.JSONAs = JSONFlattened
	default:
		return o, errors.New("mapping: json must be stored or flattened")
	}
	switch m.Uint64 {
	case "", "unsigned_long":
		o.Uint64As = Uint64UnsignedLong
	case "keyword":
		o.Uint64As = Uint64Keyword
	default:
		return o, errors.New("mapping: uint64 must be unsigned_long or keyword")
	}
	return o, nil
}

// Defaults.
const (
	DefaultIDSeparator     = "|"
	DefaultRequestTimeout  = 60 * time.Second
	DefaultConnectTimeout  = 10 * time.Second
	DefaultMaxDocs         = 5000
	DefaultMaxBytes        = 10 << 20
	DefaultConcurrency     = 2
	DefaultDeleteRetention = 24 * time.Hour
	// DefaultRetireAfter is how long a replaced generation is kept after a reindex.
	DefaultRetireAfter = time.Hour
	DefaultItemRetries = 3
)

// ConfigError is every problem of one sink configuration, as ParseConfig, ParseConfigNode,
// Normalize, Validate and New report it. Each problem names its key (url, auth, batch, ...),
// never a value: values may be credentials, and even an id or an index template is not
// repeated back.
type ConfigError struct {
	Problems []string
	// Located holds the same problems, in the same order, with their lines in the file and
	// their key paths inside the entry ("config.batch.max_docs"; an unknown key also with the
	// keys its section knows and a suggestion), when the configuration was read from YAML
	// (ParseConfig, ParseConfigNode); nil for Normalize, Validate and New. A caller that read
	// the entry as part of a larger document reports them as its own (mirror does).
	Located []ConfigProblem
}

// ConfigProblem is one located problem of a sink entry (internal/config.Problem): Line,
// Key, Message, and for an unknown key Unknown, Known and Suggestion. String writes it in the
// one format of every configuration error: `line 9: unknown key "number_of_replica" in
// config: did you mean "number_of_replicas"? (known: ...)`.
type ConfigProblem = config.Problem

func (e *ConfigError) Error() string { return "sink config: " + strings.Join(e.Problems, "; ") }

func configError(problems ...string) *ConfigError { return &ConfigError{Problems: problems} }

// located makes a *ConfigError of problems read from YAML.
func located(ps []ConfigProblem) *ConfigError {
	e := &ConfigError{Located: ps}
	for _, p := range ps {
		e.Problems = append(e.Problems, p.String())
	}
	return e
}

// entryDoc is one element of the specification's sinks: list, as it is read.
type entryDoc struct {
	Type   string `yaml:"type"`
	Config Config `yaml:"config"`
}

// EntryKeys lists every key a sinks: entry accepts, as paths ("type", "config.batch",
// "config.batch.max_docs", ...), so that a configuration reference can be checked against
// them.
func EntryKeys() []string { return config.Keys(reflect.TypeOf(entryDoc{})) }

// ParseConfig reads one sink entry of the specification's YAML ("type: elasticsearch" and
// "config: {...}") as ParseConfigNode does.
func ParseConfig(b []byte) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return Config{}, configError(strings.TrimPrefix(config.ScrubYAMLError(err).Error(), "yaml: "))
	}
	if root.Kind == 0 {
		return Config{}, located([]ConfigProblem{{Key: "config", Message: "is required"}})
	}
	return ParseConfigNode(&root)
}

// ParseConfigNode reads one sink entry ("type: elasticsearch" and "config: {...}") from a
// node of a larger YAML document, so that every problem carries the line of the file that
// document came from: expanding ${ENV} references in values, applying defaults and
// validating. n is left as it is (the expansion works on a copy). An unset variable is an
// error naming it; "$${" writes a literal "${". Unknown keys are errors naming the known keys
// and the likely one, so a misspelt option is not silently ignored. Every error is a
// *ConfigError whose Located problems carry lines and key paths ("config.batch.max_docs"),
// and none quotes a value.
func ParseConfigNode(n *yaml.Node) (Config, error) {
	n = copyNode(n, map[*yaml.Node]*yaml.Node{})
	t := reflect.TypeOf(entryDoc{})
	if ps := config.CheckKeys(n, t, ""); len(ps) > 0 {
		return Config{}, located(ps)
	}
	if ps := config.ExpandAt(n, t, ""); len(ps) > 0 {
		return Config{}, located(ps)
	}
	var e entryDoc
	if err := config.DecodeAt(n, &e, ""); err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			return Config{}, located(ps)
		}
		return Config{}, configError(err.Error())
	}
	m := n
	if m.Kind == yaml.DocumentNode && len(m.Content) == 1 {
		m = m.Content[0]
	}
	lines := config.KeyLines(m)
	// entryLine is the line of key in the entry, or of the entry itself.
	entryLine := func(key string) int {
		if l := config.LineOf(lines, key); l != 0 {
			return l
		}
		return m.Line
	}
	if e.Type != "elasticsearch" {
		return Config{}, located([]ConfigProblem{{Line: entryLine("type"), Key: "type", Message: `must be "elasticsearch"`}})
	}
	cn := childNode(m, "config")
	if cn == nil || (cn.Kind == yaml.ScalarNode && cn.Tag == "!!null") {
		return Config{}, located([]ConfigProblem{{Line: entryLine("config"), Key: "config", Message: "is required"}})
	}
	c := e.Config
	if err := c.Normalize(); err != nil {
		var ce *ConfigError
		if !errors.As(err, &ce) {
			return Config{}, err
		}
		ps := make([]ConfigProblem, len(ce.Problems))
		for i, msg := range ce.Problems {
			ps[i] = locate(lines, msg)
		}
		return Config{}, located(ps)
	}
	return c, nil
}

// locate places a problem of Validate in the entry: at the key its message starts with
// ("auth: type basic needs ...", "urls[1] must be ...", "keyless must be ..."), else at
// config:. lines are the entry's key lines ([config.KeyLines]).
func locate(lines map[string]int, msg string) ConfigProblem {
	tok := msg
	if i := strings.IndexAny(tok, " :"); i >= 0 {
		tok = tok[:i]
	}
	p := ConfigProblem{Line: config.LineOf(lines, "config."+tok), Key: "config", Message: msg}
	if rest, ok := strings.CutPrefix(msg, tok+": "); ok {
		p.Key, p.Message = "config."+tok, rest
	}
	return p
}

// childNode is the value node of name in mapping n, nil when absent.
func childNode(n *yaml.Node, name string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			v := n.Content[i+1]
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

// copyNode copies a node tree deeply (aliases to the copies of their anchors).
func copyNode(n *yaml.Node, done map[*yaml.Node]*yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if c, ok := done[n]; ok {
		return c
	}
	c := *n
	done[n] = &c
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		c.Content[i] = copyNode(e, done)
	}
	c.Alias = copyNode(n.Alias, done)
	return &c
}

// AutoCreate reports auto_create_index with its default (true).
func (c *Config) AutoCreate() bool { return c.AutoCreateIndex == nil || *c.AutoCreateIndex }

// Normalize applies defaults and validates; ParseConfig calls it, and New does for configs
// built in code.
func (c *Config) Normalize() error {
	if c.IDSeparator == "" {
		c.IDSeparator = DefaultIDSeparator
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = Duration(DefaultRequestTimeout)
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = Duration(DefaultConnectTimeout)
	}
	if c.Batch.MaxDocs == 0 {
		c.Batch.MaxDocs = DefaultMaxDocs
	}
	if c.Batch.MaxBytes == 0 {
		c.Batch.MaxBytes = DefaultMaxBytes
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.RetireAfter == 0 {
		c.RetireAfter = Duration(DefaultRetireAfter)
	}
	if c.DeleteRetention == 0 {
		c.DeleteRetention = Duration(DefaultDeleteRetention)
	}
	if c.ItemRetries == 0 {
		c.ItemRetries = DefaultItemRetries
	}
	if c.Auth.Type == "" {
		c.Auth.Type = AuthNone
	}
	if c.Keyless == "" {
		c.Keyless = KeylessRefuse
	}
	return c.Validate()
}

// Validate checks the configuration and says, in a *ConfigError, what is wrong with which key.
// It never quotes a value.
func (c *Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if c.ID == "" {
		bad("id is required")
	}
	c.validateURLs(bad)
	if c.Index == "" {
		bad("index is required")
	} else if _, err := parseTemplate(c.Index); err != nil {
		bad("index: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range c.IDFields {
		if f == "" {
			bad("id_fields: empty field name")
		} else if seen[f] {
			bad("id_fields: a field is listed twice")
		}
		seen[f] = true
	}
	switch c.Keyless {
	case "", KeylessRefuse, KeylessDeadLetter:
	default:
		bad("keyless must be refuse or dead_letter")
	}
	if strings.Contains(c.IDSeparator, `\`) {
		bad(`id_separator must not contain a backslash (it is the escape character of _id)`)
	}
	switch c.Auth.Type {
	case AuthNone:
		if c.Auth.Username != "" || c.Auth.Password != "" || c.Auth.APIKey != "" {
			bad("auth: type none takes no username, password or api_key")
		}
	case AuthBasic:
		if c.Auth.Username == "" || c.Auth.Password == "" {
			bad("auth: type basic needs username and password")
		}
		if c.Auth.APIKey != "" {
			bad("auth: type basic takes no api_key")
		}
	case AuthAPIKey:
		if c.Auth.APIKey == "" {
			bad("auth: type api_key needs api_key")
		}
		if c.Auth.Username != "" || c.Auth.Password != "" {
			bad("auth: type api_key takes no username or password")
		}
	default:
		bad("auth: type must be basic, api_key or none")
	}
	c.TLS.validate(bad)
	if c.RequestTimeout < 0 || c.ConnectTimeout < 0 {
		bad("timeouts must not be negative")
	}
	if c.Batch.MaxDocs < 0 || c.Batch.MaxBytes < 0 {
		bad("batch: max_docs and max_bytes must not be negative")
	}
	if c.Batch.MaxBytes > 0 && c.Batch.MaxBytes < 1024 {
		bad("batch: max_bytes below 1024 cannot hold a document")
	}
	if c.Concurrency < 0 || c.Concurrency > 64 {
		bad("concurrency must be between 1 and 64")
	}
	if c.RetireAfter < 0 {
		bad("retire_after must not be negative")
	}
	if c.DeleteRetention < 0 {
		bad("delete_retention must not be negative")
	}
	if c.ItemRetries < 0 {
		bad("item_retries must not be negative")
	}
	switch c.Refresh {
	case "", "true", "false", "wait_for":
	default:
		bad("refresh must be true, false or wait_for")
	}
	if _, err := c.Mapping.options(); err != nil {
		bad("%v", err)
	}
	if c.Shards < 0 || (c.Replicas != nil && *c.Replicas < 0) {
		bad("number_of_shards and number_of_replicas must not be negative")
	}
	if c.SharedOwner != "" {
		if esfence.CheckSharedOwner(c.SharedOwner) != nil {
			bad("shared_owner must be 1 to %d bytes of printable UTF-8 without leading or trailing white space", esfence.MaxSharedOwnerBytes)
		}
	}
	if len(errs) > 0 {
		return &ConfigError{Problems: errs}
	}
	return nil
}

// Nodes is the cluster's addresses: URLs, or URL alone.
func (c *Config) Nodes() []string {
	if len(c.URLs) > 0 {
		return c.URLs
	}
	if c.URL == "" {
		return nil
	}
	return []string{c.URL}
}

// validateURLs checks url and urls: exactly one of them, each an http(s) address without
// credentials, one scheme for all.
func (c *Config) validateURLs(bad func(string, ...any)) {
	switch {
	case c.URL != "" && len(c.URLs) > 0:
		bad("set url or urls, not both")
		return
	case c.URL == "" && len(c.URLs) == 0:
		bad("url (or urls) is required")
		return
	}
	key := func(i int) string {
		if len(c.URLs) == 0 {
			return "url"
		}
		return fmt.Sprintf("urls[%d]", i)
	}
	schemes, seen := map[string]bool{}, map[string]int{}
	for i, raw := range c.Nodes() {
		u, err := url.Parse(raw)
		switch {
		case raw == "":
			bad("%s is empty", key(i))
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			bad("%s must be an http:// or https:// address", key(i))
		case u.User != nil:
			bad("%s must not carry credentials; use auth:", key(i))
		default:
			schemes[u.Scheme] = true
			if j, dup := seen[raw]; dup {
				bad("%s repeats urls[%d]", key(i), j)
			}
			seen[raw] = i
		}
	}
	if len(schemes) > 1 {
		bad("urls must be all http:// or all https://")
	}
}

// validate checks the TLS options: one source per PEM, a certificate with its key, inline
// PEM that is PEM (files are read by New).
func (t *TLS) validate(bad func(string, ...any)) {
	if t.CAFile != "" && t.CA != "" {
		bad("tls: set ca_file or ca, not both")
	}
	if t.CA != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(t.CA)) {
		bad("tls: ca holds no PEM certificate")
	}
	if t.CertFile != "" && t.Cert != "" {
		bad("tls: set cert_file or cert, not both")
	}
	if t.KeyFile != "" && t.Key != "" {
		bad("tls: set key_file or key, not both")
	}
	hasCert, hasKey := t.CertFile != "" || t.Cert != "", t.KeyFile != "" || t.Key != ""
	if hasCert != hasKey {
		bad("tls: a client certificate (cert_file or cert) needs its key (key_file or key), and a key its certificate")
	}
	if t.Cert != "" && !hasPEMBlock([]byte(t.Cert), "CERTIFICATE") {
		bad("tls: cert holds no PEM certificate")
	}
	if t.Key != "" && !hasPEMBlock([]byte(t.Key), "PRIVATE KEY") {
		bad("tls: key holds no PEM private key")
	}
	if t.ServerName != "" && (strings.ContainsAny(t.ServerName, " \t\r\n/:@") || strings.TrimSpace(t.ServerName) != t.ServerName) {
		bad("tls: server_name must be a host name")
	}
}

// hasPEMBlock reports whether b holds a PEM block whose type ends with kind.
func hasPEMBlock(b []byte, kind string) bool {
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return false
		}
		if strings.HasSuffix(blk.Type, kind) {
			return true
		}
	}
}

// String renders the configuration with credentials hidden.
func (c Config) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// GoString keeps %#v from printing credentials.
func (c Config) GoString() string { return "sink.Config" + c.String() }

// MarshalJSON renders the configuration; Secret fields show only whether they are set.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config // no methods: no recursion
	return json.Marshal(plain(c))
}
