package mirror

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/yamlenv"
	"github.com/tributary-dev/tributary/sink"
)

// LoadConfig reads and validates a configuration file (ParseConfig); errors start with the
// path.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig reads a YAML configuration and validates it. Two forms:
//
//	# one pipeline                     # several, sharing the state file
//	pipeline: orders                   state: mirror.state
//	source: {...}                      pipelines:
//	sinks: [{type: elasticsearch, ...}]  - name: orders
//	state: mirror.state                    source: {...}
//	dlq: orders.dlq.jsonl                  sinks: [...]
//	runner: {...}                          dlq: orders.dlq.jsonl
//	                                       runner: {...}
//
// Each sinks: entry is read by sink.ParseConfig (every sink option applies, and its own
// ${ENV} expansion). ${NAME} in any other value is replaced by the environment variable (an
// unset one is an error naming it; "$${" is a literal "${"). Every problem -- unknown keys,
// values of the wrong type or out of range, missing settings -- is reported at once in a
// *ConfigError, each with its line; values are never quoted, since they may be secrets.
func ParseConfig(b []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, &ConfigError{Problems: []ConfigProblem{{Problem: strings.TrimPrefix(config.ScrubYAMLError(err).Error(), "yaml: ")}}}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, &ConfigError{Problems: []ConfigProblem{{Problem: "the configuration must be a YAML mapping (state: and pipelines:, or pipeline:, source:, sinks:, state:, dlq:, runner:)"}}}
	}
	p := &parser{lines: map[string]int{}, failed: map[string]bool{}}
	c := p.document(root.Content[0])
	v := &validator{c: c}
	v.validate()
	// A value that failed to read is reported once, not again as missing.
	for _, vp := range v.problems {
		if p.failedAt(vp.Key) {
			continue
		}
		vp.Line = p.lineOf(vp.Key)
		p.problems = append(p.problems, vp)
	}
	if len(p.problems) > 0 {
		sort.SliceStable(p.problems, func(i, j int) bool { return p.problems[i].Line < p.problems[j].Line })
		return nil, &ConfigError{Problems: p.problems}
	}
	return c, nil
}

// parser reads the YAML tree into a Config, collecting problems instead of stopping at the
// first. It remembers the line of every key it read, by the key's path, for the validator's
// problems.
type parser struct {
	problems []ConfigProblem
	lines    map[string]int
	failed   map[string]bool // paths whose value could not be read
	// sections, when not nil, records the keys of every mapping read, by the mapping's
	// path (ConfigKeys).
	sections map[string][]string
}

func (p *parser) bad(line int, key, format string, args ...any) {
	p.problems = append(p.problems, ConfigProblem{Line: line, Key: key, Problem: fmt.Sprintf(format, args...)})
	p.failed[key] = true
}

// lineOf finds the line of key, or of its nearest enclosing key.
func (p *parser) lineOf(key string) int {
	for k := key; k != ""; {
		if l, ok := p.lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

func (p *parser) failedAt(key string) bool {
	for k := range p.failed {
		if key == k || strings.HasPrefix(key, k+".") || strings.HasPrefix(key, k+"[") {
			return true
		}
	}
	return false
}

// field is one known key of a mapping and how to read its value.
type field struct {
	name string
	read func(n *yaml.Node, key string)
}

// mapping reads a mapping node: each key to its field, unknown keys reported with the known
// ones. prefix is the mapping's own path ("" at the top, else "source." etc).
func (p *parser) mapping(n *yaml.Node, prefix string, fields []field) {
	where := strings.TrimSuffix(prefix, ".")
	if n.Kind != yaml.MappingNode {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		p.bad(n.Line, where, "must be a mapping")
		return
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	if p.sections != nil {
		p.sections[where] = names
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := prefix + k.Value
		j := -1
		for fi, f := range fields {
			if f.name == k.Value {
				j = fi
			}
		}
		if j < 0 {
			u := config.UnknownKeyProblem(k, where, names)
			p.problems = append(p.problems, ConfigProblem{Line: k.Line, Problem: u.Sentence()})
			if u.Suggestion != "" {
				// The key it is likely a misspelling of is reported through it, not again
				// as missing.
				p.failed[prefix+u.Suggestion] = true
			}
			continue
		}
		if seen[k.Value] {
			p.bad(k.Line, key, "is given twice")
			continue
		}
		seen[k.Value] = true
		p.lines[key] = k.Line
		fields[j].read(val, key)
	}
}

// expand applies ${ENV} to a scalar value; false when it failed (reported).
func (p *parser) expand(n *yaml.Node, key string) bool {
	if err := yamlenv.ExpandNode(n); err != nil {
		p.bad(n.Line, key, "%v", strings.TrimPrefix(err.Error(), "line "+strconv.Itoa(n.Line)+": "))
		return false
	}
	return true
}

func (p *parser) scalar(n *yaml.Node, key, want string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.bad(n.Line, key, "must be %s", want)
		return false
	}
	return p.expand(n, key)
}

func (p *parser) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if p.scalar(n, key, "text") {
			*dst = n.Value
		}
	}
}

