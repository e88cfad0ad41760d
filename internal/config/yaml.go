package config

import (
	"bytes"
	"errors"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/internal/yamlenv"
)

// Parse reads a YAML document and expands the ${NAME} references in its values
// ([yamlenv.ExpandNode]). It returns the document node; decode parts of it with [Decode].
func Parse(b []byte) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, ScrubYAMLError(err)
	}
	if err := yamlenv.ExpandNode(&root); err != nil {
		return nil, err
	}
	return &root, nil
}

// Decode decodes n into v refusing keys v has no field for, so that a misspelt option is an
// error naming it and its line instead of being ignored. Decoding errors are scrubbed
// ([ScrubYAMLError]).
func Decode(n *yaml.Node, v any) error {
	// yaml.Node.Decode has no KnownFields switch: go through the encoder once.
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(n); err != nil {
		return err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return ScrubYAMLError(err)
	}
	return nil
}

// ScrubYAMLError keeps yaml's messages (line numbers, field names, the Go type a value
// should have had) but cuts what they quote of the document's values: yaml writes the first
// characters of the scalar that failed to decode ("cannot unmarshal !!str `hunter2` into
// int"), and of a composite map key ("invalid map key: ..."); after ${NAME} expansion such
// a value may be a secret. Key names stay: they are the document's structure.
func ScrubYAMLError(err error) error {
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		m := err.Error()
		if i := strings.Index(m, "invalid map key"); i >= 0 {
			return errors.New(m[:i] + "invalid map key (a key must be text, not a list or a mapping)")
		}
		if strings.Contains(m, "`") {
			// "cannot decode !!str `hunter2` as a !!float": an explicit tag the value does
			// not fit.
			return errors.New(quoted.ReplaceAllString(m, ""))
		}
		return err
	}
	out := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		out[i] = ScrubYAMLMessage(m)
	}
	return errors.New(strings.Join(out, "; "))
}

// cannotUnmarshal is yaml's type error: the line, the node's tag, the quoted (truncated)
// value, and the Go type. The value may hold anything, "` into " included, but the Go type
// never holds a backtick, so the last "` into " ends the value.
var cannotUnmarshal = regexp.MustCompile("(?s)^(line \\d+: )?cannot unmarshal (\\S+)(?: `.*`)? into ([^`]+)$")

// quoted is a value yaml quotes in backticks.
var quoted = regexp.MustCompile("(?s) ?`.*`")

// yamlTag is a tag yaml resolves by itself (!!str, !!int, ...); a tag the author wrote
// (!mine) is named only as such.
var yamlTag = regexp.MustCompile(`^!![a-z]+$`)

// ScrubYAMLMessage is [ScrubYAMLError] for one message of a yaml.TypeError.
func ScrubYAMLMessage(m string) string {
	sm := cannotUnmarshal.FindStringSubmatch(m)
	if sm == nil {
		if i := strings.Index(m, "cannot unmarshal"); i >= 0 {
			return m[:i] + "cannot unmarshal a value of the wrong type"
		}
		return m
	}
	tag := sm[2]
	if !yamlTag.MatchString(tag) {
		tag = "a tagged value"
	}
	return sm[1] + "cannot unmarshal " + tag + " into " + sm[3]
}
