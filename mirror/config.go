package mirror

import (
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/sqlstate"
)

// Config is a mirror: one state store shared by one or more pipelines. Build it in Go or read
// it from YAML with ParseConfig or LoadConfig; Open validates it either way.
type Config struct {
	// State is the path of the bbolt state file (statestore): the deployment identity and,
	// per pipeline, its checkpoint and its indices' ownership records. Exactly one of State
	// and StateStore is required.
	State string
	// StateStore keeps the same state in a SQL server that every copy of the deployment
	// reaches instead of a file, and turns on the active/standby mode: each pipeline runs in
	// the one process holding its lease in that store (doc.go, High availability).
	StateStore *StateStoreConfig
	// Pipelines are the pipelines the mirror runs, each supervised on its own. At least one;
	// names are unique.
	Pipelines []PipelineConfig

	// single: read from a file that holds one pipeline at the top level, so problems are
	// named by that file's keys (pipeline:, source:, ...) instead of pipelines[i].
	single bool
}

// PipelineConfig is one pipeline: a source feeding one sink.
type PipelineConfig struct {
	// Name is given once: it keys the checkpoint and the ownership records in the state file,
	// is the owner's pipeline in each index's marker, and names the pipeline in logs, metrics
	// and dead letters. Letters, digits, '_', '.' and '-', at most 100. Required.
	Name string
	// Source is what the pipeline reads.
	Source SourceConfig
	// Sink is the specification's Elasticsearch/OpenSearch sink (one sinks: entry).
	Sink sink.Config
	// DLQ is the path of the dead-letter file (JSON lines). Required; one per pipeline.
	DLQ string
	// Runner tunes batching, backoff and health; zero fields take cdc.RunnerOptions' defaults.
	Runner RunnerConfig
}

