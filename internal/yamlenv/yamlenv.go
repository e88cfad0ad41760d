// Package yamlenv expands ${NAME} references to environment variables in the values of a
// parsed YAML document. It is the one expansion every configuration file of the project
// uses (the sink's entry, the example binaries' files), so they all agree on its rules:
//
//   - only scalar values are expanded, never keys;
//   - "${NAME}" is replaced by the variable's value; an unset variable is an error naming it
//     (never its would-be value); NAME is [A-Za-z_][A-Za-z0-9_]*;
//   - "$${" is a literal "${"; any other "$" stays as it is;
//   - a plain (unquoted) scalar is re-typed by what it expands to, so "${N}" can fill a number;
//     a quoted one stays text.
//
// Errors name the line and the variable, never a value: values may be secrets.
package yamlenv

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ExpandNode expands every scalar value below n in place. Errors start with "line N: ".
func ExpandNode(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := Expand(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = ""
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if err := ExpandNode(n.Content[i]); err != nil {
				return err
			}
		}
	default:
		for _, c := range n.Content {
			if err := ExpandNode(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// Expand expands the references in one string.
func Expand(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New("unterminated ${ in a value")
			}
			name := s[i+2 : i+2+end]
			if !validName(name) {
				// The text between the braces is not a name, so it may be anything the
				// author typed, a secret included: do not quote it.
				return "", errors.New("invalid environment variable name in ${...}")
			}
			v, ok := os.LookupEnv(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(v)
			i += 2 + end + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}
