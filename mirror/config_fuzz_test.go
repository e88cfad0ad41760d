package mirror

import (
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/config/configtest"
)

// FuzzMirrorConfig feeds ParseConfig arbitrary YAML, seeded with the example configurations
// of examples/cdcmirror, the documentation's and edge cases, each also with a marker planted
// in its values (configtest.Plant). ParseConfig must never panic; every error is a
// *ConfigError whose problems quote no value (no DSN, no password, no sink id); a
// configuration it accepts passes Validate, and parsing is deterministic. (Config has no
// encoder, so there is no write-back round trip.)
func FuzzMirrorConfig(f *testing.F) {
	configtest.Setenv(f)
	seeds := configtest.Files(f, "../examples/cdcmirror/postgres.yaml", "../examples/cdcmirror/mysql.yaml",
		"../examples/cdcmirror/postgres-opensearch.yaml", "../examples/cdcmirror/mysql-opensearch.yaml",
		"../examples/cdcmirror/pipelines.yaml")
	m := configtest.Marker
	seeds = append(seeds, validConfig, twoPipelines,
		"pipeline: p\nsource: {type: postgres, dsn: 'postgres://u:"+m+"@h/db', slot: "+m+"}\nsinks: [{type: elasticsearch, config: {id: "+m+", url: 'http://x:1', index: '"+m+" x'}}]\nstate: s\ndlq: d\n",
		"pipeline: p\nsource: {type: mysql, dsn: '"+m+"', tables: ["+m+".a.b, '*."+m+"']}\nsinks: [{type: elasticsearch, config: {id: a, url: 'http://x:1', index: i}}]\nstate: s\ndlq: d\n",
		"pipeline: p\nsource: {type: mysql, dsn: 'mysql://u:"+m+"@h:1/db', tables: [a], server_id: "+m+", flavor: "+m+"}\nsinks: [{type: elasticsearch, config: {id: a, url: 'http://x:1', index: i}}]\nstate: s\ndlq: d\nrunner: {batch_max_wait: "+m+", max_in_flight: "+m+"9}\n",
		"state: s\npipelines:\n  - {name: a, source: {type: postgres, dsn: x}, sinks: [{type: elasticsearch, config: {id: a, url: 'http://x:1', index: i}}], dlq: d}\n  - {name: a, source: {type: postgres, dsn: x}, sinks: [{type: elasticsearch, config: {id: a, url: 'http://x:1', index: i}}], dlq: d}\n",
		"state: s\npipelines: []\n", "state: s\npipelines: x\npipeline: p\n", "", "~", "[1, 2]", "pipeline: p\nsinks: []\n",
		"pipeline: p\nsource: {type: postgres, dsn: '${"+configtest.SecretEnv+"}'}\nsinks: [{type: elasticsearch, config: {id: a, url: '${"+configtest.SecretEnv+"}', index: i}}]\nstate: s\ndlq: d\n",
		"pipeline: p\nsource: &s {type: postgres, dsn: x, <<: *s}\n",
		"pipeline: p\nsource: {type: postgres, dsn: '${UNTERMINATED "+m+"'}\n",
	)
	for _, s := range seeds {
		for _, p := range configtest.Plant(s) {
			f.Add([]byte(p))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := ParseConfig(doc)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("not a *ConfigError with problems: %T %v", err, err)
			}
			configtest.CheckNoValue(t, doc, err)
			_, err2 := ParseConfig(doc)
			if err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("parsing again gives another answer:\n%v\n%v", err, err2)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a configuration Validate refuses: %v", err)
		}
		if len(c.Pipelines) == 0 || c.State == "" {
			t.Fatalf("accepted without pipelines or state: %+v", c)
		}
		for _, p := range c.Pipelines {
			if strings.TrimSpace(p.Name) == "" || c.Pipeline(p.Name) == nil {
				t.Fatalf("pipeline %q not found by name", p.Name)
			}
		}
	})
}