// SourceConfig is a PostgreSQL or MySQL/MariaDB source; both types share the vocabulary, and
// each type's own settings are refused on the other.
type SourceConfig struct {
	// Type is postgres, mysql (MariaDB included) or debezium (Debezium's change events from
	// Kafka, package cdc/debezium). Required.
	Type string
	// DSN: PostgreSQL a libpq URL or key=value string; MySQL user:password@tcp(host:port)/db
	// or mysql://user:password@host:port/db (percent-escapes decoded). Required but for
	// debezium; never logged or quoted in errors.
	DSN sink.Secret
	// Name is TableID.Source of every event, so the source's name in each index's marker.
	// Default the type.
	Name string
	// Tables are the captured tables: schema.table (MySQL: db.table), schema.* for every
	// table of a schema, including tables created later, or a bare table (PostgreSQL: in
	// public; MySQL: in the DSN's database). PostgreSQL: default every table the publication
	// publishes. MySQL: required.
	Tables []string
	// Snapshot is initial (the default: read the tables once, then stream) or never.
	Snapshot string

	// PostgreSQL: the replication slot and the publication, created when missing. Default
	// for both: tributary_<pipeline>_<8 hex digits of the pipeline name's hash>, unique per
	// pipeline, fixed in the state file at the first start (doc.go, Slot and publication
	// names; a pipeline that ran under an earlier version keeps tributary_<name>).
	Slot, Publication string
	// SnapshotChunk is how many rows a re-snapshot reads per query, and PostgreSQL's initial
	// snapshot too (pgcdc.Options.SnapshotChunk, mysqlcdc.Options.SnapshotChunk). Default 1024.
	SnapshotChunk int

	// MySQL and MariaDB: Flavor is mariadb (default) or mysql; ServerID the replica id the
	// reader registers with (default derived from the pipeline's name, so pipelines of one
	// file differ); Positioning gtid or file (default gtid on MariaDB, file on MySQL).
	Flavor      string
	ServerID    uint32
	Positioning string
	// MariaDB: SignalTable is the table (db.table, or a bare name in the DSN's database)
	// re-snapshot requests and watermarks are written to, created when missing
	// (mysqlcdc.Options.SignalTable). Default tributary_signal in the first captured table's
	// database.
	SignalTable string

	// Debezium: Brokers (host:port, required) and the topics the connector writes, a list
	// (Topics) or a Go regular expression matching whole names (TopicPattern, which also
	// picks up tables' topics created later, within 30 seconds); one of them is required. Group is the Kafka
	// consumer group every process of this pipeline joins (default tributary-<pipeline>).
	// InferTypes maps tables whose events lack column.propagate.source.type from Kafka
	// Connect's types (debezium.Options.InferTypes). Positioning chooses MySQL/MariaDB
	// versions: gtid or file (default gtid for the mariadb connector, file for mysql). Name
	// should be the native source's name when the pipeline replaces one, so both write the
	// same indices.
	Brokers      []string
	Topics       []string
	TopicPattern string
	Group        string
	InferTypes   bool
	// SessionTimeout is how long the group waits for a silent process before its partitions
	// go to the others (kafkaqueue.Config.SessionTimeout; default 45s). InstanceID makes the
	// process a static member: restarted with the same one (e.g. "${HOSTNAME}"), it takes its
	// partitions back at once; each process needs its own (kafkaqueue.Config.InstanceID).
	SessionTimeout time.Duration
	InstanceID     string
	// Catalog (postgres or mysql) with DSN lets a debezium pipeline read records without an
	// embedded schema (value.converter.schemas.enable=false): their columns come from that
	// database's catalog (debezium.Options.Catalog). DecimalHandling (precise, the default, or
	// string) is the connector's decimal.handling.mode, which such records do not name.
	Catalog         string
	DecimalHandling string
	// PlainDates assures the debezium source that the database holds no date Debezium cannot
	// carry (MariaDB zero dates, PostgreSQL BC dates in a snapshot): debezium.Options.PlainDates.
	PlainDates bool
	// KafkaTLS and KafkaSASL secure the connections to the brokers (kafkaqueue.TLS and
	// kafkaqueue.SASL; YAML kafka_tls: {ca_file, cert_file, key_file, server_name} and
	// kafka_sasl: {mechanism, username, password}). Default: plaintext, no authentication.
	KafkaTLS  *KafkaTLS
	KafkaSASL *KafkaSASL
}

// KafkaTLS is kafkaqueue.TLS as configured.
type KafkaTLS struct {
	CAFile, CertFile, KeyFile, ServerName string
}

// KafkaSASL is kafkaqueue.SASL as configured; the password is never logged or quoted.
type KafkaSASL struct {
	Mechanism, Username string
	Password            sink.Secret
}

// StateStoreConfig is a shared state store (package statestore/sqlstate) and the lease of
// each pipeline kept in it.
type StateStoreConfig struct {
	// Type is postgres (sqlstate.OpenPostgres) or mysql (MariaDB included; sqlstate.OpenMySQL).
	// Required.
	Type string
	// DSN reaches the store's server: PostgreSQL a libpq URL or key=value string; MySQL
	// user:password@tcp(host:port)/ (only ?timeout= is accepted). Required; never logged or
	// quoted in errors.
	DSN sink.Secret
	// Schema is the PostgreSQL schema (MySQL: database) of the store's tables, created when
	// missing. Default tributary.
	Schema string
	// LeaseTTL is how long a pipeline's lease lasts without a renewal; the active renews it
	// every third of it, a standby tries to take it every LeaseTTL/6 (at most 1s). A standby
	// takes over within about LeaseTTL plus its poll after the active stopped renewing.
	// Default 6s; at least 1s.
	LeaseTTL time.Duration
	// Holder names this process in the lease (what a standby's status shows as the active).
	// Default <host name>:<process id>.
	Holder string
}

// Lease timing defaults and bounds (StateStoreConfig.LeaseTTL).
const (
	DefaultLeaseTTL = 6 * time.Second
	minLeaseTTL     = time.Second
)