func (p *parser) secret(dst *sink.Secret) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if p.scalar(n, key, "text") {
			*dst = sink.Secret(n.Value)
		}
	}
}

func (p *parser) integer(dst *int) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if !p.scalar(n, key, "a whole number") {
			return
		}
		v, err := strconv.ParseInt(n.Value, 10, 0)
		if err != nil {
			p.bad(n.Line, key, "must be a whole number")
			return
		}
		*dst = int(v)
	}
}

func (p *parser) uint32(dst *uint32) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if !p.scalar(n, key, "a whole number") {
			return
		}
		v, err := strconv.ParseUint(n.Value, 10, 32)
		if err != nil || v == 0 {
			p.bad(n.Line, key, "must be a whole number from 1 to 4294967295")
			return
		}
		*dst = uint32(v)
	}
}

func (p *parser) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if !p.scalar(n, key, `a duration such as "30s"`) {
			return
		}
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			p.bad(n.Line, key, `not a duration (use e.g. "500ms", "30s", "5m")`)
			return
		}
		*dst = v
	}
}

func (p *parser) strings(dst *[]string) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if n.Kind != yaml.SequenceNode {
			p.bad(n.Line, key, "must be a list")
			return
		}
		for i, e := range n.Content {
			ek := key + "[" + strconv.Itoa(i) + "]"
			p.lines[ek] = e.Line
			var s string
			p.str(&s)(e, ek)
			*dst = append(*dst, s)
		}
	}
}

// document reads the top level: either one pipeline (pipeline:, source:, ...) or
// pipelines:.
func (p *parser) document(n *yaml.Node) *Config {
	c := &Config{}
	var single PipelineConfig
	var list *yaml.Node
	hasSingle := false
	singleKey := func(read func(*yaml.Node, string)) func(*yaml.Node, string) {
		return func(n *yaml.Node, key string) { hasSingle = true; read(n, key) }
	}
	p.mapping(n, "", []field{
		{"state", p.str(&c.State)},
		{"state_store", func(n *yaml.Node, key string) { c.StateStore = &StateStoreConfig{}; p.stateStore(n, key, c.StateStore) }},
		{"pipelines", func(n *yaml.Node, _ string) { list = n }},
		{"pipeline", singleKey(p.str(&single.Name))},
		{"source", singleKey(func(n *yaml.Node, key string) { p.source(n, key, &single.Source) })},
		{"sinks", singleKey(func(n *yaml.Node, key string) { p.sinks(n, key, &single.Sink) })},
		{"dlq", singleKey(p.str(&single.DLQ))},
		{"runner", singleKey(func(n *yaml.Node, key string) { p.runner(n, key, &single.Runner) })},
	})
	switch {
	case list != nil && hasSingle:
		p.bad(list.Line, "pipelines", "with pipelines:, write name:, source:, sinks:, dlq: and runner: in each entry, not at the top level")
	case list != nil:
		p.pipelines(list, c)
	default:
		c.single = true
		c.Pipelines = []PipelineConfig{single}
		if _, ok := p.lines["sinks"]; !ok {
			p.bad(0, "sinks", "needs one entry (type: elasticsearch)")
		}
	}
	return c
}

