package config

import (
	"encoding/json"
	"fmt"
)

// Secret is a credential from a configuration. Every way of printing it (fmt verbs, JSON,
// YAML) shows only whether it is set, so a configuration can be logged as a whole without
// leaking it. string(s) is the value.
type Secret string

// Redacted is what a set Secret prints as.
const Redacted = "[redacted]"

func (s Secret) show() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String hides the value.
func (s Secret) String() string { return s.show() }

// GoString hides the value from %#v.
func (s Secret) GoString() string { return `"` + s.show() + `"` }

// Format hides the value from every fmt verb, %x and %q included.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(s.show()))
}

// MarshalJSON hides the value.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.show()) }

// MarshalYAML hides the value.
func (s Secret) MarshalYAML() (any, error) { return s.show(), nil }