// RunnerConfig maps onto cdc.RunnerOptions; a zero field takes the runner's default.
type RunnerConfig struct {
	BatchMaxEvents int
	BatchMaxBytes  int
	BatchMaxWait   time.Duration
	// BatchIdleWait: a batch closes once no event came for this long (default 5ms; negative:
	// never, batches close by size and BatchMaxWait only).
	BatchIdleWait time.Duration
	// MaxInFlight: batches at the sink at once, committed in order (default 4).
	MaxInFlight int
	// BackoffMin and BackoffMax bound the jittered waits before a pushed-back batch is offered
	// again and before a failed stream is reopened.
	BackoffMin, BackoffMax time.Duration
	// StallThreshold: events waiting this long with no batch succeeding make the pipeline
	// unhealthy.
	StallThreshold time.Duration
	// BackpressureThreshold: a batch pushed back for longer makes the pipeline unhealthy.
	BackpressureThreshold time.Duration
	// UnansweredThreshold: a write the engine has not answered for longer makes the pipeline
	// unhealthy (sink_not_answering), before the request times out (default 8s; negative:
	// off).
	UnansweredThreshold time.Duration
	// LagThreshold: lag beyond it makes the pipeline unhealthy; LagInterval is how often
	// lag is measured.
	LagThreshold, LagInterval time.Duration
}

// Pipeline returns the pipeline of that name, nil when there is none.
func (c *Config) Pipeline(name string) *PipelineConfig {
	for i := range c.Pipelines {
		if c.Pipelines[i].Name == name {
			return &c.Pipelines[i]
		}
	}
	return nil
}

// Names returns the pipelines' names in configuration order.
func (c *Config) Names() []string {
	out := make([]string, len(c.Pipelines))
	for i, p := range c.Pipelines {
		out[i] = p.Name
	}
	return out
}

// ConfigError lists every problem of a configuration, in file order when it was read from
// one. Problems name keys, lines and environment variables, never values: values may be
// secrets.
type ConfigError struct {
	Problems []ConfigProblem
}

// ConfigProblem is one thing wrong with a configuration.
type ConfigProblem struct {
	// Line is the line of the key in the file (0: a Config built in Go, or unknown).
	Line int
	// Key is where the problem is: "source.slot", "pipelines[1].runner.backoff_max", ""
	// for the whole file.
	Key     string
	Problem string
}

func (p ConfigProblem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Problem)
	return b.String()
}

func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the configuration:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

var pipelineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// Validate reports every problem of c at once as a *ConfigError; Open calls it. It checks the
// sink entries as sink.New would, but connects to nothing.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.validate()
	return v.err()
}

type validator struct {
	c        *Config
	problems []ConfigProblem
}

func (v *validator) bad(key, format string, args ...any) {
	v.problems = append(v.problems, ConfigProblem{Key: key, Problem: fmt.Sprintf(format, args...)})
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &ConfigError{Problems: v.problems}
}

// key names a setting of pipeline i the way the configuration writes it.
func (v *validator) key(i int, sub string) string {
	if v.c.single {
		if sub == "name" {
			return "pipeline"
		}
		return sub
	}
	return "pipelines[" + strconv.Itoa(i) + "]." + sub
}