func (p *parser) pipelines(n *yaml.Node, c *Config) {
	if n.Kind != yaml.SequenceNode {
		p.bad(n.Line, "pipelines", "must be a list")
		return
	}
	if len(n.Content) == 0 {
		p.bad(n.Line, "pipelines", "needs at least one pipeline")
		return
	}
	c.Pipelines = make([]PipelineConfig, len(n.Content))
	for i, e := range n.Content {
		pc := &c.Pipelines[i]
		prefix := "pipelines[" + strconv.Itoa(i) + "]"
		p.lines[prefix] = e.Line
		p.mapping(e, prefix+".", []field{
			{"name", p.str(&pc.Name)},
			{"source", func(n *yaml.Node, key string) { p.source(n, key, &pc.Source) }},
			{"sinks", func(n *yaml.Node, key string) { p.sinks(n, key, &pc.Sink) }},
			{"dlq", p.str(&pc.DLQ)},
			{"runner", func(n *yaml.Node, key string) { p.runner(n, key, &pc.Runner) }},
		})
		if _, ok := p.lines[prefix+".sinks"]; !ok {
			p.bad(e.Line, prefix+".sinks", "needs one entry (type: elasticsearch)")
		}
	}
}

func (p *parser) source(n *yaml.Node, key string, s *SourceConfig) {
	p.mapping(n, key+".", []field{
		{"type", p.str(&s.Type)},
		{"dsn", p.secret(&s.DSN)},
		{"name", p.str(&s.Name)},
		{"tables", p.strings(&s.Tables)},
		{"snapshot", p.str(&s.Snapshot)},
		{"slot", p.str(&s.Slot)},
		{"publication", p.str(&s.Publication)},
		{"snapshot_chunk", p.integer(&s.SnapshotChunk)},
		{"flavor", p.str(&s.Flavor)},
		{"server_id", p.uint32(&s.ServerID)},
		{"positioning", p.str(&s.Positioning)},
		{"signal_table", p.str(&s.SignalTable)},
		{"brokers", p.strings(&s.Brokers)},
		{"topics", p.strings(&s.Topics)},
		{"topic_pattern", p.str(&s.TopicPattern)},
		{"group", p.str(&s.Group)},
		{"infer_types", p.boolean(&s.InferTypes)},
		{"session_timeout", p.duration(&s.SessionTimeout)},
		{"instance_id", p.str(&s.InstanceID)},
		{"catalog", p.str(&s.Catalog)},
		{"decimal_handling", p.str(&s.DecimalHandling)},
		{"plain_dates", p.boolean(&s.PlainDates)},
		{"kafka_tls", func(n *yaml.Node, key string) {
			s.KafkaTLS = &KafkaTLS{}
			p.mapping(n, key+".", []field{
				{"ca_file", p.str(&s.KafkaTLS.CAFile)},
				{"cert_file", p.str(&s.KafkaTLS.CertFile)},
				{"key_file", p.str(&s.KafkaTLS.KeyFile)},
				{"server_name", p.str(&s.KafkaTLS.ServerName)},
			})
		}},
		{"kafka_sasl", func(n *yaml.Node, key string) {
			s.KafkaSASL = &KafkaSASL{}
			p.mapping(n, key+".", []field{
				{"mechanism", p.str(&s.KafkaSASL.Mechanism)},
				{"username", p.str(&s.KafkaSASL.Username)},
				{"password", p.secret(&s.KafkaSASL.Password)},
			})
		}},
	})
}

func (p *parser) boolean(dst *bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if !p.scalar(n, key, "true or false") {
			return
		}
		v, err := strconv.ParseBool(n.Value)
		if err != nil {
			p.bad(n.Line, key, "must be true or false")
			return
		}
		*dst = v
	}
}

func (p *parser) stateStore(n *yaml.Node, key string, s *StateStoreConfig) {
	p.mapping(n, key+".", []field{
		{"type", p.str(&s.Type)},
		{"dsn", p.secret(&s.DSN)},
		{"schema", p.str(&s.Schema)},
		{"lease_ttl", p.duration(&s.LeaseTTL)},
		{"holder", p.str(&s.Holder)},
	})
}

