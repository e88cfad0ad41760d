package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as Go duration text ("30s", "24h") in YAML.
type Duration time.Duration

// UnmarshalYAML reads "30s"-style text. Errors name the line, never the text; they are
// *yaml.TypeError, so that the decoder goes on and reports the document's other values too.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a duration is text such as \"30s\"", n.Line)}}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: not a duration (use e.g. \"30s\", \"24h\")", n.Line)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes Go duration text.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Std is the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