func (v *validator) validate() {
	c := v.c
	switch {
	case c.State == "" && c.StateStore == nil:
		v.bad("state", "is required (the path of the bbolt state file), or state_store: (a shared store, for active/standby)")
	case c.State != "" && c.StateStore != nil:
		v.bad("state_store", "and state: exclude each other: the state is either a file or a shared store")
	case c.StateStore != nil:
		v.stateStore(c.StateStore)
	}
	if len(c.Pipelines) == 0 {
		v.bad("pipelines", "needs at least one pipeline")
	}
	names := map[string]int{}
	dlqs := map[string]int{}
	slots := map[[2]string]int{}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		switch {
		case p.Name == "":
			v.bad(v.key(i, "name"), "is required (it keys the checkpoint in the state file)")
		case !pipelineName.MatchString(p.Name):
			v.bad(v.key(i, "name"), "use letters, digits, '_', '.' and '-' (at most 100)")
		default:
			if j, dup := names[p.Name]; dup {
				v.bad(v.key(i, "name"), "pipelines[%d] has the same name; names must be unique", j)
			}
			names[p.Name] = i
		}
		v.source(i, &p.Source)
		if c.StateStore != nil && p.Source.Type == "debezium" {
			v.bad(v.key(i, "source.type"), "debezium pipelines cannot run under state_store: (active/standby is for postgres and mysql sources; a debezium pipeline scales out through its consumer group, each process with its own state file and sinks' shared_owner)")
		}
		sc := p.Sink
		if err := sc.Normalize(); err != nil {
			v.bad(v.key(i, "sinks[0]"), "%v", err)
		}
		if p.DLQ == "" {
			v.bad(v.key(i, "dlq"), "is required (the path of the dead-letter file)")
		} else {
			abs, err := filepath.Abs(p.DLQ)
			if err != nil {
				abs = filepath.Clean(p.DLQ)
			}
			if j, dup := dlqs[abs]; dup {
				v.bad(v.key(i, "dlq"), "pipelines[%d] uses the same dead-letter file; each pipeline needs its own", j)
			}
			dlqs[abs] = i
		}
		if p.Source.Type == "postgres" {
			k := [2]string{string(p.Source.DSN), effectiveSlot(p)}
			if j, dup := slots[k]; dup {
				v.bad(v.key(i, "source.slot"), "pipelines[%d] reads the same slot of the same database; give each pipeline its own slot: and publication:", j)
			}
			slots[k] = i
		}
		v.runner(i, &p.Runner)
	}
}

func (v *validator) stateStore(s *StateStoreConfig) {
	switch s.Type {
	case "postgres", "mysql":
	case "":
		v.bad("state_store.type", "is required (postgres or mysql)")
	default:
		v.bad("state_store.type", "must be postgres or mysql")
	}
	if s.DSN == "" {
		v.bad("state_store.dsn", "is required")
	} else if s.Type == "mysql" {
		// A PostgreSQL DSN is not parsed here: pgx reads the certificate files it names while
		// parsing, which belongs to the machine that runs the mirror (Run refuses it there).
		if err := sqlstate.CheckDSN(s.Type, string(s.DSN)); err != nil {
			v.bad("state_store.dsn", "%s", strings.TrimPrefix(err.Error(), statestore.ErrInvalid.Error()+": "))
		}
	}
	if s.Schema != "" && !storeSchema.MatchString(s.Schema) {
		v.bad("state_store.schema", "use letters, digits and '_', starting with a letter or '_' (at most 63)")
	}
	if s.LeaseTTL != 0 && s.LeaseTTL < minLeaseTTL {
		v.bad("state_store.lease_ttl", "must be at least %s", minLeaseTTL)
	}
	if len(s.Holder) > 200 {
		v.bad("state_store.holder", "has at most 200 bytes")
	}
}