func (p *parser) runner(n *yaml.Node, key string, r *RunnerConfig) {
	p.mapping(n, key+".", []field{
		{"batch_max_events", p.integer(&r.BatchMaxEvents)},
		{"batch_max_bytes", p.integer(&r.BatchMaxBytes)},
		{"batch_max_wait", p.duration(&r.BatchMaxWait)},
		{"batch_idle_wait", p.duration(&r.BatchIdleWait)},
		{"max_in_flight", p.integer(&r.MaxInFlight)},
		{"backoff_min", p.duration(&r.BackoffMin)},
		{"backoff_max", p.duration(&r.BackoffMax)},
		{"stall_threshold", p.duration(&r.StallThreshold)},
		{"backpressure_threshold", p.duration(&r.BackpressureThreshold)},
		{"unanswered_threshold", p.duration(&r.UnansweredThreshold)},
		{"lag_threshold", p.duration(&r.LagThreshold)},
		{"lag_interval", p.duration(&r.LagInterval)},
	})
}

// sinks reads the sinks: list: exactly one entry, which sink.ParseConfigNode reads from the
// file's own node (with its own ${ENV} expansion: expanding here as well would turn a literal
// "$${" into a reference), so that its problems keep their lines in the file; each is
// reported as one of the file's, its key inside the entry ("sinks[0].config.batch").
func (p *parser) sinks(n *yaml.Node, key string, dst *sink.Config) {
	if n.Kind != yaml.SequenceNode {
		p.bad(n.Line, key, "must be a list of sink entries")
		return
	}
	switch len(n.Content) {
	case 0:
		p.bad(n.Line, key, "needs one entry (type: elasticsearch)")
		return
	case 1:
	default:
		p.bad(n.Line, key, "a pipeline has one sink; write one pipeline per sink")
		return
	}
	entryKey := key + "[0]"
	e := n.Content[0]
	p.lines[entryKey] = e.Line
	if p.sections != nil {
		p.sections[entryKey] = append(p.sections[entryKey], sink.EntryKeys()...)
	}
	c, err := sink.ParseConfigNode(e)
	if err == nil {
		*dst = c
		return
	}
	var se *sink.ConfigError
	if !errors.As(err, &se) || len(se.Located) == 0 {
		p.bad(e.Line, entryKey, "%v", err)
		return
	}
	p.failed[entryKey] = true
	for _, lp := range se.Located {
		lp = lp.In(entryKey)
		if lp.Line == 0 {
			lp.Line = e.Line
		}
		if lp.Unknown != "" {
			p.problems = append(p.problems, ConfigProblem{Line: lp.Line, Problem: lp.Sentence()})
		} else {
			p.problems = append(p.problems, ConfigProblem{Line: lp.Line, Key: lp.Key, Problem: lp.Message})
		}
	}
}

// everySection is a configuration that holds every section ParseConfig reads, in both
// forms, for ConfigKeys. A new section (a mapping inside source:, say) needs its place here.
const everySection = `
state: s
state_store: {}
pipeline: p
source: {kafka_tls: {}, kafka_sasl: {}}
sinks: [{type: elasticsearch, config: {}}]
runner: {}
---
pipelines:
  - source: {kafka_tls: {}, kafka_sasl: {}}
    sinks: [{type: elasticsearch, config: {}}]
    runner: {}
`

// ConfigKeys lists every key ParseConfig accepts, as paths: "state", "source",
// "source.kafka_tls.ca_file", "sinks[].config.batch.max_docs", "pipelines[].runner.lag_interval".
// The keys of mirror's own sections are the ones its parser reads (recorded while it reads a
// document holding every section), the sink entry's those of sink.EntryKeys. A configuration
// reference is checked against it (examples/cdcmirror/CONFIG.md).
func ConfigKeys() []string {
	var out []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(everySection))
	for {
		var root yaml.Node
		if err := dec.Decode(&root); err != nil {
			break
		}
		p := &parser{lines: map[string]int{}, failed: map[string]bool{}, sections: map[string][]string{}}
		p.document(root.Content[0])
		for _, s := range slices.Sorted(maps.Keys(p.sections)) {
			for _, k := range p.sections[s] {
				add(indexless.ReplaceAllString(config.JoinKey(s, k), "[]"))
			}
		}
	}
	return out
}

// indexless finds the list indices of a key path ("pipelines[0]").
var indexless = regexp.MustCompile(`\[\d+\]`)
