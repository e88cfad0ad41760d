package sink

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/cdc"
)

// template is a parsed index template: literal text and placeholders in order.
type template struct {
	parts []tplPart
}

type tplPart struct {
	lit   string
	field string // "db", "schema" or "table"; empty for a literal
}

// parseTemplate reads {db}, {schema} and {table}; any other {...} is an error, so a typo such
// as {tabel} fails at configuration time instead of naming an index after itself. The literal
// parts are checked against the naming rules with a stand-in for each placeholder.
func parseTemplate(s string) (template, error) {
	var t template
	for rest := s; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			t.parts = append(t.parts, tplPart{lit: rest})
			break
		}
		if rest[i] == '}' {
			return template{}, errors.New("unbalanced } in the index template")
		}
		if i > 0 {
			t.parts = append(t.parts, tplPart{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return template{}, errors.New("unterminated { in the index template")
		}
		f := rest[i+1 : i+j]
		switch f {
		case "db", "schema", "table":
		default:
			return template{}, errors.New("unknown placeholder in the index template (use {db}, {schema}, {table})")
		}
		t.parts = append(t.parts, tplPart{field: f})
		rest = rest[i+j+1:]
	}
	// The template is configuration, and may be ${NAME}-expanded: the error names the rule,
	// not the name.
	probe := t.expand(cdc.TableID{Database: "d", Schema: "s", Table: "t"})
	if rule := indexNameRule(probe); rule != "" {
		return template{}, errors.New("the index template makes an index name that " + rule)
	}
	return t, nil
}

// expand substitutes the table and lowercases: {schema} falls back to the database for
// sources without schemas (MySQL).
func (t template) expand(id cdc.TableID) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.field {
		case "":
			b.WriteString(p.lit)
		case "db":
			b.WriteString(id.Database)
		case "schema":
			if id.Schema != "" {
				b.WriteString(id.Schema)
			} else {
				b.WriteString(id.Database)
			}
		case "table":
			b.WriteString(id.Table)
		}
	}
	return strings.ToLower(b.String())
}

// validIndexName applies Elasticsearch's rules for index names ([indexNameRule]). The error
// names the rule, and quotes the name: index names come from the catalog, not from rows.
func validIndexName(name string) error {
	switch rule := indexNameRule(name); {
	case rule == "":
		return nil
	case name == "" || !utf8.ValidString(name):
		return errors.New("the index name " + rule)
	default:
		return fmt.Errorf("index name %q %s", name, rule)
	}
}

// indexNameRule is the rule name breaks, "" when none (lowercase is applied by expand): not
// empty, not "." or "..", at most 255 bytes, no \ / * ? " < > | , # : or space, not starting
// with - _ +, valid UTF-8. Names starting with df-w- are the fence's write aliases and are
// refused too.
func indexNameRule(name string) string {
	switch {
	case name == "":
		return "is empty"
	case name == "." || name == "..":
		return "is reserved"
	case len(name) > 255:
		return "is longer than 255 bytes"
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case strings.ContainsAny(name, "\\/*?\"<>| ,#:"):
		return "contains one of \\ / * ? \" < > | , # : or a space"
	case strings.ContainsAny(name, "\t\r\n\x00"):
		return "contains a control character"
	case strings.HasPrefix(name, "-"), strings.HasPrefix(name, "_"), strings.HasPrefix(name, "+"):
		return "starts with -, _ or +"
	case strings.HasPrefix(name, "df-w-"):
		return "starts with df-w-, the prefix of the sink's write aliases"
	}
	return ""
}

// IndexName returns the index a table's rows go to under the template, validated.
func IndexName(tmpl string, id cdc.TableID) (string, error) {
	t, err := parseTemplate(tmpl)
	if err != nil {
		return "", err
	}
	name := t.expand(id)
	if err := validIndexName(name); err != nil {
		return "", fmt.Errorf("table %s: %w", id, err)
	}
	return name, nil
}