// storeSchema is what state_store.schema accepts: an identifier both servers take unquoted.
var storeSchema = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (v *validator) source(i int, s *SourceConfig) {
	key := func(sub string) string { return v.key(i, "source."+sub) }
	if reflect.ValueOf(*s).IsZero() {
		v.bad(v.key(i, "source"), "is required")
		return
	}
	if s.Type == "debezium" {
		v.debezium(key, s)
		return
	}
	if s.DSN == "" {
		v.bad(key("dsn"), "is required")
	}
	if len(s.Brokers) > 0 || len(s.Topics) > 0 || s.TopicPattern != "" || s.Group != "" || s.InferTypes ||
		s.SessionTimeout != 0 || s.InstanceID != "" || s.Catalog != "" || s.DecimalHandling != "" || s.PlainDates || s.KafkaTLS != nil || s.KafkaSASL != nil {
		v.bad(key("type"), "brokers, topics, topic_pattern, group, infer_types, session_timeout, instance_id, catalog, decimal_handling, plain_dates, kafka_tls and kafka_sasl are debezium settings")
	}
	switch s.Snapshot {
	case "", "initial", "never":
	default:
		v.bad(key("snapshot"), "must be initial or never")
	}
	if s.SnapshotChunk < 0 {
		v.bad(key("snapshot_chunk"), "must be positive")
	}
	for j, t := range s.Tables {
		if _, _, err := splitTable(t); err != nil {
			v.bad(key("tables["+strconv.Itoa(j)+"]"), "%v", err)
		}
	}
	only := func(typ string, keys map[string]bool) {
		set := make([]string, 0, len(keys))
		for k, ok := range keys {
			if ok {
				set = append(set, k)
			}
		}
		sort.Strings(set)
		for _, k := range set {
			v.bad(key(k), "is a %s setting", typ)
		}
	}
	switch s.Type {
	case "postgres":
		only("mysql", map[string]bool{"flavor": s.Flavor != "", "server_id": s.ServerID != 0, "positioning": s.Positioning != "",
			"signal_table": s.SignalTable != ""})
		if s.Slot != "" && !slotName.MatchString(s.Slot) {
			v.bad(key("slot"), "use a-z, 0-9 and '_' (at most 63)")
		}
	case "mysql":
		only("postgres", map[string]bool{"slot": s.Slot != "", "publication": s.Publication != ""})
		if s.SignalTable != "" {
			if _, t, err := splitTable(s.SignalTable); err != nil || t == "*" {
				v.bad(key("signal_table"), "must be db.table or a table name")
			}
		}
		if len(s.Tables) == 0 {
			v.bad(key("tables"), "MySQL needs the captured tables listed")
		}
		if !slices.Contains([]string{"", "mariadb", "mysql"}, s.Flavor) {
			v.bad(key("flavor"), "must be mariadb or mysql")
		}
		if !slices.Contains([]string{"", "gtid", "file"}, s.Positioning) {
			v.bad(key("positioning"), "must be gtid or file")
		}
		if s.DSN != "" {
			d, err := parseMySQLDSN(string(s.DSN))
			if err != nil {
				v.bad(key("dsn"), "%v", err)
			} else if d.db == "" {
				for j, t := range s.Tables {
					if db, _, err := splitTable(t); err == nil && db == "" {
						v.bad(key("tables["+strconv.Itoa(j)+"]"), "a table without its database (db.table) needs one in the DSN (.../db)")
					}
				}
			}
		}
	case "":
		v.bad(key("type"), "is required (postgres, mysql or debezium)")
	default:
		v.bad(key("type"), "must be postgres, mysql or debezium")
	}
}

