package config

import (
	"bytes"
	"errors"
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

// ScrubYAMLError keeps yaml's messages (line numbers, field names) but cuts every type error
// to its structural part: yaml quotes the scalar that failed to decode, and after ${NAME}
// expansion that scalar may be a secret.
func ScrubYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	out := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if j := strings.Index(m, "cannot unmarshal"); j >= 0 {
			if k := strings.Index(m[j:], "`"); k >= 0 {
				m = m[:j] + "a value of the wrong type cannot be read"
			}
		}
		out[i] = m
	}
	return errors.New(strings.Join(out, "; "))
}
