package main

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/internal/config/configtest"
)

// FuzzRecordsvcConfig feeds parseConfig arbitrary YAML, seeded with memory.yaml, every yaml
// block of CONFIG.md and edge cases, each also with a marker planted in its values
// (configtest.Plant). parseConfig must never panic; every error is a *configError whose text
// quotes no value (no Mongo URI, no SASL password); an accepted configuration validates, and
// its defaults are a fixed point (withDefaults again changes nothing).
func FuzzRecordsvcConfig(f *testing.F) {
	configtest.Setenv(f)
	seeds := configtest.Files(f, "memory.yaml")
	seeds = append(seeds, configtest.MarkdownYAML(configtest.Files(f, "CONFIG.md")[0])...)
	m := configtest.Marker
	seeds = append(seeds,
		"stores: {m: {kind: mongodb, uri: 'mongodb://u:"+m+"@h/db', timeout: "+m+"}}\n",
		"stores: {m: {kind: memory, queue: {kind: kafka, brokers: ['"+m+"'], sasl: {mechanism: "+m+", username: u, password: "+m+"}}}}\n",
		"limits: {max_items: "+m+"}\nstores: {m: {kind: memory}}\n",
		"health:\n  interval: |\n    "+m+"\n    two lines\nstores: {m: {kind: memory}}\n",
		"stores: {\"a b\": {kind: memory}}\n\"un known\": 1\n",
		"stores: {m: {kind: memory}}\nservice: {merge_budget: !!float "+m+"}\n",
		"stores: {m: {kind: memory, {k: "+m+"}: x}}\n",
		"stores:\n  m: &a {kind: memory, <<: *a}\n", "", "~", "[]", "stores: []\n", "stores: {m: ~}\n",
		"mode: ${"+configtest.SecretEnv+"}\nstores: {m: {kind: memory}}\n",
	)
	for _, s := range seeds {
		for _, p := range configtest.Plant(s) {
			f.Add([]byte(p))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := parseConfig(doc)
		if err != nil {
			var ce *configError
			if !errors.As(err, &ce) {
				t.Fatalf("not a *configError: %T %v", err, err)
			}
			configtest.CheckNoValue(t, doc, err)
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("an accepted configuration does not validate: %v", err)
		}
		again := *c
		again.withDefaults()
		if !reflect.DeepEqual(&again, c) {
			t.Fatalf("withDefaults is not a fixed point:\n%+v\n%+v", c, &again)
		}
	})
}