// debezium checks a source of type debezium: Kafka topics instead of a database.
func (v *validator) debezium(key func(string) string, s *SourceConfig) {
	switch {
	case s.Catalog != "" && s.Catalog != "postgres" && s.Catalog != "mysql":
		v.bad(key("catalog"), "must be postgres or mysql")
	case s.Catalog != "" && s.DSN == "":
		v.bad(key("dsn"), "is required with catalog: (the database the connector reads)")
	case s.Catalog == "" && s.DSN != "":
		v.bad(key("catalog"), "is required with dsn: (postgres or mysql)")
	case s.Catalog == "mysql":
		if _, err := parseMySQLDSN(string(s.DSN)); err != nil {
			v.bad(key("dsn"), "%v", err)
		}
	}
	if !slices.Contains([]string{"", "precise", "string"}, s.DecimalHandling) {
		v.bad(key("decimal_handling"), "must be precise or string")
	}
	for k, set := range map[string]bool{"tables": len(s.Tables) > 0, "snapshot": s.Snapshot != "",
		"slot": s.Slot != "", "publication": s.Publication != "", "snapshot_chunk": s.SnapshotChunk != 0,
		"flavor": s.Flavor != "", "server_id": s.ServerID != 0, "signal_table": s.SignalTable != ""} {
		if set {
			v.bad(key(k), "is not a debezium setting (the connector in Kafka Connect reads the database; list its topics)")
		}
	}
	if len(s.Brokers) == 0 {
		v.bad(key("brokers"), "is required (the Kafka brokers, host:port)")
	}
	for j, b := range s.Brokers {
		if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
			v.bad(key("brokers["+strconv.Itoa(j)+"]"), "is not host:port")
		}
	}
	switch {
	case len(s.Topics) == 0 && s.TopicPattern == "":
		v.bad(key("topics"), "is required: the topics the connector writes (or topic_pattern)")
	case len(s.Topics) > 0 && s.TopicPattern != "":
		v.bad(key("topic_pattern"), "is set beside topics: give one of them")
	}
	if s.TopicPattern != "" {
		if _, err := regexp.Compile(s.TopicPattern); err != nil {
			v.bad(key("topic_pattern"), "is not a regular expression: %v", err)
		}
	}
	if !slices.Contains([]string{"", "gtid", "file"}, s.Positioning) {
		v.bad(key("positioning"), "must be gtid or file")
	}
	if s.SessionTimeout < 0 {
		v.bad(key("session_timeout"), "must not be negative")
	}
	if a := s.KafkaSASL; a != nil {
		if !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, strings.ToUpper(a.Mechanism)) {
			v.bad(key("kafka_sasl.mechanism"), "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		if a.Username == "" || a.Password == "" {
			v.bad(key("kafka_sasl"), "needs a username and a password")
		}
	}
	if c := s.KafkaTLS; c != nil && (c.CertFile == "") != (c.KeyFile == "") {
		v.bad(key("kafka_tls"), "cert_file and key_file go together")
	}
}

func (v *validator) runner(i int, r *RunnerConfig) {
	key := func(sub string) string { return v.key(i, "runner."+sub) }
	for name, d := range map[string]time.Duration{
		"batch_max_wait": r.BatchMaxWait, "backoff_min": r.BackoffMin, "backoff_max": r.BackoffMax,
		"stall_threshold": r.StallThreshold, "backpressure_threshold": r.BackpressureThreshold,
		"lag_threshold": r.LagThreshold, "lag_interval": r.LagInterval,
	} {
		if d < 0 {
			v.bad(key(name), "must not be negative")
		}
	}
	if r.BatchMaxEvents < 0 {
		v.bad(key("batch_max_events"), "must not be negative")
	}
	if r.MaxInFlight < 0 || r.MaxInFlight > 64 {
		v.bad(key("max_in_flight"), "must be between 0 (the default) and 64")
	}
	if r.BatchMaxBytes < 0 {
		v.bad(key("batch_max_bytes"), "must not be negative")
	}
	if r.BackoffMin > 0 && r.BackoffMax > 0 && r.BackoffMax < r.BackoffMin {
		v.bad(key("backoff_max"), "is below backoff_min")
	}
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// effectiveSlot is the slot a pipeline's configuration names: its own, or the pipeline's
// default (the state file may record an earlier one: postgresNames, which Open checks).
func effectiveSlot(p *PipelineConfig) string {
	if p.Source.Slot != "" {
		return p.Source.Slot
	}
	return postgresDefault(p.Name)
}

// splitTable reads "schema.table", "schema.*", "table" or "*": the schema (MySQL: the
// database; "" when not given) and the table, "*" for every table.
func splitTable(t string) (schema, table string, err error) {
	schema, table, ok := strings.Cut(t, ".")
	if !ok {
		schema, table = "", t
	}
	switch {
	case table == "" || (ok && schema == "") || strings.Contains(table, "."):
		return "", "", fmt.Errorf("write schema.table, schema.* or table")
	case strings.Contains(schema, "*"):
		return "", "", fmt.Errorf("a schema cannot be a pattern; write schema.*")
	case table != "*" && strings.Contains(table, "*"):
		return "", "", fmt.Errorf("only a whole table name can be a pattern (schema.*)")
	}
	return schema, table, nil
}
