package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/internal/yamlenv"
	"github.com/tributary-dev/tributary/sink"
)

// config is a cdcmirror configuration file.
type config struct {
	Pipeline string       `yaml:"pipeline"`
	Source   sourceConfig `yaml:"source"`
	// Sinks is the specification's sinks: list, kept as YAML so that each entry is read by
	// sink.ParseConfig exactly as the library reads it (its own ${ENV} expansion included).
	Sinks  []yaml.Node  `yaml:"sinks"`
	State  string       `yaml:"state"`
	DLQ    string       `yaml:"dlq"`
	Runner runnerConfig `yaml:"runner"`

	// Sink is Sinks[0], parsed.
	Sink sink.Config `yaml:"-"`
}

// sourceConfig is the source: section. The postgres and mysql settings share one struct so
// that a key of the other type is reported as such instead of as unknown.
type sourceConfig struct {
	Type string `yaml:"type"` // postgres | mysql
	// DSN: PostgreSQL a libpq URL or key=value string; MySQL user:password@tcp(host:port)/db.
	DSN      sink.Secret `yaml:"dsn"`
	Name     string      `yaml:"name"`     // TableID.Source of every event; default the type
	Tables   []string    `yaml:"tables"`   // "schema.table" / "db.table", or "table"
	Snapshot string      `yaml:"snapshot"` // initial (default) | never

	// PostgreSQL.
	Slot        string `yaml:"slot"`
	Publication string `yaml:"publication"`

	// MySQL and MariaDB.
	Flavor      string `yaml:"flavor"`      // mariadb (default) | mysql
	ServerID    uint32 `yaml:"server_id"`   // default derived from name
	Positioning string `yaml:"positioning"` // gtid | file; default by flavor
}

// runnerConfig is the runner: section; zero values take cdc.RunnerOptions' defaults.
type runnerConfig struct {
	BatchMaxEvents int           `yaml:"batch_max_events"`
	BatchMaxBytes  int           `yaml:"batch_max_bytes"`
	BatchMaxWait   sink.Duration `yaml:"batch_max_wait"`
	BackoffMin     sink.Duration `yaml:"backoff_min"`
	BackoffMax     sink.Duration `yaml:"backoff_max"`
	StallThreshold sink.Duration `yaml:"stall_threshold"`
}

// loadConfig reads and validates a configuration file.
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

// parseConfig reads a configuration: unknown keys are errors naming the key and its line,
// ${NAME} in values is replaced by the environment variable (an unset one is an error naming
// it; "$${" is a literal "${"), and errors never quote a value, since values may be secrets.
func parseConfig(b []byte) (*config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, scrubYAMLError(err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the configuration must be a YAML mapping (pipeline:, source:, sinks:, state:, dlq:, runner:)")
	}
	top := root.Content[0]
	if err := checkKeys(top, reflect.TypeFor[config](), ""); err != nil {
		return nil, err
	}
	// The sinks: entries are expanded by sink.ParseConfig; expanding them here as well would
	// turn a literal "$${" into a reference.
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "sinks" {
			continue
		}
		if err := yamlenv.ExpandNode(top.Content[i+1]); err != nil {
			return nil, err
		}
	}
	var c config
	if err := top.Decode(&c); err != nil {
		return nil, scrubYAMLError(err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	entry, err := yaml.Marshal(&c.Sinks[0])
	if err != nil {
		return nil, fmt.Errorf("sinks: %w", err)
	}
	if c.Sink, err = sink.ParseConfig(entry); err != nil {
		return nil, fmt.Errorf("sinks[0] (line %d): %w", c.Sinks[0].Line, err)
	}
	return &c, nil
}

// checkKeys reports the first key of a mapping that the struct type t has no yaml field for,
// and descends into fields that are structs themselves. The line numbers are the file's.
func checkKeys(n *yaml.Node, t reflect.Type, where string) error {
	if n.Kind != yaml.MappingNode {
		return nil // a scalar where a mapping belongs is the decoder's to report
	}
	fields := map[string]reflect.Type{}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown key %q%s (known: %s)", k.Line, k.Value, where, strings.Join(names, ", "))
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[yaml.Node]() {
			if err := checkKeys(n.Content[i+1], ft, " in "+k.Value+":"); err != nil {
				return err
			}
		}
	}
	return nil
}

var pipelineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// validate checks everything but the sink entry, which sink.ParseConfig checks. Messages name
// keys, never values.
func (c *config) validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	switch {
	case c.Pipeline == "":
		bad("pipeline: is required (it keys the checkpoint in the state file)")
	case !pipelineName.MatchString(c.Pipeline):
		bad("pipeline: use letters, digits, '_', '.' and '-' (at most 100)")
	}
	s := &c.Source
	if reflect.ValueOf(*s).IsZero() {
		bad("source: is required")
	} else {
		s.validate(bad)
	}
	switch len(c.Sinks) {
	case 0:
		bad("sinks: needs one entry (type: elasticsearch)")
	case 1:
	default:
		bad("sinks: cdcmirror runs one sink per pipeline; run one cdcmirror per sink")
	}
	if c.State == "" {
		bad("state: is required (the path of the bbolt state file)")
	}
	if c.DLQ == "" {
		bad("dlq: is required (the path of the dead-letter file)")
	}
	r := c.Runner
	if r.BatchMaxEvents < 0 || r.BatchMaxBytes < 0 || r.BatchMaxWait < 0 || r.BackoffMin < 0 || r.BackoffMax < 0 || r.StallThreshold < 0 {
		bad("runner: values must not be negative")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func (s *sourceConfig) validate(bad func(string, ...any)) {
	if s.DSN == "" {
		bad("source.dsn: is required")
	}
	switch s.Snapshot {
	case "", "initial", "never":
	default:
		bad("source.snapshot: must be initial or never")
	}
	for i, t := range s.Tables {
		if t == "" || strings.HasPrefix(t, ".") || strings.HasSuffix(t, ".") {
			bad("source.tables[%d]: write table or schema.table", i)
		}
	}
	only := func(typ string, keys map[string]bool) {
		for k, set := range keys {
			if set {
				bad("source.%s: is a %s setting", k, typ)
			}
		}
	}
	switch s.Type {
	case "postgres":
		only("mysql", map[string]bool{"flavor": s.Flavor != "", "server_id": s.ServerID != 0, "positioning": s.Positioning != ""})
	case "mysql":
		only("postgres", map[string]bool{"slot": s.Slot != "", "publication": s.Publication != ""})
		if len(s.Tables) == 0 {
			bad("source.tables: MySQL needs the captured tables listed")
		}
		if !slices.Contains([]string{"", "mariadb", "mysql"}, s.Flavor) {
			bad("source.flavor: must be mariadb or mysql")
		}
		if !slices.Contains([]string{"", "gtid", "file"}, s.Positioning) {
			bad("source.positioning: must be gtid or file")
		}
	case "":
		bad("source.type: is required (postgres or mysql)")
	default:
		bad("source.type: must be postgres or mysql")
	}
}

// scrubYAMLError keeps the structure of a decoding error (line, key, expected type) but drops
// the value yaml quotes, which after expansion may be a secret.
func scrubYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	out := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if j := strings.Index(m, "cannot unmarshal"); j >= 0 {
			m = m[:j] + "a value of the wrong type"
			if k := strings.LastIndex(te.Errors[i], " into "); k >= 0 {
				m += " (expected " + goTypeWord(te.Errors[i][k+len(" into "):]) + ")"
			}
		}
		out[i] = m
	}
	return errors.New(strings.Join(out, "; "))
}

// goTypeWord names a Go type from a yaml error in configuration terms.
func goTypeWord(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "main."):
		return "a mapping"
	default:
		return "text"
	}
}
